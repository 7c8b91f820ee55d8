// DLPack both ways: a tensor exported in a capsule that numpy, PyTorch or JAX read without a copy,
// and a capsule of theirs read as a tensor over their memory. Whoever holds the memory last calls
// the producer's deleter, so the producer's storage lives as long as any consumer's tensor.
#include "python/bindings.h"
#include "python/dlpack.h"

namespace fg {

namespace {

using namespace dlpack;

// The capsule names of the two forms, before and after a consumer takes the tensor out.
template <class Managed>
struct CapsuleNames;
template <>
struct CapsuleNames<ManagedTensor> {
  static constexpr const char* fresh = "dltensor";
  static constexpr const char* used = "used_dltensor";
};
template <>
struct CapsuleNames<ManagedTensorVersioned> {
  static constexpr const char* fresh = "dltensor_versioned";
  static constexpr const char* used = "used_dltensor_versioned";
};

DataType dl_dtype(DType d) {
  auto bits = static_cast<uint8_t>(8 * itemsize(d));
  switch (d) {
    case DType::Bool: return {kDLBool, bits, 1};
    case DType::UInt8: return {kDLUInt, bits, 1};
    case DType::Int8:
    case DType::Int16:
    case DType::Int32:
    case DType::Int64: return {kDLInt, bits, 1};
    case DType::Float16:
    case DType::Float32:
    case DType::Float64: return {kDLFloat, bits, 1};
    case DType::BFloat16: return {kDLBfloat, bits, 1};
  }
  throw RuntimeError("unknown dtype");
}

DType dtype_of(DataType t) {
  if (t.lanes == 1) {
    switch (t.code) {
      case kDLBool:
        if (t.bits == 8) return DType::Bool;
        break;
      case kDLUInt:
        if (t.bits == 8) return DType::UInt8;
        break;
      case kDLInt:
        if (t.bits == 8) return DType::Int8;
        if (t.bits == 16) return DType::Int16;
        if (t.bits == 32) return DType::Int32;
        if (t.bits == 64) return DType::Int64;
        break;
      case kDLFloat:
        if (t.bits == 16) return DType::Float16;
        if (t.bits == 32) return DType::Float32;
        if (t.bits == 64) return DType::Float64;
        break;
      case kDLBfloat:
        if (t.bits == 16) return DType::BFloat16;
        break;
    }
  }
  throw RuntimeError(cat("Unsupported dtype in DLTensor: type code ", int(t.code), ", ", int(t.bits), " bits, ",
                         t.lanes, " lanes (fastgrad holds bool, uint8, int8/16/32/64, float16/32/64 and bfloat16)"));
}

// ---- export

// What an exported capsule owns: the DLPack struct, the arrays its DLTensor points at, and a
// reference to the tensor's storage, dropped by the deleter.
template <class Managed>
struct Export {
  Managed managed{};
  std::shared_ptr<Storage> storage;
  Shape shape, strides;

  static void deleter(Managed* self) { delete static_cast<Export*>(self->manager_ctx); }
};

// A capsule nobody consumed owns its tensor; a consumer renames the capsule and then owns it.
template <class Managed>
void delete_unconsumed(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, CapsuleNames<Managed>::fresh)) return;
  PyObject *type, *value, *traceback;  // a destructor must leave a pending exception as it found it
  PyErr_Fetch(&type, &value, &traceback);
  auto* managed = static_cast<Managed*>(PyCapsule_GetPointer(capsule, CapsuleNames<Managed>::fresh));
  if (managed->deleter) managed->deleter(managed);
  PyErr_Restore(type, value, traceback);
}

