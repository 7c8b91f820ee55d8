// The DLPack structs (public spec, dlpack.h v1.x): a tensor's memory and layout described in C, handed
// between libraries inside a Python capsule named "dltensor_versioned" (1.x) or "dltensor" (legacy).
#pragma once
#include <cstdint>

namespace fg::dlpack {

struct Version {
  uint32_t major;
  uint32_t minor;
};
// The version this module produces and the major version it reads.
constexpr Version kVersion{1, 0};

enum DeviceType : int32_t { kDLCPU = 1 };

struct Device {
  DeviceType device_type;
  int32_t device_id;
};

enum TypeCode : uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLBool = 6 };

struct DataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct DLTensor {
  void* data;
  Device device;
  int32_t ndim;
  DataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null means compact row-major (allowed before DLPack 1.2)
  uint64_t byte_offset;
};

// The legacy form: no version, no flags.
struct ManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(ManagedTensor* self);
};

constexpr uint64_t kFlagReadOnly = 1u << 0;
constexpr uint64_t kFlagIsCopied = 1u << 1;

struct ManagedTensorVersioned {
  Version version;
  void* manager_ctx;
  void (*deleter)(ManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};

}  // namespace fg::dlpack
