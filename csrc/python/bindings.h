// Shared pieces of the pybind11 layer: the only code that knows about Python.
#pragma once
#include <mutex>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/scalar.h"
#include "core/tensor.h"
#include "ops/ops.h"

namespace py = pybind11;

namespace fg {
// The Tensor a Python object holds, or nullptr if it is not a Tensor (None included): one type
// check, no registry lookups, no refcount traffic. tensor_bind.cpp.
const Tensor* tensor_of(PyObject* obj);
// The Python object of `t`: its existing one (an in-place op returns its input) or a new one; None
// for an undefined tensor. A new reference.
PyObject* tensor_to_py(const Tensor& t);
}  // namespace fg

// Tensors cross the boundary on every op, so their caster skips pybind11's generic holder caster
// (a type-registry lookup for each argument and result). None is rejected (a TypeError from
// overload resolution) instead of becoming a null tensor.
namespace pybind11::detail {
template <>
struct type_caster<std::shared_ptr<fg::TensorImpl>> {
  PYBIND11_TYPE_CASTER(std::shared_ptr<fg::TensorImpl>, const_name("Tensor"));
  bool load(handle src, bool) {
    const fg::Tensor* t = fg::tensor_of(src.ptr());
    if (!t) return false;
    value = *t;
    return true;
  }
  static handle cast(const std::shared_ptr<fg::TensorImpl>& src, return_value_policy, handle) {
    return fg::tensor_to_py(src);
  }
};
// Still the holder of the bound class (the caster above no longer says so by deriving from
// pybind11's holder caster).
template <>
struct is_holder_type<fg::TensorImpl, std::shared_ptr<fg::TensorImpl>> : std::true_type {};
// Sizes and strides cross as lists of ints, as std::vector<int64_t> did.
template <>
struct type_caster<fg::Dims> : list_caster<fg::Dims, int64_t> {};
}  // namespace pybind11::detail

namespace fg {

// Drops a Python reference held by C++ code that may run without the GIL (a node freed in a
// backward pass) or after the interpreter has gone (then it is left: nothing can free it).
inline void release_python_object(PyObject* obj) {
  if (!obj || !Py_IsInitialized()) return;
  py::gil_scoped_acquire gil;
  Py_DECREF(obj);
}

// Python dtype objects (fastgrad.float32, ...) are created by the Python package and registered
// here; C++ maps them to DType through their `_code` attribute.
DType dtype_from_py(py::handle obj);
py::object dtype_to_py(DType d);
// The Python Size type (a tuple subclass).
py::object size_to_py(const Shape& shape);

// A Python number (bool, int, float or a numpy scalar) as a Scalar; false if `obj` is not one.
// An int that int64 cannot hold raises OverflowError, as PyTorch.
bool scalar_from_py(py::handle obj, Scalar& out);
// The name of obj's type as Python's own messages write it ("str", "NoneType", "Tensor").
std::string type_name(py::handle obj);
// A tensor or a Python number as a tensor (numbers become 0-d tensors of `like`'s dtype rules).
Tensor tensor_or_scalar(py::handle obj, DType dtype_for_scalar);
// A Python sequence of tensors and Nones, None as an undefined tensor (tensor_bind.cpp).
std::vector<Tensor> optional_tensor_list(py::handle seq);

// numpy interop (convert.cpp)
Tensor tensor_from_numpy(py::array array, bool share_memory);
// A new tensor holding `bytes` (its elements in row-major order). Python data a binding makes a tensor
// of (an index list, fastgrad.tensor(data)) goes through it: while a compiled function captures, it
// is a step of its own that keeps the bytes, so a replay makes the same tensor and a change of the
// data changes the program's fingerprint, as other constants of the function do.
Tensor tensor_of_bytes(std::vector<uint8_t> bytes, const Shape& shape, DType dtype);
// The values of Python data (numbers, lists, tuples) as numpy converted them into `array`: by
// tensor_of_bytes, so that a compiled function keeps them (its guards see Python data by value).
Tensor tensor_of_python_data(py::array array);
py::array tensor_to_numpy(const Tensor& t);

// DLPack capsules both ways (dlpack_bind.cpp).
void bind_dlpack(py::module_& m);

// Parsing x[key] (index_parse.cpp)
IndexSpec parse_index(const Tensor& x, py::handle key);

void bind_tensor(py::module_& m);
void bind_node(py::module_& m);
// The engine's entry points and custom Function nodes (autograd_bind.cpp).
void bind_autograd(py::module_& m);
void tensor_backward(const Tensor& self, py::handle gradient, py::handle retain_graph, bool create_graph);
// Makes every function of `m` raise PyTorch's TypeError for arguments that do not fit (arg_errors.cpp).
void guard_argument_errors(py::module_& m);
// Sets the pending Python error for a py::cast_error (a failed conversion of an argument inside a
// binding), which the guard above rewrites.
void set_cast_failure(const char* message);
py::object node_to_py(const NodeRef& node);
// The node a grad_fn object stands for (node_bind.cpp).
const NodeRef& node_of(py::handle obj);
// Gradient hooks over Python functions (hooks_bind.cpp); after bind_tensor and bind_node.
void bind_hooks(py::module_& m);
// _C._CPUGenerator: PyTorch's CPU generator and its distribution fills (random_bind.cpp).
void bind_random(py::module_& m);
// _C.module_attribute: getattr for nn.Module's members, without 3.11's AttributeError on the way
// (module_attribute.cpp).
void bind_module_attribute(py::module_& m);
// The process-wide lock of backward passes (autograd_bind.cpp); waits without the GIL.
std::unique_lock<std::recursive_mutex> lock_engine();
// The Python backward a custom Function's node holds (a bound method of its ctx), or null for
// another node; and its release, for the cycle collector (autograd_bind.cpp).
PyObject* function_backward(const Node* node);
void clear_function_backward(Node* node);

}  // namespace fg
