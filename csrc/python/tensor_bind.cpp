// The Python Tensor is the C++ TensorImpl itself. Hot operators and attributes are bound here;
// methods whose Python signatures are flexible (reshape(2, 3) or reshape((2, 3)), dim=None or a
// tuple, ...) are written in python/fastgrad/_tensor.py over the primitives in `_C`.
#include <cmath>

#include "autograd/long_work.h"
#include "autograd/node.h"
#include "python/bindings.h"
#include "python/capture.h"

namespace fg {

namespace {
// Set once by bind_tensor.
PyTypeObject* tensor_type = nullptr;
const py::detail::type_info* tensor_info = nullptr;
}  // namespace

const Tensor* tensor_of(PyObject* obj) {
  PyTypeObject* type = Py_TYPE(obj);
  if (type != tensor_type && !PyType_IsSubtype(type, tensor_type)) return nullptr;
  // Tensor has one C++ base, so pybind11 keeps its instances in the simple layout: the holder sits
  // right in the object.
  py::detail::value_and_holder vh(reinterpret_cast<py::detail::instance*>(obj), tensor_info, 0, 0);
  return vh.holder_constructed() ? &vh.holder<Tensor>() : nullptr;
}

PyObject* tensor_to_py(const Tensor& t) {
  // What pybind11's holder caster does, with the type's record looked up once.
  return py::detail::type_caster_generic::cast(py::detail::cast_sources(t.get(), tensor_info),
                                               py::return_value_policy::take_ownership, py::handle(), nullptr, nullptr,
                                               &t)
      .ptr();
}

namespace {

py::object not_implemented() { return py::reinterpret_borrow<py::object>(Py_NotImplemented); }

// ---- The GIL: one rule for every binding. A kernel runs without the GIL when its work is long
// enough that other Python threads gain more than the release costs (~25 ns, and the wait to take
// the GIL back from a busy thread): at least kLongKernelElements elements read or written
// (elementwise, reductions, copies, indexing, creation), or kLongKernelMultiplyAdds multiply-adds
// for products (each costs more than an element's visit, so the bar is lower). Short ops, views
// and metadata never release. Nothing in the released section touches a Python object: the
// operands are copies holding their own references (the caller's Python objects may be dropped by
// another thread meanwhile), the result becomes a Python object after the GIL is back, and errors
// are C++ exceptions, translated then too. What the core calls back into Python for (anomaly
// mode's tracebacks, freeing a numpy array's memory) takes the GIL itself.
// backward() runs each node whose incoming gradients are long by the same rule (autograd/long_work.h).
constexpr double kLongKernelElements = 100000;
constexpr double kLongKernelMultiplyAdds = 1 << 16;

// op(args...) for a kernel over `elements` elements: without the GIL when they are many.
template <class Op, class... Args>
auto by_elements(double elements, Op op, const Args&... args) {
  return call_op(elements >= kLongKernelElements, op, args...);
}

// op(x, options...) (a unary function, a reduction, softmax, a copy), whose work is x's elements.
template <class Op, class... Options>
auto unary(Op op, const Tensor& x, const Options&... options) {
  return by_elements(x->numel(), op, x, options...);
}

// op(a, b) for an elementwise op: the work is the larger operand (the result's size).
template <class Op, class B>
Tensor elementwise(Op op, const Tensor& a, const B& b) {
  int64_t n = a->numel();
  if constexpr (std::is_same_v<B, Tensor>) n = std::max(n, b->numel());
  return by_elements(n, op, a, b);
}

// op(a, b, extra...) for a matrix product, whose work is its multiply-adds: a's elements times b's
// columns (batch broadcasting aside).
template <class Op, class... Extra>
Tensor product(Op op, const Tensor& a, const Tensor& b, const Extra&... extra) {
  const double work = double(a->numel()) * double(b->dim() >= 2 ? b->shape.back() : 1);
  return call_op(work >= kLongKernelMultiplyAdds, op, a, b, extra...);
}

// A view op (or an in-place one, which changes only x's geometry): no work, recorded by a capture.
template <class Op, class... Args>
Tensor view_op(Op op, const Args&... args) {
  return call_op(false, op, args...);
}

// The elements of a list of tensors (cat, stack, index lists, the optimizers' lists).
int64_t elements_of(const std::vector<Tensor>& tensors) {
  int64_t n = 0;
  for (const Tensor& t : tensors) n += t ? t->numel() : 0;
  return n;
}

// Wraps op(tensor, tensor-or-Scalar) as a Python binary operator: numbers become Scalars (no
// temporary tensor), anything else returns NotImplemented so Python can try the other operand.
template <class F>
auto binary(F op) {
  return [op](const Tensor& a, py::handle b) -> py::object {
    if (const Tensor* t = tensor_of(b.ptr())) return py::cast(elementwise(op, a, *t));
    Scalar s;
    if (scalar_from_py(b, s)) return py::cast(elementwise(op, a, s));
    return not_implemented();
  };
}

// The same op as a named function or method (add, x.mul_, ...): no operator protocol to fall back
// on, so anything but a tensor or a number is a TypeError, worded as PyTorch's.
template <class F>
auto named_binary(const char* name, F op, const char* arg = "other") {
  return [op, name, arg](const Tensor& a, py::handle b) -> Tensor {
    if (const Tensor* t = tensor_of(b.ptr())) return elementwise(op, a, *t);
    Scalar s;
    if (scalar_from_py(b, s)) return elementwise(op, a, s);
    throw TypeError(cat(name, "(): argument '", arg, "' must be Tensor, not ", type_name(b)));
  };
}

// add and sub with alpha (fastgrad.add(x, y, alpha=2), x.sub_(y, alpha=0.5)): op(a, b, alpha), as
// named_binary's op(a, b) otherwise.
template <class F>
auto scaled_binary(const char* name, F op) {
  return [op, name](const Tensor& a, py::handle b, py::handle alpha) -> Tensor {
    Scalar scale;
    if (!scalar_from_py(alpha, scale))
      throw TypeError(cat(name, "(): argument 'alpha' must be Number, not ", type_name(alpha)));
    if (const Tensor* t = tensor_of(b.ptr())) return by_elements(std::max(a->numel(), (*t)->numel()), op, a, *t, scale);
    Scalar s;
    if (scalar_from_py(b, s)) return by_elements(a->numel(), op, a, s, scale);
    throw TypeError(cat(name, "(): argument 'other' must be Tensor, not ", type_name(b)));
  };
}

// The reflected form: `number op tensor`.
template <class F>
auto reflected(F op) {
  return [op](const Tensor& a, py::handle b) -> py::object {
    Scalar s;
    if (scalar_from_py(b, s)) return py::cast(elementwise(op, a, s));
    return not_implemented();
  };
}

// The arithmetic operators as CPython number slots, so that `x * y` calls straight into C++ (no
// method lookup, no pybind11 dispatch). The same rules as binary()/reflected() above: the slot
// receives the operands in source order, either of them the tensor.
// `reflected` is nullptr for in-place slots, whose left operand is always the tensor.
template <class Op, class Reflected>
PyObject* number_slot(PyObject* a, PyObject* b, Op op, Reflected reflected) noexcept {
  try {
    Scalar s;
    if (const Tensor* x = tensor_of(a)) {
      if (const Tensor* y = tensor_of(b)) return tensor_to_py(elementwise(op, *x, *y));
      if (scalar_from_py(b, s)) return tensor_to_py(elementwise(op, *x, s));
    } else if constexpr (!std::is_same_v<Reflected, std::nullptr_t>) {
      const Tensor* y = tensor_of(b);
      if (y && scalar_from_py(a, s)) return tensor_to_py(elementwise(reflected, *y, s));
    }
    Py_RETURN_NOTIMPLEMENTED;
  } catch (...) {
    py::detail::try_translate_exceptions();
    return nullptr;
  }
}

// Each op tagged with what it is to a program of 0-d values (capture.h's Tagged).
using capture::ScalarForm;
using capture::tagged;
#define FG_NUMBER_SLOT(slot, op, form, reflected_op)                                                               \
  PyObject* slot(PyObject* a, PyObject* b) noexcept {                                                              \
    return number_slot(a, b, tagged<form>([](const Tensor& x, const auto& y) { return op(x, y); }), reflected_op); \
  }
FG_NUMBER_SLOT(nb_add, add, ScalarForm::Add,
               tagged<ScalarForm::Add>([](const Tensor& x, const Scalar& s) { return add(x, s); }))
FG_NUMBER_SLOT(nb_subtract, sub, ScalarForm::Sub,
               tagged<ScalarForm::Rsub>([](const Tensor& x, const Scalar& s) { return rsub(x, s); }))
FG_NUMBER_SLOT(nb_multiply, mul, ScalarForm::Mul,
               tagged<ScalarForm::Mul>([](const Tensor& x, const Scalar& s) { return mul(x, s); }))
// s / x is two ops (rdiv): not tagged
FG_NUMBER_SLOT(nb_true_divide_numbers, div, ScalarForm::Div,
               [](const Tensor& x, const Scalar& s) { return rdiv(x, s); })
FG_NUMBER_SLOT(nb_inplace_add, add_, ScalarForm::AddInPlace, nullptr)
FG_NUMBER_SLOT(nb_inplace_subtract, sub_, ScalarForm::SubInPlace, nullptr)
FG_NUMBER_SLOT(nb_inplace_multiply, mul_, ScalarForm::MulInPlace, nullptr)
FG_NUMBER_SLOT(nb_inplace_true_divide, div_, ScalarForm::DivInPlace, nullptr)
#undef FG_NUMBER_SLOT

// `ndarray / x`: PyTorch computes other / x as x.reciprocal() * other, a product that numpy then
// takes (Tensor.__array_wrap__ gives its result back as a tensor).
PyObject* nb_true_divide(PyObject* a, PyObject* b) noexcept {
  const Tensor* y = tensor_of(b);
  if (y && !tensor_of(a) && py::isinstance<py::array>(py::handle(a))) {
    try {
      auto reciprocal = py::reinterpret_steal<py::object>(tensor_to_py(rdiv(*y, Scalar::from_float(1.0))));
      return PyNumber_Multiply(reciprocal.ptr(), a);
    } catch (...) {
      py::detail::try_translate_exceptions();
      return nullptr;
    }
  }
  return nb_true_divide_numbers(a, b);
}

// The operator methods call the slots (x.__add__(y) == slot(x, y), x.__radd__(y) == slot(y, x)),
// so the rules live in one place.
template <PyObject* (*slot)(PyObject*, PyObject*), bool kReflected = false>
py::object slot_method(py::handle self, py::handle other) {
  PyObject* result = kReflected ? slot(other.ptr(), self.ptr()) : slot(self.ptr(), other.ptr());
  if (!result) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(result);
}

auto comparison(CompareOp op) {
  return [op](const Tensor& a, py::handle b) -> py::object {
    auto compare_op = [op](const Tensor& x, const auto& y) { return compare(x, y, op); };
    if (const Tensor* t = tensor_of(b.ptr())) return py::cast(elementwise(compare_op, a, *t));
    Scalar s;
    if (scalar_from_py(b, s)) return py::cast(elementwise(compare_op, a, s));
    // PyTorch's == (and no other comparison) reads an ndarray of a tensor dtype as a tensor
    if (op == CompareOp::Eq && py::isinstance<py::array>(b)) try {
        return py::cast(elementwise(compare_op, a, tensor_from_numpy(py::reinterpret_borrow<py::array>(b), false)));
      } catch (const TypeError&) {
      }
    return not_implemented();
  };
}

// The dtype a Python number gets as a tensor (the default dtype for floats).
DType natural_dtype(py::handle obj) {
  Scalar s;
  if (py::isinstance<TensorImpl>(obj) || !scalar_from_py(obj, s)) return default_float_type();
  return s.kind == Category::Floating   ? default_float_type()
         : s.kind == Category::Integral ? DType::Int64
                                        : DType::Bool;
}

std::optional<Scalar> opt_scalar(py::handle h) {
  if (h.is_none()) return std::nullopt;
  Scalar s;
  if (!scalar_from_py(h, s)) throw TypeError(cat("clamp(): min and max must be numbers, not ", type_name(h)));
  return s;
}

const char* kNonLeafGradWarning =
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad attribute won't be "
    "populated during autograd.backward(). If you indeed want the .grad field to be populated for a non-leaf Tensor, "
    "use .retain_grad() on the non-leaf Tensor. If you access the non-leaf Tensor by mistake, make sure you access "
    "the leaf Tensor instead. See github.com/pytorch/pytorch/pull/30531 for more informations.";

// x.grad reads and writes go through call_op: a compiled step reads and resets gradients on replay.
py::object get_grad(const Tensor& self) {
  if (!self->is_leaf() && !self->retains_grad && self->requires_grad())
    if (PyErr_WarnEx(PyExc_UserWarning, kNonLeafGradWarning, 1) < 0) throw py::error_already_set();
  Tensor grad = call_op(
      false, capture::tagged<capture::ScalarForm::GradGet>(with_gil([](const Tensor& t) { return t->grad; })), self);
  return grad ? py::cast(grad) : py::none();
}

void set_grad(const Tensor& self, py::handle value) {
  Tensor g;
  if (!value.is_none()) {
    if (!py::isinstance<TensorImpl>(value))
      throw TypeError(cat("assigned grad expected to be a Tensor or None but got grad of type ", type_name(value)));
    g = value.cast<Tensor>();
    if (g->dtype != self->dtype) throw RuntimeError("assigned grad has data of a different type");
    if (g->shape != self->shape) throw RuntimeError("assigned grad has data of a different size");
  }
  call_op(false, capture::tagged<capture::ScalarForm::GradSet>(with_gil([](const Tensor& t, const Tensor& grad) {
            t->grad = grad;
          })),
          self, g);
}

void set_requires_grad(const Tensor& self, bool flag) {
  if (!self->is_leaf()) {
    // PyTorch's wording: the hint to detach() only where the flag would be switched off.
    if (flag) throw RuntimeError("you can only change requires_grad flags of leaf variables.");
    throw RuntimeError(
        "you can only change requires_grad flags of leaf variables. If you want to use a computed variable in a "
        "subgraph that doesn't require differentiation use var_no_grad = var.detach().");
  }
  if (flag && !is_floating(self->dtype))
    throw RuntimeError("only Tensors of floating point and complex dtype can require gradients");
  if (flag && self->storage->inference() && !inference_mode_enabled())
    throw RuntimeError("Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.");
  self->requires_grad_leaf = flag;
}

// x.data = y: x takes y's storage and geometry, keeping its own autograd identity.
void set_data(const Tensor& self, const Tensor& other) {
  self->storage = other->storage;
  self->shape = other->shape;
  self->strides = other->strides;
  self->offset = other->offset;
  self->dtype = other->dtype;
}

void retain_grad(const Tensor& self) {
  if (!self->requires_grad()) throw RuntimeError("can't retain_grad on Tensor that has requires_grad=False");
  if (self->is_leaf() || self->retains_grad) return;
  refresh_view_history(self);
  retain_output(self);
  self->retains_grad = true;
}

py::object item_to_py(const Tensor& t) {
  if (capture_in_progress()) capture::cannot_replay("Tensor.item() (a host read: bool(), float(), print, ...)");
  Scalar s = item(t);
  if (s.kind == Category::Bool) return py::bool_(s.value != 0);
  if (s.kind == Category::Integral) return py::int_(s.integer);
  return py::float_(s.value);
}

std::vector<Tensor> tensor_list(py::handle seq) {
  std::vector<Tensor> out;
  for (py::handle h : seq) {
    const Tensor* t = tensor_of(h.ptr());
    if (!t) throw TypeError(cat("expected Tensor as element ", out.size(), " in argument 0, but got ", type_name(h)));
    out.push_back(*t);
  }
  return out;
}

// The elements a reshape-like op of x may copy: none for a contiguous x (a view).
int64_t copied_elements(const Tensor& x) { return x->is_contiguous() ? 0 : x->numel(); }

Tensor contiguous_binding(const Tensor& x) { return by_elements(copied_elements(x), fg::contiguous, x); }

// The node names of the ops composed over gather/scatter_ (nodes keep a name's pointer: these literals);
// "aten::<op>" names an op PyTorch has no derivative for.
const char* along_dim_node_name(const std::string& name) {
  static const char* const names[] = {
      "GatherBackward0",   "IndexSelectBackward0", "ScatterBackward0",   "ScatterBackward1",   "ScatterAddBackward0",
      "IndexAddBackward0", "IndexCopyBackward0",   "IndexFillBackward0", "IndexFillBackward1", "MaskedSelectBackward0",
      "TakeBackward0",     "aten::scatter",        "aten::scatter_"};
  for (const char* known : names)
    if (name == known) return known;
  throw ValueError(cat("no along-dim node named ", name));
}

ScatterReduce scatter_reduce_from_name(const std::string& reduce) {
  if (reduce.empty()) return ScatterReduce::None;
  if (reduce == "add") return ScatterReduce::Add;
  if (reduce == "multiply") return ScatterReduce::Multiply;
  if (reduce == "amax") return ScatterReduce::Amax;
  if (reduce == "amin") return ScatterReduce::Amin;
  throw RuntimeError("reduce argument must be either add or multiply.");
}

// Tensor.t() as a method of the type itself (CPython's METH_NOARGS, as PyTorch binds it): no
// pybind11 dispatch and no Python wrapper around the primitive. A transposed operand is written
// x @ W.t() in every step of a user's loop; the pybind11 path took 0.27 us of a 4.7 us 32x64 @
// 64x128 product.
PyObject* tensor_t(PyObject* self, PyObject*) noexcept {
  try {
    const Tensor* x = tensor_of(self);
    if (!x) throw TypeError("t(): self is not an initialized Tensor");
    return tensor_to_py(view_op(fg::t, *x));
  } catch (...) {
    py::detail::try_translate_exceptions();
    return nullptr;
  }
}

PyMethodDef tensor_t_method{"t", tensor_t, METH_NOARGS, "t($self, /)\n--\n\nThe transpose of a matrix (a view)."};

// The view and reshape primitives (_C.view, _C.reshape and the methods below).
Tensor view_binding(const Tensor& x, const Shape& shape) { return view_op(fg::view, x, shape); }
// A reshape or flatten of a contiguous tensor is a view (no work); of another, maybe a copy.
Tensor reshape_binding(const Tensor& x, const Shape& shape) {
  return by_elements(copied_elements(x), fg::reshape, x, shape);
}

// Tensor.view(*sizes) and Tensor.reshape(*sizes) as methods of the type (METH_FASTCALL): the sizes
// the op table's wrapper (_sizes) takes as they are, plain ints in int64's range as varargs or as one
// tuple or list, go straight to the primitive; anything else (bools, numpy ints, tensors, a dtype,
// no sizes, keywords, a sequence that iterates its own way) goes to that wrapper, registered by
// _register_sizes_methods: its conversions, PyTorch's messages. The sampling loop's x.view(1, T, 4, 16)
// paid a Python frame, _sizes and a pybind11 dispatch (8 calls a token).
PyObject* sizes_wrappers[2] = {};  // Tensor.view's and Tensor.reshape's Python wrappers

// The plain sizes of a call's arguments, or false (nothing raised) when the wrapper has to read them.
bool plain_sizes(PyObject* const* args, Py_ssize_t nargs, Shape& shape) {
  if (nargs == 1 &&
      (PyList_CheckExact(args[0]) || (PyTuple_Check(args[0]) && Py_TYPE(args[0])->tp_iter == PyTuple_Type.tp_iter))) {
    PyObject* sequence = args[0];  // a tuple, or a tuple subclass that iterates as one (Size), or a list
    nargs = PySequence_Fast_GET_SIZE(sequence);
    args = PySequence_Fast_ITEMS(sequence);
  }
  if (nargs == 0) return false;
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    if (!PyLong_CheckExact(args[i])) return false;
    int overflow = 0;
    const long long size = PyLong_AsLongLongAndOverflow(args[i], &overflow);
    if (overflow) return false;
    shape.push_back(size);
  }
  return true;
}

template <int which, Tensor (*primitive)(const Tensor&, const Shape&)>
PyObject* sizes_method(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) noexcept {
  Shape shape;
  const Tensor* x = tensor_of(self);
  if (x && !kwnames && plain_sizes(args, nargs, shape)) {
    try {
      return tensor_to_py(primitive(*x, shape));
    } catch (...) {
      py::detail::try_translate_exceptions();
      return nullptr;
    }
  }
  // the wrapper's call: self, then the arguments as they came
  const Py_ssize_t count = 1 + nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
  std::vector<PyObject*> all(static_cast<size_t>(count));
  all[0] = self;
  std::copy(args, args + count - 1, all.begin() + 1);
  return PyObject_Vectorcall(sizes_wrappers[which], all.data(), static_cast<size_t>(1 + nargs), kwnames);
}

PyMethodDef tensor_sizes_methods[2] = {
    {"view", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(sizes_method<0, view_binding>)),
     METH_FASTCALL | METH_KEYWORDS,
     "view(self, *shape)\n--\n\nA view of the tensor with these sizes (one may be -1)."},  // the op table's signature
    {"reshape", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(sizes_method<1, reshape_binding>)),
     METH_FASTCALL | METH_KEYWORDS,
     "reshape(self, *shape)\n--\n\nThe tensor with these sizes (a view when possible)."}};

