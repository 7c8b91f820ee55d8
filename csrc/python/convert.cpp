#include <cstring>

#include "python/bindings.h"
#include "python/capture.h"

namespace fg {

namespace {

DType dtype_of_array(const py::array& a) {
  // Elements stored in the other byte order would be read as garbage; PyTorch refuses them too.
  constexpr char kForeignOrder = PY_BIG_ENDIAN ? '<' : '>';  // numpy writes native order as '='
  if (a.dtype().byteorder() == kForeignOrder)
    throw ValueError(
        "given numpy array has byte order different from the native byte order. Conversion between byte orders is "
        "currently not supported.");
  char kind = a.dtype().kind();
  size_t size = a.dtype().itemsize();
  if (kind == 'f' && size == 4) return DType::Float32;
  if (kind == 'f' && size == 8) return DType::Float64;
  if (kind == 'f' && size == 2) return DType::Float16;
  if (kind == 'i' && size == 8) return DType::Int64;
  if (kind == 'i' && size == 4) return DType::Int32;
  if (kind == 'i' && size == 2) return DType::Int16;
  if (kind == 'i' && size == 1) return DType::Int8;
  if (kind == 'u' && size == 1) return DType::UInt8;
  if (kind == 'b') return DType::Bool;
  throw TypeError(cat("can't convert np.ndarray of type numpy.", std::string(py::str(a.dtype())),
                      ". The only supported types are: float64, float32, float16, complex64, complex128, int64, "
                      "int32, int16, int8, uint64, uint32, uint16, uint8, and bool."));
}

py::dtype numpy_dtype(DType d) {
  if (d == DType::BFloat16) throw TypeError("Got unsupported ScalarType BFloat16");  // numpy has no bfloat16
  return py::dtype(dtype_name(d));
}

void release_array(void* ctx) {
  py::gil_scoped_acquire gil;
  Py_DECREF(static_cast<PyObject*>(ctx));
}

}  // namespace

Tensor tensor_from_numpy(py::array array, bool share_memory) {
  DType dtype = dtype_of_array(array);
  Shape shape(array.shape(), array.shape() + array.ndim());
  if (!share_memory) {
    // The user's array, whose values may change between calls unseen by a compiled function's guards.
    if (capture_in_progress()) capture::cannot_replay("a copy of a numpy array (a host read of its values)");
    Tensor out = empty(shape, dtype);
    // A C-contiguous array (the usual one: numpy's results, a sampler's draws) is our row-major
    // layout byte for byte; only others go through numpy (an import and a call: microseconds)
    if (array.flags() & py::array::c_style) std::memcpy(out->data(), array.data(), static_cast<size_t>(array.nbytes()));
    else py::module_::import("numpy").attr("copyto")(tensor_to_numpy(out), array);
    return out;
  }
  Shape strides;
  auto item = static_cast<int64_t>(itemsize(dtype));
  for (py::ssize_t d = 0; d < array.ndim(); ++d) {
    if (array.strides(d) < 0)
      throw ValueError(
          "At least one stride in the given numpy array is negative, and tensors with negative strides are not "
          "currently supported. (You can probably work around this by making a copy of your array  with "
          "array.copy().) ");
    if (array.strides(d) % item != 0)
      throw ValueError("given numpy array strides not a multiple of the element byte size. Copy the numpy array to "
                       "reallocate the memory.");
    strides.push_back(array.strides(d) / item);
  }
  int64_t extent = 1;
  for (size_t d = 0; d < shape.size(); ++d) extent += (shape[d] - 1) * strides[d];
  Py_INCREF(array.ptr());
  auto t = std::make_shared<TensorImpl>();
  t->storage = Storage::wrap(array.mutable_data(), static_cast<size_t>(extent) * item, release_array, array.ptr());
  t->shape = shape;
  t->strides = strides;
  t->dtype = dtype;
  return t;
}

Tensor tensor_of_python_data(py::array array) {
  const DType dtype = dtype_of_array(array);
  py::array contiguous = py::module_::import("numpy").attr("ascontiguousarray")(array);
  const auto* data = static_cast<const uint8_t*>(contiguous.data());
  return tensor_of_bytes(std::vector<uint8_t>(data, data + contiguous.nbytes()),
                         Shape(array.shape(), array.shape() + array.ndim()), dtype);
}

Tensor tensor_of_bytes(std::vector<uint8_t> bytes, const Shape& shape, DType dtype) {
  auto make = [](const std::vector<uint8_t>& bytes, const Shape& shape, DType dtype) {
    Tensor out = empty(shape, dtype);
    if (!bytes.empty()) std::memcpy(out->data(), bytes.data(), bytes.size());
    return out;
  };
  return call_op(false, make, bytes, shape, dtype);
}

py::array tensor_to_numpy(const Tensor& t) {
  auto* keep = new std::shared_ptr<Storage>(t->storage);
  py::capsule owner(keep, [](void* p) { delete static_cast<std::shared_ptr<Storage>*>(p); });
  Shape byte_strides;
  for (int64_t s : t->strides) byte_strides.push_back(s * static_cast<int64_t>(itemsize(t->dtype)));
  return py::array(numpy_dtype(t->dtype), t->shape, byte_strides, t->data(), owner);
}

}  // namespace fg