template <class Managed>
py::capsule export_tensor(const Tensor& t, uint64_t flags) {
  auto* owner = new Export<Managed>{};
  owner->storage = t->storage;
  owner->shape = t->shape;
  owner->strides = t->strides;
  Managed& m = owner->managed;
  if constexpr (std::is_same_v<Managed, ManagedTensorVersioned>) {
    m.version = kVersion;
    m.flags = flags;
  }
  m.manager_ctx = owner;
  m.deleter = &Export<Managed>::deleter;
  DLTensor& dl = m.dl_tensor;
  dl.data = t->data();
  dl.device = {kDLCPU, 0};
  dl.ndim = static_cast<int32_t>(t->dim());
  dl.dtype = dl_dtype(t->dtype);
  dl.shape = owner->shape.data();
  dl.strides = owner->strides.data();
  dl.byte_offset = 0;
  PyObject* capsule = PyCapsule_New(&m, CapsuleNames<Managed>::fresh, &delete_unconsumed<Managed>);
  if (!capsule) {
    delete owner;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(capsule);
}

// `copied`: the caller made `t` as a copy for the consumer (DLPack 1.x says so in a flag).
py::capsule to_dlpack(const Tensor& t, bool versioned, bool copied) {
  if (versioned) return export_tensor<ManagedTensorVersioned>(t, copied ? kFlagIsCopied : 0);
  return export_tensor<ManagedTensor>(t, 0);
}

// ---- import

template <class Managed>
void call_deleter(void* managed) {
  auto* m = static_cast<Managed*>(managed);
  if (m->deleter) m->deleter(m);
}

// The dtype, shape and strides of a DLTensor, checked before the capsule is consumed (an error
// leaves the capsule and its tensor to the producer); returns the bytes from its first element to
// its last.
size_t describe(const DLTensor& dl, TensorImpl& t) {
  if (dl.device.device_type != kDLCPU)
    throw RuntimeError(cat("fastgrad tensors live on the CPU: cannot share a DLPack tensor of device type ",
                           dl.device.device_type, " (kDLCPU is 1)"));
  t.dtype = dtype_of(dl.dtype);
  if (dl.ndim < 0) throw RuntimeError("DLPack tensor has a negative number of dimensions");
  t.shape.assign(dl.shape, dl.shape + dl.ndim);
  int64_t numel = 1;
  for (int64_t n : t.shape) {
    if (n < 0) throw RuntimeError("DLPack tensor has a negative size");
    numel *= n;
  }
  if (dl.strides) t.strides.assign(dl.strides, dl.strides + dl.ndim);
  else t.strides = contiguous_strides(t.shape);
  int64_t extent = numel > 0 ? 1 : 0;  // elements from the first to the last, inclusive
  for (int32_t d = 0; d < dl.ndim && numel > 0; ++d) {
    if (t.strides[d] < 0)
      throw ValueError("DLPack tensor has a negative stride, and tensors with negative strides are not currently "
                       "supported.");
    extent += (t.shape[d] - 1) * t.strides[d];
  }
  return static_cast<size_t>(extent) * itemsize(t.dtype);
}

template <class Managed>
Tensor import_capsule(PyObject* capsule) {
  auto* m = static_cast<Managed*>(PyCapsule_GetPointer(capsule, CapsuleNames<Managed>::fresh));
  if (!m) throw py::error_already_set();
  bool read_only = false;
  if constexpr (std::is_same_v<Managed, ManagedTensorVersioned>) {
    if (m->version.major != kVersion.major)
      throw py::buffer_error(cat("DLPack version ", m->version.major, ".", m->version.minor,
                                 " is not supported (fastgrad reads version ", kVersion.major, ".x)"));
    read_only = m->flags & kFlagReadOnly;
  }
  auto t = std::make_shared<TensorImpl>();
  size_t nbytes = describe(m->dl_tensor, *t);
  if (PyCapsule_SetName(capsule, CapsuleNames<Managed>::used) != 0) throw py::error_already_set();
  // From here the tensor's storage owns the producer's tensor.
  const DLTensor& dl = m->dl_tensor;
  t->storage = Storage::wrap(static_cast<char*>(dl.data) + dl.byte_offset, nbytes, &call_deleter<Managed>, m);
  // A fastgrad tensor is always writable: read-only memory is copied, as from_numpy copies a
  // read-only array (the shared tensor, and with it the producer's, is released at once).
  return read_only ? clone(t) : t;
}

Tensor from_dlpack(py::handle capsule) {
  if (PyCapsule_IsValid(capsule.ptr(), CapsuleNames<ManagedTensorVersioned>::fresh))
    return import_capsule<ManagedTensorVersioned>(capsule.ptr());
  if (PyCapsule_IsValid(capsule.ptr(), CapsuleNames<ManagedTensor>::fresh))
    return import_capsule<ManagedTensor>(capsule.ptr());
  throw RuntimeError(
      "from_dlpack received an invalid capsule. Note that DLTensor capsules can be consumed only once, so you might "
      "have already constructed a tensor from it once.");
}

}  // namespace

void bind_dlpack(py::module_& m) {
  m.def("to_dlpack", &to_dlpack, py::arg("tensor"), py::arg("versioned"), py::arg("copied"));
  m.def("from_dlpack", &from_dlpack, py::arg("capsule"));
}

}  // namespace fg