// The embedding primitive (_C.embedding and embedding_layer below): the rows of weight at indices.
Tensor embedding_binding(const Tensor& weight, const Tensor& indices, int64_t padding_row, bool scale_grad_by_freq) {
  return by_elements(indices->numel() * (weight->dim() == 2 ? weight->shape[1] : 1), fg::embedding, weight, indices,
                     padding_row, scale_grad_by_freq);
}

// _C.embedding_layer(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse):
// nn.Embedding.forward's F.embedding call, as the layer primitive Module.__call__ calls over the
// layer's members (module_attribute.cpp; a METH_FASTCALL function, no pybind11 dispatch). The usual
// case, int64 indices into a 2-D weight, padding_idx None or an int in range, no max_norm, sparse
// False and scale_grad_by_freq a bool, is the primitive F.embedding calls then (none of its checks can
// fail); anything else returns NotImplemented, and forward runs F.embedding (its checks and messages,
// max_norm's renormalization in place).
PyObject* embedding_layer(PyObject*, PyObject* const* args, Py_ssize_t nargs) noexcept {
  if (nargs != 7) {
    PyErr_SetString(PyExc_TypeError, "embedding_layer takes F.embedding's 7 arguments");
    return nullptr;
  }
  const Tensor* input = tensor_of(args[0]);
  const Tensor* weight = tensor_of(args[1]);
  PyObject *padding = args[2], *max_norm = args[3], *scale = args[5], *sparse = args[6];
  if (!input || !weight || (*weight)->dim() != 2 || (*input)->dtype != DType::Int64 || max_norm != Py_None ||
      sparse != Py_False || (scale != Py_True && scale != Py_False) ||
      (padding != Py_None && !PyLong_CheckExact(padding)))
    return Py_NewRef(Py_NotImplemented);
  int64_t padding_row = -1;  // F.embedding's _padding_index: an index in [-rows, rows) as a row number
  if (padding != Py_None) {
    int overflow = 0;
    const long long index = PyLong_AsLongLongAndOverflow(padding, &overflow);
    const int64_t rows = (*weight)->shape[0];
    if (overflow || index < -rows || index >= rows) return Py_NewRef(Py_NotImplemented);
    padding_row = index < 0 ? index + rows : index;
  }
  try {
    return tensor_to_py(embedding_binding(*weight, *input, padding_row, scale == Py_True));
  } catch (...) {
    py::detail::try_translate_exceptions();
    return nullptr;
  }
}

PyMethodDef embedding_layer_def = {
    "embedding_layer", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(embedding_layer)), METH_FASTCALL,
    "nn.Embedding's forward for its usual members (NotImplemented for the others: F.embedding decides)."};

}  // namespace

// Index lists for index()/index_put_() (None keeps a dim whole), a custom node's outputs and saved values.
std::vector<Tensor> optional_tensor_list(py::handle seq) {
  std::vector<Tensor> out;
  for (py::handle h : seq) out.push_back(h.is_none() ? Tensor() : h.cast<Tensor>());
  return out;
}

void bind_tensor(py::module_& m) {
  // The rule above for the long nodes of a backward pass. Only the thread holding the GIL gives it
  // away (a custom Function's backward may run a nested pass, with the GIL taken back).
  begin_long_work = [](int64_t elements) -> void* {
    return elements >= kLongKernelElements && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
  };
  end_long_work = [](void* token) { PyEval_RestoreThread(static_cast<PyThreadState*>(token)); };
  auto cls = py::class_<TensorImpl, std::shared_ptr<TensorImpl>>(m, "Tensor", py::dynamic_attr());
  // Python's own messages name a type by tp_name, which pybind11 sets to "fastgrad._C.Tensor";
  // PyTorch's read "unsupported operand type(s) for +: 'Tensor' and 'str'". (__name__,
  // __qualname__ and __module__, which repr and pickle use, are separate and unchanged.)
  reinterpret_cast<PyTypeObject*>(cls.ptr())->tp_name = "Tensor";
  tensor_type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  tensor_info = py::detail::get_type_info(typeid(TensorImpl));
  cls.def_property_readonly("shape", [](const Tensor& t) { return size_to_py(t->shape); })
      .def_property_readonly("dtype", [](const Tensor& t) { return dtype_to_py(t->dtype); })
      .def_property(
          "requires_grad", [](const Tensor& t) { return t->requires_grad(); },
          [](const Tensor& t, py::handle flag) {
            if (!PyBool_Check(flag.ptr())) throw RuntimeError("requires_grad must be a bool");  // as PyTorch
            call_op(false, set_requires_grad, t, flag.ptr() == Py_True);
          })
      .def_property_readonly("is_leaf",
                             [](const Tensor& t) {
                               refresh_view_history(t);
                               return t->is_leaf();
                             })
      .def_property("grad", &get_grad, &set_grad)
      .def_property_readonly("grad_fn",
                             [](const Tensor& t) {
                               refresh_view_history(t);
                               return node_to_py(t->grad_fn);
                             })
      .def_property(
          "data", [](const Tensor& t) { return view_op(untracked_alias, t); },
          [](const Tensor& self, const Tensor& other) { call_op(false, set_data, self, other); })
      .def_property_readonly("retains_grad", [](const Tensor& t) { return t->retains_grad; })
      .def_property_readonly("ndim", [](const Tensor& t) { return t->dim(); })
      .def_property_readonly("_version",
                             [](const Tensor& t) {
                               if (t->storage->inference())
                                 throw RuntimeError("Inference tensors do not track version counter.");
                               return t->version();
                             })
      // A view's base: the tensor that owns its memory (None for a tensor that is not a view).
      .def_property_readonly("_base", [](const Tensor& t) { return t->view_base; })
      .def("_is_view", [](const Tensor& t) { return bool(t->view_base); })
      .def("is_inference", [](const Tensor& t) { return t->storage->inference(); })
      .def_property_readonly("output_nr", [](const Tensor& t) { return t->output_nr; })
      .def("dim", [](const Tensor& t) { return t->dim(); })
      .def("numel", [](const Tensor& t) { return t->numel(); })
      .def("element_size", [](const Tensor& t) { return itemsize(t->dtype); })
      .def("is_contiguous", [](const Tensor& t) { return t->is_contiguous(); })
      .def("storage_offset", [](const Tensor& t) { return t->offset; })
      .def("_strides", [](const Tensor& t) { return py::tuple(py::cast(t->strides)); })
      .def("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t->data()); })
      .def("item", &item_to_py)
      .def("retain_grad", &retain_grad)
      .def("detach", [](const Tensor& x) { return view_op(alias, x); })
      .def("detach_",
           [](const Tensor& x) {
             x->grad_fn = NodeRef();
             x->requires_grad_leaf = false;
             return x;
           })
      .def("clone", [](const Tensor& x) { return unary(fg::clone, x); })
      .def("contiguous", &contiguous_binding)
      .def("mul_", named_binary("mul_", [](const Tensor& a, const auto& b) { return mul_(a, b); }))
      .def("div_", named_binary("div_", [](const Tensor& a, const auto& b) { return div_(a, b); }))
      .def("pow_", named_binary(
                       "pow_", [](const Tensor& a, const auto& b) { return pow_(a, b); }, "exponent"))
      .def("backward", &tensor_backward, py::arg("gradient") = py::none(), py::arg("retain_graph") = py::none(),
           py::arg("create_graph") = false)
      .def("__len__",
           [](const Tensor& t) {
             if (t->dim() == 0) throw TypeError("len() of a 0-d tensor");
             return t->shape[0];
           })
      .def("__hash__", [](py::handle self) { return reinterpret_cast<intptr_t>(self.ptr()); })
      .def("__getitem__",
           [](const Tensor& t, py::handle key) {
             IndexSpec spec = parse_index(t, key);
             // Basic indices make a view (no work); tensor indices gather.
             int64_t work = spec.advanced.empty() ? 0 : std::max(t->numel(), elements_of(spec.advanced));
             if (capture_in_progress() && std::any_of(spec.advanced.begin(), spec.advanced.end(),
                                                      [](const Tensor& i) { return i && i->dtype == DType::Bool; }))
               capture::cannot_replay("indexing with a boolean mask (the result's shape depends on its values)");
             return by_elements(work, [](const Tensor& x, const IndexSpec& s) { return getitem(x, s); }, t, spec);
           })
      .def("__setitem__",
           [](const Tensor& t, py::handle key, py::handle value) {
             IndexSpec spec = parse_index(t, key);
             Tensor v = tensor_or_scalar(value, t->dtype);
             // The region written is at most t (its size is known only once the key is applied).
             by_elements(
                 std::max(t->numel(), elements_of(spec.advanced)),
                 [](const Tensor& x, const IndexSpec& s, const Tensor& v) { setitem(x, s, v); }, t, spec, v);
           })
      .def("__add__", &slot_method<nb_add>)
      .def("__radd__", &slot_method<nb_add, true>)
      .def("__sub__", &slot_method<nb_subtract>)
      .def("__rsub__", &slot_method<nb_subtract, true>)
      .def("__mul__", &slot_method<nb_multiply>)
      .def("__rmul__", &slot_method<nb_multiply, true>)
      .def("__truediv__", &slot_method<nb_true_divide>)
      .def("__rtruediv__", &slot_method<nb_true_divide, true>)
      .def("__pow__", binary(tagged<ScalarForm::Pow>([](const Tensor& a, const auto& b) { return pow(a, b); })))
      .def("__rpow__", reflected([](const Tensor& a, const Scalar& s) { return rpow(a, s); }))
      .def("__iadd__", &slot_method<nb_inplace_add>)
      .def("__isub__", &slot_method<nb_inplace_subtract>)
      .def("__imul__", &slot_method<nb_inplace_multiply>)
      .def("__itruediv__", &slot_method<nb_inplace_true_divide>)
      .def("__ipow__", binary([](const Tensor& a, const auto& b) { return pow_(a, b); }))
      .def("__floordiv__", binary([](const Tensor& a, const auto& b) { return floor_divide(a, b); }))
      .def("__rfloordiv__", reflected([](const Tensor& a, const Scalar& s) { return rfloor_divide(a, s); }))
      .def("__ifloordiv__", binary([](const Tensor& a, const auto& b) { return floor_divide_(a, b); }))
      .def("__mod__", binary([](const Tensor& a, const auto& b) { return remainder(a, b); }))
      .def("__rmod__", reflected([](const Tensor& a, const Scalar& s) { return rremainder(a, s); }))
      .def("__imod__", binary([](const Tensor& a, const auto& b) { return remainder_(a, b); }))
      .def("__invert__",
           [](const Tensor& a) {
             if (is_floating(a->dtype))
               throw TypeError("~ (operator.invert) is only implemented on integer and Boolean-type tensors");
             return unary(fg::bitwise_not, a);
           })
      .def("__matmul__",
           [](const Tensor& a, py::handle b) -> py::object {
             const Tensor* t = tensor_of(b.ptr());
             return t ? py::cast(product(fg::matmul, a, *t)) : not_implemented();
           })
      .def("__neg__", [](const Tensor& a) { return unary(tagged<ScalarForm::Unary, VecUnary::Neg>(fg::neg), a); })
      .def("__abs__", [](const Tensor& a) { return unary(fg::abs, a); })
      .def("__lt__", comparison(CompareOp::Lt))
      .def("__le__", comparison(CompareOp::Le))
      .def("__gt__", comparison(CompareOp::Gt))
      .def("__ge__", comparison(CompareOp::Ge))
      .def("__eq__", comparison(CompareOp::Eq))
      .def("__ne__", comparison(CompareOp::Ne));
  // & | ^ are commutative: the reflected form is the same op.
  for (auto [name, op] :
       {std::pair{"and", BitwiseOp::And}, std::pair{"or", BitwiseOp::Or}, std::pair{"xor", BitwiseOp::Xor}}) {
    auto out_of_place = binary([op = op](const Tensor& a, const auto& b) { return bitwise(a, b, op); });
    auto in_place = binary([op = op](const Tensor& a, const auto& b) { return bitwise_(a, b, op); });
    cls.def(cat("__", name, "__").c_str(), out_of_place);
    cls.def(cat("__r", name, "__").c_str(), out_of_place);
    cls.def(cat("__i", name, "__").c_str(), in_place);
  }
  {
    py::object t_method = py::reinterpret_steal<py::object>(PyDescr_NewMethod(tensor_type, &tensor_t_method));
    if (!t_method || PyObject_SetAttrString(cls.ptr(), "t", t_method.ptr()) < 0) throw py::error_already_set();
  }
  // After the operator methods: defining them set the slots to CPython's generic method callers.
  PyNumberMethods* number = tensor_type->tp_as_number;
  number->nb_add = nb_add;
  number->nb_subtract = nb_subtract;
  number->nb_multiply = nb_multiply;
  number->nb_true_divide = nb_true_divide;
  number->nb_inplace_add = nb_inplace_add;
  number->nb_inplace_subtract = nb_inplace_subtract;
  number->nb_inplace_multiply = nb_inplace_multiply;
  number->nb_inplace_true_divide = nb_inplace_true_divide;

  // Primitives with fixed signatures, wrapped by the Python package.
  m.def("add", named_binary("add", [](const Tensor& a, const auto& b) { return add(a, b); }));
  m.def("sub", named_binary("sub", [](const Tensor& a, const auto& b) { return sub(a, b); }));
  m.def("mul", named_binary("mul", [](const Tensor& a, const auto& b) { return mul(a, b); }));
  m.def("div", named_binary("div", [](const Tensor& a, const auto& b) { return div(a, b); }));
  m.def("pow", named_binary("pow", tagged<ScalarForm::Pow>([](const Tensor& a, const auto& b) { return pow(a, b); }),
                            "exponent"));
  m.def("rpow", [](const Tensor& a, double base) { return elementwise(fg::rpow, a, Scalar::from_float(base)); });
  m.def("add_", named_binary("add_", [](const Tensor& a, const auto& b) { return add_(a, b); }));
  m.def("sub_", named_binary("sub_", [](const Tensor& a, const auto& b) { return sub_(a, b); }));
  m.def("add_scaled",
        scaled_binary("add", [](const Tensor& a, const auto& b, const Scalar& alpha) { return add(a, b, alpha); }));
  m.def("sub_scaled",
        scaled_binary("sub", [](const Tensor& a, const auto& b, const Scalar& alpha) { return sub(a, b, alpha); }));
  m.def("rsub_scaled",
        scaled_binary("rsub", [](const Tensor& a, const auto& b, const Scalar& alpha) { return rsub(a, b, alpha); }));
  m.def("add_scaled_",
        scaled_binary("add_", [](const Tensor& a, const auto& b, const Scalar& alpha) { return add_(a, b, alpha); }));
  m.def("sub_scaled_",
        scaled_binary("sub_", [](const Tensor& a, const auto& b, const Scalar& alpha) { return sub_(a, b, alpha); }));
  m.def("div_floor", named_binary("div", [](const Tensor& a, const auto& b) { return div(a, b, Rounding::Floor); }));
  m.def("div_trunc", named_binary("div", [](const Tensor& a, const auto& b) { return div(a, b, Rounding::Trunc); }));
  m.def("floor_divide",
        named_binary("floor_divide", [](const Tensor& a, const auto& b) { return floor_divide(a, b); }));
  m.def("remainder", named_binary("remainder", [](const Tensor& a, const auto& b) { return remainder(a, b); }));
  m.def("fmod", named_binary("fmod", [](const Tensor& a, const auto& b) { return fmod(a, b); }));
  // number // x and number % x, for fastgrad.floor_divide(5, x) and fastgrad.remainder(5, x).
  m.def("rfloor_divide", reflected([](const Tensor& a, const Scalar& s) { return rfloor_divide(a, s); }));
  m.def("rremainder", reflected([](const Tensor& a, const Scalar& s) { return rremainder(a, s); }));
  m.def("floor_divide_",
        named_binary("floor_divide_", [](const Tensor& a, const auto& b) { return floor_divide_(a, b); }));
  m.def("remainder_", named_binary("remainder_", [](const Tensor& a, const auto& b) { return remainder_(a, b); }));
  m.def("fmod_", named_binary("fmod_", [](const Tensor& a, const auto& b) { return fmod_(a, b); }));
  for (auto [op, name, inplace] : {std::tuple{BitwiseOp::And, "bitwise_and", "bitwise_and_"},
                                   std::tuple{BitwiseOp::Or, "bitwise_or", "bitwise_or_"},
                                   std::tuple{BitwiseOp::Xor, "bitwise_xor", "bitwise_xor_"}}) {
    m.def(name, named_binary(name, [op = op](const Tensor& a, const auto& b) { return bitwise(a, b, op); }));
    m.def(inplace, named_binary(inplace, [op = op](const Tensor& a, const auto& b) { return bitwise_(a, b, op); }));
  }
  m.def("bitwise_not", [](const Tensor& x) { return unary(fg::bitwise_not, x); });
  m.def("bitwise_not_", [](const Tensor& x) { return unary(fg::bitwise_not_, x); });
  // Named comparisons (fastgrad.lt(x, y), x.lt(y)); the operators return NotImplemented instead.
  for (auto [name, op] :
       {std::pair{"lt", CompareOp::Lt}, std::pair{"le", CompareOp::Le}, std::pair{"gt", CompareOp::Gt},
        std::pair{"ge", CompareOp::Ge}, std::pair{"eq", CompareOp::Eq}, std::pair{"ne", CompareOp::Ne}})
    m.def(name, named_binary(name, [op = op](const Tensor& a, const auto& b) { return compare(a, b, op); }));
  m.def("result_type", [](const Tensor& a, py::handle b) {
    if (py::isinstance<TensorImpl>(b)) return dtype_to_py(result_type(a, b.cast<Tensor>()));
    Scalar s;
    if (!scalar_from_py(b, s)) throw TypeError("result_type(): expected a Tensor or a number");
    return dtype_to_py(result_type(a, s));
  });
  m.def("maximum", [](const Tensor& a, const Tensor& b) { return elementwise(fg::maximum, a, b); });
  m.def("minimum", [](const Tensor& a, const Tensor& b) { return elementwise(fg::minimum, a, b); });
  m.def("where", [](const Tensor& c, py::handle a, py::handle b) {
    // A number becomes a 0-d tensor of its kind's default dtype; 0-d tensors promote the way
    // PyTorch's wrapped numbers do here (where(c, int64_tensor, 0.5) is float32).
    Tensor x = tensor_or_scalar(a, natural_dtype(a)), y = tensor_or_scalar(b, natural_dtype(b));
    return by_elements(std::max({c->numel(), x->numel(), y->numel()}), fg::where, c, x, y);
  });
  // x * y + z rounded once in floating `dtype`, for the compositions that round so (addcmul, lerp).
  m.def("fused_multiply_add", [](const Tensor& x, const Tensor& y, const Tensor& z, py::handle dtype) {
    DType d = dtype_from_py(dtype);
    if (!is_floating(d)) throw TypeError(cat("fused_multiply_add(): expected a floating dtype, got ", dtype_name(d)));
    return by_elements(std::max({x->numel(), y->numel(), z->numel()}), fg::fused_multiply_add, x, y, z, d);
  });
  // The values of atan2, hypot, ... (no node: the Python layer records PyTorch's).
  for (auto [name, op] :
       {std::pair{"atan2", FloatBinary::Atan2}, std::pair{"hypot", FloatBinary::Hypot},
        std::pair{"logaddexp", FloatBinary::Logaddexp}, std::pair{"logaddexp2", FloatBinary::Logaddexp2},
        std::pair{"copysign", FloatBinary::Copysign}})
    m.def(name, named_binary(name, [op = op](const Tensor& a, const auto& b) { return float_binary(a, b, op); }));
  m.def("neg", [](const Tensor& x) { return unary(tagged<ScalarForm::Unary, VecUnary::Neg>(fg::neg), x); });
  m.def("abs", [](const Tensor& x) { return unary(fg::abs, x); });
  m.def("sign", [](const Tensor& x) { return unary(fg::sign, x); });
  m.def("exp", [](const Tensor& x) { return unary(tagged<ScalarForm::Unary, VecUnary::Exp>(fg::exp), x); });
  m.def("log", [](const Tensor& x) { return unary(tagged<ScalarForm::Unary, VecUnary::Log>(fg::log), x); });
  m.def("log1p", [](const Tensor& x) { return unary(fg::log1p, x); });
  m.def("expm1", [](const Tensor& x) { return unary(fg::expm1, x); });
  m.def("sqrt", [](const Tensor& x) { return unary(fg::sqrt, x); });
  m.def("sin", [](const Tensor& x) { return unary(fg::sin, x); });
  m.def("cos", [](const Tensor& x) { return unary(fg::cos, x); });
  m.def("tanh", [](const Tensor& x) { return unary(tagged<ScalarForm::Unary, VecUnary::Tanh>(fg::tanh), x); });
  m.def("sigmoid", [](const Tensor& x) { return unary(tagged<ScalarForm::Unary, VecUnary::Sigmoid>(fg::sigmoid), x); });
  m.def("relu", [](const Tensor& x) { return unary(tagged<ScalarForm::Unary, VecUnary::Relu>(fg::relu), x); });
  m.def("leaky_relu", [](const Tensor& x, double slope) { return unary(fg::leaky_relu, x, slope); });
  m.def("leaky_relu_", [](const Tensor& x, double slope) { return unary(fg::leaky_relu_, x, slope); });
  m.def("hardtanh", [](const Tensor& x, double min, double max) { return unary(fg::hardtanh, x, min, max); });
  m.def("hardtanh_", [](const Tensor& x, double min, double max) { return unary(fg::hardtanh_, x, min, max); });
  // The in-place forms of the unary ops above, and the float functions of ops/math.cpp with theirs;
  // `reads_self`: the op's backward reads its input, so the in-place form runs it on a copy.
  struct UnaryOp {
    const char *name, *inplace_name;
    Tensor (*op)(const Tensor&), (*inplace_op)(const Tensor&);  // the op, and what its in-place form writes
    bool reads_self;
  };
  for (UnaryOp u : {UnaryOp{nullptr, "neg_", fg::neg, fg::neg, false},
                    UnaryOp{nullptr, "abs_", fg::abs, fg::abs, true},
                    UnaryOp{nullptr, "sign_", fg::sign, fg::sign, false},
                    UnaryOp{nullptr, "exp_", fg::exp, fg::exp, false},
                    UnaryOp{nullptr, "log_", fg::log, fg::log, true},
                    UnaryOp{nullptr, "log1p_", fg::log1p, fg::log1p, true},
                    UnaryOp{nullptr, "expm1_", fg::expm1, fg::expm1, false},
                    UnaryOp{nullptr, "sqrt_", fg::sqrt, fg::sqrt, false},
                    UnaryOp{nullptr, "sin_", fg::sin, fg::sin, true},
                    UnaryOp{nullptr, "cos_", fg::cos, fg::cos, true},
                    UnaryOp{nullptr, "tanh_", fg::tanh, fg::tanh, false},
                    UnaryOp{nullptr, "sigmoid_", fg::sigmoid, fg::sigmoid, false},
                    UnaryOp{nullptr, "relu_", fg::relu, fg::relu, false},
                    UnaryOp{"log10", "log10_", fg::log10, fg::log10, true},
                    UnaryOp{"log2", "log2_", fg::log2, fg::log2, true},
                    UnaryOp{"exp2", "exp2_", fg::exp2, fg::exp2, false},
                    UnaryOp{"sinh", "sinh_", fg::sinh, fg::sinh, true},
                    UnaryOp{"cosh", "cosh_", fg::cosh, fg::cosh, true},
                    UnaryOp{"asinh", "asinh_", fg::asinh, fg::asinh_for_inplace, false},
                    UnaryOp{"acosh", "acosh_", fg::acosh, fg::acosh_for_inplace, false},
                    UnaryOp{"atanh", "atanh_", fg::atanh, fg::atanh_for_inplace, false},
                    UnaryOp{"asin", "asin_", fg::asin, fg::asin, true},
                    UnaryOp{"acos", "acos_", fg::acos, fg::acos, true},
                    UnaryOp{"tan", "tan_", fg::tan, fg::tan, false},
                    UnaryOp{"atan", "atan_", fg::atan, fg::atan, true},
                    UnaryOp{"erf", "erf_", fg::erf, fg::erf, true},
                    UnaryOp{"erfc", "erfc_", fg::erfc, fg::erfc, true},
                    UnaryOp{"erfinv", "erfinv_", fg::erfinv, fg::erfinv, true},
                    UnaryOp{"lgamma", "lgamma_", fg::lgamma, fg::lgamma, true},
                    UnaryOp{"digamma", "digamma_", fg::digamma, fg::digamma, true},
                    UnaryOp{"rsqrt", "rsqrt_", fg::rsqrt, fg::rsqrt, false},
                    UnaryOp{"reciprocal", "reciprocal_", fg::reciprocal, fg::reciprocal, false},
                    UnaryOp{"deg2rad", "deg2rad_", fg::deg2rad, fg::deg2rad, false},
                    UnaryOp{"rad2deg", "rad2deg_", fg::rad2deg, fg::rad2deg, false},
                    UnaryOp{"floor", "floor_", fg::floor, fg::floor, false},
                    UnaryOp{"ceil", "ceil_", fg::ceil, fg::ceil, false},
                    UnaryOp{"trunc", "trunc_", fg::trunc, fg::trunc, false},
                    UnaryOp{"frac", "frac_", fg::frac, fg::frac, false},
                    UnaryOp{"sgn", "sgn_", fg::sgn, fg::sgn, false}}) {
    if (u.name) m.def(u.name, [op = u.op](const Tensor& x) { return unary(op, x); });  // null: bound above
    m.def(u.inplace_name, [u](const Tensor& x) { return unary(fg::unary_, x, u.inplace_op, u.reads_self); });
  }
  m.def("signbit", [](const Tensor& x) { return unary(fg::signbit, x); });
  // round without decimals is RoundBackward0, with them (even 0) RoundBackward1, as PyTorch.
  m.def("round", [](const Tensor& x, std::optional<int64_t> decimals) {
    auto op = [](const Tensor& x, std::optional<int64_t> d) { return d ? fg::round(x, *d) : fg::round(x); };
    return unary(op, x, decimals);
  });
  m.def("round_", [](const Tensor& x, std::optional<int64_t> decimals) {
    auto op = [](const Tensor& x, std::optional<int64_t> d) {
      return d ? fg::round_(x, *d) : fg::unary_(x, fg::round, false);
    };
    return unary(op, x, decimals);
  });
  m.def("nan_to_num", [](const Tensor& x, std::optional<double> nan, std::optional<double> posinf,
                         std::optional<double> neginf) { return unary(fg::nan_to_num, x, nan, posinf, neginf); });
  m.def("nan_to_num_", [](const Tensor& x, std::optional<double> nan, std::optional<double> posinf,
                          std::optional<double> neginf) { return unary(fg::nan_to_num_, x, nan, posinf, neginf); });
  m.def("clamp", [](const Tensor& x, py::handle lo, py::handle hi) {
    auto op = [](const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) { return clamp(x, lo, hi); };
    return unary(op, x, opt_scalar(lo), opt_scalar(hi));
  });
  m.def("clamp_", [](const Tensor& x, py::handle lo, py::handle hi) {
    return unary(fg::clamp_, x, opt_scalar(lo), opt_scalar(hi));
  });
  m.def("clamp_tensor", [](const Tensor& x, py::handle lo, py::handle hi) {
    auto op = [](const Tensor& x, const Tensor& lo, const Tensor& hi) { return clamp(x, lo, hi); };
    return unary(op, x, lo.is_none() ? Tensor() : lo.cast<Tensor>(), hi.is_none() ? Tensor() : hi.cast<Tensor>());
  });
  m.def("fill_", [](const Tensor& x, py::handle v) {
    auto op = [](const Tensor& x, const auto& value) { return fill_(x, value); };
    if (py::isinstance<TensorImpl>(v)) return unary(op, x, v.cast<Tensor>());
    Scalar s;
    if (!scalar_from_py(v, s)) throw TypeError("fill_() expects a number or a 0-dim tensor");
    return unary(op, x, s);
  });
  m.def("zero_", [](const Tensor& x) { return unary(fg::zero_, x); });
  m.def("copy_", [](const Tensor& x, const Tensor& src) { return elementwise(fg::copy_, x, src); });
  // The optimizers' per-step updates, one call for a whole parameter list.
  m.def("foreach_zero_", [](py::handle tensors) {
    std::vector<Tensor> selves = tensor_list(tensors);
    by_elements(elements_of(selves), fg::foreach_zero_, selves);
  });
  m.def("adam_",
        [](py::handle params, py::handle grads, py::handle exp_avgs, py::handle exp_avg_sqs, py::handle max_exp_avg_sqs,
           std::vector<double> step_sizes, std::vector<double> bias_correction2_sqrts, double lerp_weight, double beta2,
           double one_minus_beta2, double eps, double weight_decay, double decay, bool maximize) {
          std::vector<Tensor> p = tensor_list(params), g = tensor_list(grads), m = tensor_list(exp_avgs),
                              v = tensor_list(exp_avg_sqs), mv = tensor_list(max_exp_avg_sqs);
          const fg::AdamOptions options{lerp_weight, beta2, one_minus_beta2, eps, weight_decay, decay, maximize};
          by_elements(elements_of(p), fg::adam_, p, g, m, v, mv, step_sizes, bias_correction2_sqrts, options);
        });
  m.def("sgd_",
        [](py::handle params, py::handle grads, py::handle momentum_buffers, std::vector<bool> first_steps, double lr,
           double momentum, double one_minus_dampening, double weight_decay, bool nesterov, bool maximize) {
          std::vector<Tensor> p = tensor_list(params), g = tensor_list(grads), buffers = tensor_list(momentum_buffers);
          const fg::SgdOptions options{lr, momentum, one_minus_dampening, weight_decay, nesterov, maximize};
          by_elements(elements_of(p), fg::sgd_, p, g, buffers, first_steps, options);
        });
  m.def("adagrad_", [](py::handle params, py::handle grads, py::handle sums, std::vector<double> learning_rates,
                       double eps, double weight_decay, bool maximize) {
    std::vector<Tensor> p = tensor_list(params), g = tensor_list(grads), s = tensor_list(sums);
    const fg::AdagradOptions options{eps, weight_decay, maximize};
    by_elements(elements_of(p), fg::adagrad_, p, g, s, learning_rates, options);
  });

  m.def("sum", [](const Tensor& x, std::vector<int64_t> dims, bool keepdim, py::handle dtype) {
    return unary(fg::sum, x, dims, keepdim,
                 dtype.is_none() ? std::nullopt : std::optional<DType>(dtype_from_py(dtype)));
  });
  m.def("mean",
        [](const Tensor& x, std::vector<int64_t> dims, bool keepdim) { return unary(fg::mean, x, dims, keepdim); });
  m.def("prod",
        [](const Tensor& x, std::optional<int64_t> dim, bool keepdim) { return unary(fg::prod, x, dim, keepdim); });
  m.def("var", [](const Tensor& x, std::vector<int64_t> dims, double correction, bool keepdim) {
    return unary(fg::var, x, dims, correction, keepdim);
  });
  m.def("std", [](const Tensor& x, std::vector<int64_t> dims, double correction, bool keepdim) {
    return unary(fg::std, x, dims, correction, keepdim);
  });
  m.def("amax",
        [](const Tensor& x, std::vector<int64_t> dims, bool keepdim) { return unary(fg::amax, x, dims, keepdim); });
  m.def("amin",
        [](const Tensor& x, std::vector<int64_t> dims, bool keepdim) { return unary(fg::amin, x, dims, keepdim); });
  m.def("max_all", [](const Tensor& x) { return unary(fg::max_all, x); });
  m.def("min_all", [](const Tensor& x) { return unary(fg::min_all, x); });
  m.def("max_dim", [](const Tensor& x, int64_t dim, bool keepdim) { return unary(fg::max_dim, x, dim, keepdim); });
  m.def("min_dim", [](const Tensor& x, int64_t dim, bool keepdim) { return unary(fg::min_dim, x, dim, keepdim); });
  m.def("argmax",
        [](const Tensor& x, std::optional<int64_t> dim, bool keepdim) { return unary(fg::argmax, x, dim, keepdim); });
  m.def("argmin",
        [](const Tensor& x, std::optional<int64_t> dim, bool keepdim) { return unary(fg::argmin, x, dim, keepdim); });
  m.def("norm", [](const Tensor& x, double p, std::vector<int64_t> dims, bool keepdim) {
    return unary(fg::norm, x, p, dims, keepdim);
  });

  // sorting and selection (ops/sort.cpp)
  m.def("sort", [](const Tensor& x, int64_t dim, bool descending, std::optional<bool> stable) {
    return unary(fg::sort, x, dim, descending, stable);
  });
  m.def("argsort", [](const Tensor& x, int64_t dim, bool descending, bool stable) {
    return unary(fg::argsort, x, dim, descending, stable);
  });
  m.def("topk", [](const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
    return unary(fg::topk, x, k, dim, largest, sorted);
  });
  m.def("kthvalue",
        [](const Tensor& x, int64_t k, int64_t dim, bool keepdim) { return unary(fg::kthvalue, x, k, dim, keepdim); });
  m.def("median_dim",
        [](const Tensor& x, int64_t dim, bool keepdim) { return unary(fg::median_dim, x, dim, keepdim); });
  m.def("median_all", [](const Tensor& x) { return unary(fg::median_all, x); });
  m.def("mode", [](const Tensor& x, int64_t dim, bool keepdim) { return unary(fg::mode, x, dim, keepdim); });
  // searching, counting and unique (issue 13)
  m.def("searchsorted", [](const Tensor& sorted, const Tensor& values, bool right) {
    return by_elements(values->numel(), fg::searchsorted, sorted, values, right);
  });
  m.def("bincount", [](const Tensor& x, std::optional<Tensor> weights, int64_t minlength) {
    return unary(fg::bincount, x, weights, minlength);
  });
  m.def("histogram_counts", [](const Tensor& x, const Tensor& edges, std::optional<Tensor> weights) {
    return unary(fg::histogram_counts, x, edges, weights);
  });
  m.def("unique_rows", [](const Tensor& rows, bool consecutive) { return unary(fg::unique_rows, rows, consecutive); });

  // ---- scans along one dim
  auto dtype_or_none = [](py::handle dtype) {
    return dtype.is_none() ? std::nullopt : std::optional<DType>(dtype_from_py(dtype));
  };
  m.def("cumsum", [=](const Tensor& x, int64_t dim, py::handle dtype) {
    return unary(fg::cumsum, x, dim, dtype_or_none(dtype));
  });
  m.def("cumprod", [=](const Tensor& x, int64_t dim, py::handle dtype) {
    return unary(fg::cumprod, x, dim, dtype_or_none(dtype));
  });
  m.def("cumsum_", [=](const Tensor& x, int64_t dim, py::handle dtype) {
    return unary(fg::cumsum_, x, dim, dtype_or_none(dtype));
  });
  m.def("cumprod_", [=](const Tensor& x, int64_t dim, py::handle dtype) {
    return unary(fg::cumprod_, x, dim, dtype_or_none(dtype));
  });
  m.def("logcumsumexp", [](const Tensor& x, int64_t dim) { return unary(fg::logcumsumexp, x, dim); });
  m.def("cummax", [](const Tensor& x, int64_t dim) { return unary(fg::cummax, x, dim); });
  m.def("cummin", [](const Tensor& x, int64_t dim) { return unary(fg::cummin, x, dim); });

  m.def("view", view_binding);
  m.def("reshape", reshape_binding);
  m.def(
      "_register_sizes_methods",
      [](py::handle view, py::handle reshape) {
        const py::handle wrappers[2] = {view, reshape};
        for (int i = 0; i < 2; ++i) {
          if (!PyCallable_Check(wrappers[i].ptr())) throw TypeError("_register_sizes_methods(view, reshape)");
          Py_XSETREF(sizes_wrappers[i], Py_NewRef(wrappers[i].ptr()));
          py::object method =
              py::reinterpret_steal<py::object>(PyDescr_NewMethod(tensor_type, &tensor_sizes_methods[i]));
          PyObject* type = reinterpret_cast<PyObject*>(tensor_type);
          if (!method || PyObject_SetAttrString(type, tensor_sizes_methods[i].ml_name, method.ptr()) < 0)
            throw py::error_already_set();
        }
      },
      "Tensor.view and Tensor.reshape as the core's methods over the op table's wrappers (for sizes "
      "that are not plain ints).");
  m.def("expand", [](const Tensor& x, Shape shape) { return view_op(fg::expand, x, shape); });
  m.def("permute", [](const Tensor& x, std::vector<int64_t> dims) { return view_op(fg::permute, x, dims); });
  m.def("transpose", [](const Tensor& x, int64_t d0, int64_t d1) { return view_op(fg::transpose, x, d0, d1); });
  m.def("t", [](const Tensor& x) { return view_op(fg::t, x); });
  m.def("squeeze", [](const Tensor& x, std::optional<std::vector<int64_t>> dims, bool dim_sequence) {
    return view_op(fg::squeeze, x, dims, dim_sequence);
  });
  m.def("unsqueeze", [](const Tensor& x, int64_t dim) { return view_op(fg::unsqueeze, x, dim); });
  m.def("t_", [](const Tensor& x) { return view_op(fg::t_, x); });
  m.def("transpose_", [](const Tensor& x, int64_t d0, int64_t d1) { return view_op(fg::transpose_, x, d0, d1); });
  m.def("squeeze_", [](const Tensor& x, std::optional<std::vector<int64_t>> dims, bool dim_sequence) {
    return view_op(fg::squeeze_, x, dims, dim_sequence);
  });
  m.def("unsqueeze_", [](const Tensor& x, int64_t dim) { return view_op(fg::unsqueeze_, x, dim); });
  // x[..., start:stop:step] along one dim without parsing an index (split's and narrow's parts)
  m.def("slice_view", [](const Tensor& x, int64_t dim, int64_t start, int64_t stop, int64_t step) {
    return view_op(
        [](const Tensor& t, int64_t d, int64_t lo, int64_t hi, int64_t by) { return fg::slice(t, d, lo, hi, by); }, x,
        dim, start, stop, step);
  });
  // split's and unbind's parts, as a tuple: views that are the outputs of one node
  auto as_tuple = [](std::vector<Tensor> parts) {
    py::tuple out(parts.size());
    for (size_t i = 0; i < parts.size(); ++i) out[i] = py::cast(std::move(parts[i]));
    return out;
  };
  m.def("split_with_sizes", [as_tuple](const Tensor& x, std::vector<int64_t> sizes, int64_t dim, bool with_sizes) {
    return as_tuple(call_op(false, fg::split_with_sizes, x, sizes, dim, with_sizes));
  });
  m.def("unbind", [as_tuple](const Tensor& x, int64_t dim) { return as_tuple(call_op(false, fg::unbind, x, dim)); });
  // x[..., index] along one dim without parsing an index (torch.select)
  m.def("select_view", [](const Tensor& x, int64_t dim, int64_t index) {
    return view_op([](const Tensor& t, int64_t d, int64_t i) { return fg::select(t, d, i); }, x, dim, index);
  });
  m.def("diagonal", [](const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) {
    return view_op(fg::diagonal, x, offset, dim1, dim2);
  });
  m.def("unfold", [](const Tensor& x, int64_t dimension, int64_t size, int64_t step) {
    return view_op(fg::unfold, x, dimension, size, step);
  });
  m.def("flatten", [](const Tensor& x, int64_t start, int64_t end) {
    return by_elements(copied_elements(x), fg::flatten, x, start, end);
  });
  m.def("cat", [](py::handle tensors, int64_t dim) {
    std::vector<Tensor> list = tensor_list(tensors);
    return by_elements(elements_of(list), [](const std::vector<Tensor>& l, int64_t d) { return cat(l, d); }, list, dim);
  });
  m.def("stack", [](py::handle tensors, int64_t dim) {
    std::vector<Tensor> list = tensor_list(tensors);
    return by_elements(elements_of(list), fg::stack, list, dim);
  });
  // Gathers and scatters: the work is the larger of the indexed tensor and the indices.
  m.def("index", [](const Tensor& x, py::handle indices) {
    std::vector<Tensor> list = optional_tensor_list(indices);
    return by_elements(std::max(x->numel(), elements_of(list)), fg::index, x, list);
  });
  m.def("embedding", embedding_binding);
  m.add_object("embedding_layer", py::reinterpret_steal<py::object>(PyCFunction_New(&embedding_layer_def, nullptr)));
  m.def("index_put_", [](const Tensor& x, py::handle indices, const Tensor& values, bool accumulate) {
    std::vector<Tensor> list = optional_tensor_list(indices);
    return by_elements(std::max(values->numel(), elements_of(list)), fg::index_put_, x, list, values, accumulate);
  });
  m.def(
      "gather",
      [](const Tensor& x, int64_t dim, const Tensor& index, const std::string& name, std::optional<Tensor> checked) {
        return by_elements(index->numel(), fg::gather, x, dim, index, along_dim_node_name(name),
                           checked.value_or(Tensor()));
      },
      py::arg("x"), py::arg("dim"), py::arg("index"), py::arg("name"), py::arg("checked") = py::none());
  // The bounds checks of index_select, index_add_, index_copy_, index_fill_, take and put_ (composed in
  // Python): an IndexError, `message` with "{}" read as the first entry (row-major) out of [low, high],
  // as PyTorch's kernels report it. An op, not a host read in Python: a compiled replay checks its own.
  m.def("check_index_range", [](const Tensor& index, int64_t low, int64_t high, const std::string& message) {
    auto check = [](const Tensor& index, int64_t low, int64_t high, const std::string& message) {
      const Tensor values = contiguous(to_dtype(index, DType::Int64));
      const int64_t* first = values->data_as<int64_t>();
      const int64_t* bad = std::find_if(first, first + values->numel(), [&](int64_t k) { return k < low || k > high; });
      if (bad == first + values->numel()) return;
      std::string text = message;
      if (size_t at = text.find("{}"); at != std::string::npos) text.replace(at, 2, std::to_string(*bad));
      throw IndexError(text);
    };
    by_elements(index->numel(), check, index, low, high, message);
  });
  m.def("scatter_", [](const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                       const std::string& reduce, const std::string& name) {
    return by_elements(index->numel(), fg::scatter_, self, dim, index, src, scatter_reduce_from_name(reduce),
                       along_dim_node_name(name));
  });

  m.def("dot", [](const Tensor& a, const Tensor& b) { return product(fg::dot, a, b); });
  m.def("mv", [](const Tensor& a, const Tensor& b) { return product(fg::mv, a, b); });
  m.def("mm", [](const Tensor& a, const Tensor& b) { return product(fg::mm, a, b); });
  m.def("addmm", [](const Tensor& input, const Tensor& a, const Tensor& b, py::handle beta, py::handle alpha) {
    Scalar scalars[2];
    for (auto [i, name, value] : {std::tuple{0, "beta", beta}, std::tuple{1, "alpha", alpha}})
      if (!scalar_from_py(value, scalars[i]))
        throw TypeError(cat("addmm(): argument '", name, "' must be Number, not ", type_name(value)));
    auto op = [](const Tensor& x, const Tensor& y, const Tensor& input, const Scalar& beta, const Scalar& alpha) {
      return fg::addmm(input, x, y, beta, alpha);
    };
    return product(op, a, b, input, scalars[0], scalars[1]);
  });
  // linear(input, weight, bias or None): F.linear, its argument types checked by the caller
  m.def("linear", [](const Tensor& input, const Tensor& weight, std::optional<Tensor> bias) {
    // the work of input @ weight^T: product() would read the columns from weight's last dim, not its rows
    const double work = double(input->numel()) * double(weight->dim() ? weight->shape[0] : 1);
    return call_op(work >= kLongKernelMultiplyAdds, fg::linear, input, weight, bias.value_or(Tensor()));
  });
  m.def("bmm", [](const Tensor& a, const Tensor& b) { return product(fg::bmm, a, b); });
  m.def("matmul", [](const Tensor& a, const Tensor& b) { return product(fg::matmul, a, b); });

  m.def("softmax", [](const Tensor& x, int64_t dim) { return unary(fg::softmax, x, dim); });
  m.def("log_softmax", [](const Tensor& x, int64_t dim) { return unary(fg::log_softmax, x, dim); });
  m.def("attention_scores",
        [](const Tensor& query, const Tensor& key, double scale, std::optional<Tensor> bias, bool causal) {
          // the product's multiply-adds: query's elements times key's rows
          const double work = double(query->numel()) * double(key->dim() >= 2 ? key->shape[key->dim() - 2] : 1);
          return call_op(work >= kLongKernelMultiplyAdds, fg::attention_scores, query, key, scale,
                         bias.value_or(Tensor()), causal);
        });
  // flash_attention(query, key, value, scale or None, is_causal): the fused op, or None for the inputs it
  // does not take (the caller checks and composes those). A scale of None is ATen's calculate_scale,
  // 1 / sqrt(width): computed here, so that a sampling step's call pays no Python for it.
  m.def("flash_attention",
        [](const Tensor& query, const Tensor& key, const Tensor& value, std::optional<double> scale,
           bool causal) -> py::object {
          if (!fg::flash_attention_case(query, key, value)) return py::none();
          const double work = 2.0 * double(query->numel()) * double(key->shape[2]);
          const double s = scale ? *scale : 1.0 / std::sqrt(double(query->shape[3]));  // width > 0 here
          return py::cast(call_op(work >= kLongKernelMultiplyAdds, fg::flash_attention, query, key, value, s, causal));
        });
  m.def("nll_loss", [](const Tensor& input, const Tensor& target, std::optional<Tensor> weight,
                       const std::string& reduction, int64_t ignore_index) {
    Reduction r = reduction_from_name(reduction);
    // One log-probability read per sample.
    return by_elements(target->numel(), fg::nll_loss, input, target, weight.value_or(Tensor()), r, ignore_index);
  });
  // convolution(input, weight, bias or None, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups)
  m.def("convolution", [](const Tensor& input, const Tensor& weight, std::optional<Tensor> bias, int64_t sh, int64_t sw,
                          int64_t ph, int64_t pw, int64_t dh, int64_t dw, int64_t groups) {
    ConvParams params{{sh, sw}, {ph, pw}, {dh, dw}, groups};
    // Work: every input element meets every weight element of its group, at most.
    const double work = double(input->numel()) * double(weight->numel()) / double(std::max<int64_t>(groups, 1));
    auto op = [](const Tensor& x, const Tensor& w, const Tensor& b, const ConvParams& p) {
      return fg::convolution(x, w, b, p);
    };
    const Tensor b = bias.value_or(Tensor());
    return call_op(work >= kLongKernelMultiplyAdds, op, input, weight, b, params);
  });
  // pooling (ops/pool.cpp): the max pools return (values, indices)
  m.def("max_pool2d", [](const Tensor& x, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                         int64_t dh, int64_t dw, bool ceil_mode) {
    return unary(fg::max_pool2d, x, PoolParams{{kh, kw}, {sh, sw}, {ph, pw}, {dh, dw}, ceil_mode});
  });
  // avg_pool2d(x, kh, kw, sh, sw, ph, pw, ceil_mode, count_include_pad, divisor_override or 0)
  m.def("avg_pool2d", [](const Tensor& x, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                         bool ceil_mode, bool count_include_pad, int64_t divisor_override) {
    return unary(fg::avg_pool2d, x, PoolParams{{kh, kw}, {sh, sw}, {ph, pw}, {1, 1}, ceil_mode}, count_include_pad,
                 divisor_override);
  });
  m.def("adaptive_avg_pool2d",
        [](const Tensor& x, int64_t oh, int64_t ow) { return unary(fg::adaptive_avg_pool2d, x, oh, ow); });
  m.def("adaptive_max_pool2d",
        [](const Tensor& x, int64_t oh, int64_t ow) { return unary(fg::adaptive_max_pool2d, x, oh, ow); });
  m.def("max_unpool2d", [](const Tensor& x, const Tensor& indices, int64_t oh, int64_t ow) {
    return by_elements(double(x->numel()) + double(oh) * double(ow), fg::max_unpool2d, x, indices, oh, ow);
  });
  // upsample(x, mode "nearest" | "nearest-exact" | "linear" | "cubic", output sizes, scale factors
  // (or []), align_corners, antialias) (ops/upsample.cpp)
  m.def("upsample", [](const Tensor& x, const std::string& mode, std::vector<int64_t> output_size,
                       std::vector<double> scales, bool align_corners, bool antialias) {
    const UpsampleMode m = mode == "nearest"         ? UpsampleMode::Nearest
                           : mode == "nearest-exact" ? UpsampleMode::NearestExact
                           : mode == "linear"        ? UpsampleMode::Linear
                           : mode == "cubic"         ? UpsampleMode::Cubic
                                                     : throw ValueError(cat("upsample: unknown mode '", mode, "'"));
    // Work: the input and the output, (N, C) planes of output_size.
    double outputs = x->dim() > 1 ? double(x->shape[0]) * double(x->shape[1]) : 0.0;
    for (int64_t size : output_size) outputs *= double(size);
    return by_elements(double(x->numel()) + outputs, fg::upsample, x, m, output_size, scales, align_corners, antialias);
  });
  // conv_transpose(input, weight, bias or None, stride_h, stride_w, pad_h, pad_w, output_pad_h, output_pad_w,
  // dilation_h, dilation_w, groups)
  m.def("conv_transpose",
        [](const Tensor& input, const Tensor& weight, std::optional<Tensor> bias, int64_t sh, int64_t sw, int64_t ph,
           int64_t pw, int64_t oph, int64_t opw, int64_t dh, int64_t dw, int64_t groups) {
          ConvParams params{{sh, sw}, {ph, pw}, {dh, dw}, groups};
          const std::array<int64_t, 2> output_padding{oph, opw};
          // Work: every input element meets every weight element of its group, at most.
          const double work = double(input->numel()) * double(weight->numel()) / double(std::max<int64_t>(groups, 1));
          auto op = [](const Tensor& x, const Tensor& w, const Tensor& b, const ConvParams& p,
                       const std::array<int64_t, 2>& op) { return fg::conv_transpose(x, w, b, p, op); };
          const Tensor b = bias.value_or(Tensor());
          return call_op(work >= kLongKernelMultiplyAdds, op, input, weight, b, params, output_padding);
        });
  // batch_norm(input, weight, bias, running_mean, running_var (each None or a tensor), training, momentum, eps)
  m.def("batch_norm", [](const Tensor& input, std::optional<Tensor> weight, std::optional<Tensor> bias,
                         std::optional<Tensor> running_mean, std::optional<Tensor> running_var, bool training,
                         double momentum, double eps) {
    // Two passes over the input (statistics, then the normalization).
    return by_elements(2.0 * double(input->numel()), fg::batch_norm, input, weight.value_or(Tensor()),
                       bias.value_or(Tensor()), running_mean.value_or(Tensor()), running_var.value_or(Tensor()),
                       training, momentum, eps);
  });
  // group_norm(input, weight or None, bias or None, groups, eps)
  m.def("group_norm",
        [](const Tensor& input, std::optional<Tensor> weight, std::optional<Tensor> bias, int64_t groups, double eps) {
          return by_elements(2.0 * double(input->numel()), fg::group_norm, input, weight.value_or(Tensor()),
                             bias.value_or(Tensor()), groups, eps);
        });
  // layer_norm(input, normalized_shape, weight or None, bias or None, eps): F.layer_norm after its
  // shape checks (PyTorch's messages), here rather than in Python: they cost as much as a small
  // layer's kernel. A floating input's weight and bias in another dtype are converted to its dtype.
  m.def("layer_norm", [](const Tensor& input, const Shape& normalized_shape, std::optional<Tensor> weight,
                         std::optional<Tensor> bias, double eps) {
    const size_t dims = normalized_shape.size();
    if (input->shape.size() < dims || !std::equal(normalized_shape.begin(), normalized_shape.end(),
                                                  input->shape.end() - static_cast<std::ptrdiff_t>(dims))) {
      const std::string trailing = shape_str(normalized_shape).substr(1);  // "64, 64]" (dims > 0 here)
      throw RuntimeError(cat("Given normalized_shape=", shape_str(normalized_shape), ", expected input with shape [*, ",
                             trailing, ", but got input of size", shape_str(input->shape)));
    }
    for (auto [name, t] : {std::pair{"weight", &weight}, std::pair{"bias", &bias}})
      if (*t && (**t)->shape != normalized_shape)
        throw RuntimeError(cat("Expected ", name, " to be of same shape as normalized_shape, but got ", name,
                               " of shape ", shape_str((**t)->shape),
                               " and normalized_shape = ", shape_str(normalized_shape)));
    auto op = [](const Tensor& x, const Tensor& w, const Tensor& b, int64_t normalized_dims, double epsilon) {
      const bool convert = is_floating(x->dtype);  // otherwise layer_norm refuses x first
      return fg::layer_norm(x, w && convert ? to_dtype(w, x->dtype) : w, b && convert ? to_dtype(b, x->dtype) : b,
                            normalized_dims, epsilon);
    };
    return by_elements(2.0 * double(input->numel()), op, input, weight.value_or(Tensor()), bias.value_or(Tensor()),
                       static_cast<int64_t>(dims), eps);
  });
  // recurrent_layer(mode "RNN_TANH" | "RNN_RELU" | "LSTM" | "GRU", projected, h0, c0 or None, w_hh, b_hh or
  // None, reverse): the states of one direction of one layer (nn/rnn.py)
  m.def("recurrent_layer", [](const std::string& mode, const Tensor& projected, const Tensor& h0,
                              std::optional<Tensor> c0, const Tensor& w_hh, std::optional<Tensor> b_hh, bool reverse) {
    // Work: each step's hidden product, (B, H) by (H, G * H).
    const double work = double(projected->numel()) * double(h0->dim() == 2 ? h0->shape[1] : 0);
    auto op = [](RecurrentMode mode, const Tensor& x, const Tensor& h, const Tensor& c, const Tensor& w,
                 const Tensor& b, bool reverse) { return fg::recurrent_layer(mode, x, h, c, w, b, reverse); };
    const RecurrentMode parsed = recurrent_mode_from_name(mode);
    const Tensor c = c0.value_or(Tensor()), b = b_hh.value_or(Tensor());
    return call_op(work >= kLongKernelMultiplyAdds, op, parsed, projected, h0, c, w_hh, b, reverse);
  });
  // im2col(input, kernel_h, kernel_w, dilation_h, dilation_w, pad_h, pad_w, stride_h, stride_w): F.unfold
  m.def("im2col", [](const Tensor& input, int64_t kh, int64_t kw, int64_t dh, int64_t dw, int64_t ph, int64_t pw,
                     int64_t sh, int64_t sw) {
    auto op = [](const Tensor& x, const std::array<int64_t, 2>& k, const ConvParams& p) {
      return fg::unfold_blocks(x, k, p);
    };
    return by_elements(double(input->numel()) * double(kh) * double(kw), op, input, std::array<int64_t, 2>{kh, kw},
                       ConvParams{{sh, sw}, {ph, pw}, {dh, dw}, 1});
  });
  // col2im(input, output_h, output_w, kernel_h, kernel_w, dilation_h, dilation_w, pad_h, pad_w, stride_h,
  // stride_w): F.fold
  m.def("col2im", [](const Tensor& input, int64_t oh, int64_t ow, int64_t kh, int64_t kw, int64_t dh, int64_t dw,
                     int64_t ph, int64_t pw, int64_t sh, int64_t sw) {
    auto op = [](const Tensor& x, const std::array<int64_t, 2>& o, const std::array<int64_t, 2>& k,
                 const ConvParams& p) { return fg::fold_blocks(x, o, k, p); };
    return by_elements(double(input->numel()), op, input, std::array<int64_t, 2>{oh, ow},
                       std::array<int64_t, 2>{kh, kw}, ConvParams{{sh, sw}, {ph, pw}, {dh, dw}, 1});
  });
  m.def("gelu", [](const Tensor& x, const std::string& approximate) {
    return unary(fg::gelu, x, gelu_approximation_from_name(approximate));
  });

  m.def("full", [](Shape shape, py::handle value, py::handle dtype) {
    Scalar s;  // an int exactly (fastgrad.full((1,), 2**63 - 1)), anything else through float()
    if (!scalar_from_py(value, s)) {
      double v = PyFloat_AsDouble(value.ptr());
      if (v == -1.0 && PyErr_Occurred()) throw py::error_already_set();
      s = Scalar::from_float(v);
    }
    auto op = [](const Shape& shape, const Scalar& s, DType dtype) { return full(shape, s, dtype); };
    double elements = 1;  // the sizes are not checked yet: their product may overflow int64
    for (int64_t size : shape) elements *= double(size);
    return by_elements(elements, op, shape, s, dtype_from_py(dtype));
  });
  m.def("empty", [](Shape shape, py::handle dtype) {
    auto op = [](const Shape& shape, DType dtype) { return empty(shape, dtype); };
    return call_op(false, op, shape, dtype_from_py(dtype));
  });
  m.def("arange", [](double start, double end, double step, py::handle dtype) {
    // Its length is known only after arange's checks ((end - start) / step, unchecked, may be
    // anything): it keeps the GIL.
    auto op = [](double start, double end, double step, DType dtype) { return arange(start, end, step, dtype); };
    return call_op(false, op, start, end, step, dtype_from_py(dtype));
  });
  m.def("linspace", [](double start, double end, int64_t steps, py::handle dtype) {
    return by_elements(steps, fg::linspace, start, end, steps, dtype_from_py(dtype));
  });
  m.def("eye", [](int64_t n, int64_t m, py::handle dtype) {
    return by_elements(double(n) * double(m), fg::eye, n, m, dtype_from_py(dtype));
  });
  m.def("from_numpy", &tensor_from_numpy, py::arg("array"), py::arg("share_memory"));
  m.def("from_python_data", &tensor_of_python_data, py::arg("array"));
  m.def("to_numpy", [](const Tensor& x) {
    if (capture_in_progress())
      capture::cannot_replay("Tensor.numpy() (a host read: tolist(), np.asarray(), print, ...)");
    return tensor_to_numpy(x);
  });
  m.def("to_dtype", [](const Tensor& x, py::handle dtype) {
    DType d = dtype_from_py(dtype);
    Tensor (*const convert)(const Tensor&, DType) = fg::to_dtype;
    return by_elements(x->dtype == d ? 0 : x->numel(), convert, x, d);  // the same dtype: x itself
  });
  m.def("clone", [](const Tensor& x) { return unary(fg::clone, x); });
  m.def("contiguous", &contiguous_binding);
  m.def("set_requires_grad", [](const Tensor& x, bool flag) {
    return call_op(
        false,
        [](const Tensor& x, bool flag) {
          set_requires_grad(x, flag);
          return x;
        },
        x, flag);
  });
  // For deepcopy, which copies whole storages so that views copied together still share one:
  // (identity, size in elements) of x's storage, and a tensor on x's storage with absolute geometry.
  m.def("storage_span", [](const Tensor& x) {
    return py::make_tuple(reinterpret_cast<uintptr_t>(x->storage.get()),
                          static_cast<int64_t>(x->storage->nbytes() / itemsize(x->dtype)));
  });
  m.def("on_storage_of", [](const Tensor& x, Shape shape, Shape strides, int64_t offset) {
    return make_view(x, std::move(shape), std::move(strides), offset);
  });
}

}  // namespace fg
