// The element types and PyTorch's type promotion between them.
//
// Bool, Int64, Float32 and Float64 are the compute types: kernels have native paths for them. The
// other types are storage types: an op loads them as their compute type (compute_type: int64 for
// the narrower integers, float32 for the 16-bit floats), runs the kernel it already has, and stores
// the result back, wrapping integers and rounding 16-bit floats. So adding a dtype adds
// conversions, not a copy of every kernel; `dispatch` reaches the compute types only, and a kernel
// handed a storage type raises NotImplementedError instead of reading it as something else.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "core/half.h"

namespace fg {

// The values are the Python dtype objects' codes (python/fastgrad/_types.py).
enum class DType : uint8_t {
  Bool = 0,
  Int64 = 1,
  Float32 = 2,
  Float64 = 3,
  Int32 = 4,
  Int16 = 5,
  Int8 = 6,
  UInt8 = 7,
  Float16 = 8,
  BFloat16 = 9,
};

inline size_t itemsize(DType d) {
  switch (d) {
    case DType::Bool:
    case DType::Int8:
    case DType::UInt8: return 1;
    case DType::Int16:
    case DType::Float16:
    case DType::BFloat16: return 2;
    case DType::Int32:
    case DType::Float32: return 4;
    case DType::Int64:
    case DType::Float64: return 8;
  }
  return 0;
}

inline const char* dtype_name(DType d) {
  switch (d) {
    case DType::Bool: return "bool";
    case DType::Int64: return "int64";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int32: return "int32";
    case DType::Int16: return "int16";
    case DType::Int8: return "int8";
    case DType::UInt8: return "uint8";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
  }
  return "?";
}

// The legacy type names PyTorch puts in autograd error messages ("[torch.FloatTensor [3]]").
inline const char* legacy_type_name(DType d) {
  switch (d) {
    case DType::Bool: return "BoolTensor";
    case DType::Int64: return "LongTensor";
    case DType::Float32: return "FloatTensor";
    case DType::Float64: return "DoubleTensor";
    case DType::Int32: return "IntTensor";
    case DType::Int16: return "ShortTensor";
    case DType::Int8: return "CharTensor";
    case DType::UInt8: return "ByteTensor";
    case DType::Float16: return "HalfTensor";
    case DType::BFloat16: return "BFloat16Tensor";
  }
  return "?";
}

// The names PyTorch's dtype errors use ("result type Float can't be cast to ... Long").
inline const char* scalar_type_name(DType d) {
  switch (d) {
    case DType::Bool: return "Bool";
    case DType::Int64: return "Long";
    case DType::Float32: return "Float";
    case DType::Float64: return "Double";
    case DType::Int32: return "Int";
    case DType::Int16: return "Short";
    case DType::Int8: return "Char";
    case DType::UInt8: return "Byte";
    case DType::Float16: return "Half";
    case DType::BFloat16: return "BFloat16";
  }
  return "?";
}

// The C++ type names some of PyTorch's dtype errors use ("... dtype long int and ... float").
inline const char* c_type_name(DType d) {
  switch (d) {
    case DType::Bool: return "bool";
    case DType::Int64: return "long int";
    case DType::Float32: return "float";
    case DType::Float64: return "double";
    case DType::Int32: return "int";
    case DType::Int16: return "short int";
    case DType::Int8: return "signed char";
    case DType::UInt8: return "unsigned char";
    case DType::Float16: return "c10::Half";
    case DType::BFloat16: return "c10::BFloat16";
  }
  return "?";
}

inline bool is_floating(DType d) {
  return d == DType::Float32 || d == DType::Float64 || d == DType::Float16 || d == DType::BFloat16;
}

// torch.set_default_dtype's type (a floating one): what Python floats and the integer inputs of
// float functions become. One for the process, as PyTorch's.
inline std::atomic<DType>& default_float_type_slot() {
  static std::atomic<DType> type{DType::Float32};
  return type;
}
inline DType default_float_type() { return default_float_type_slot().load(std::memory_order_relaxed); }

enum class Category : uint8_t { Bool = 0, Integral = 1, Floating = 2 };
inline Category category(DType d) {
  return d == DType::Bool ? Category::Bool : is_floating(d) ? Category::Floating : Category::Integral;
}

// The type an op computes a storage type in (see the top of this file).
inline DType compute_type(DType d) {
  if (is_floating(d)) return d == DType::Float64 ? DType::Float64 : DType::Float32;
  return d == DType::Bool ? DType::Bool : DType::Int64;
}

// PyTorch's promote_types: the higher category wins; within one, the wider type, except that
// uint8 with int8 gives int16 and float16 with bfloat16 gives float32 (neither holds the other).
inline DType promote(DType a, DType b) {
  if (a == b) return a;
  if (category(a) != category(b)) return category(a) > category(b) ? a : b;
  if (category(a) == Category::Integral && (a == DType::UInt8 || b == DType::UInt8)) {
    DType other = a == DType::UInt8 ? b : a;
    return other == DType::Int8 ? DType::Int16 : other;
  }
  if (itemsize(a) == itemsize(b)) return DType::Float32;  // float16 and bfloat16
  return itemsize(a) > itemsize(b) ? a : b;
}

// PyTorch's error for a dtype its kernel is not compiled for: "\"softmax_kernel_impl\" not
// implemented for 'Long'".
inline NotImplementedError not_implemented_for(const char* kernel, DType dtype) {
  return NotImplementedError(cat("\"", kernel, "\" not implemented for '", scalar_type_name(dtype), "'"));
}

// Calls f with a value of the C++ compute type of `d` (only the type matters), e.g.
// dispatch(d, [&](auto tag) { using T = decltype(tag); ... }). A storage type raises: an op that
// has not converted it at its boundary must not read it as another type.
template <class F>
decltype(auto) dispatch(DType d, F&& f) {
  switch (d) {
    case DType::Bool: return f(bool{});
    case DType::Int64: return f(int64_t{});
    case DType::Float32: return f(float{});
    case DType::Float64: break;
    default: throw not_implemented_for("this operation", d);
  }
  return f(double{});
}

template <class F>
decltype(auto) dispatch_floating(DType d, F&& f) {
  if (d == DType::Float32) return f(float{});
  if (d != DType::Float64) throw not_implemented_for("this operation", d);
  return f(double{});
}

// Calls f with a value of the C++ type stored for `d`: for code that only moves or converts
// elements (copies, fills, item), where every dtype is cheap.
template <class F>
decltype(auto) dispatch_stored(DType d, F&& f) {
  switch (d) {
    case DType::Bool: return f(bool{});
    case DType::Int64: return f(int64_t{});
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    case DType::Int32: return f(int32_t{});
    case DType::Int16: return f(int16_t{});
    case DType::Int8: return f(int8_t{});
    case DType::UInt8: return f(uint8_t{});
    case DType::Float16: return f(Half{});
    case DType::BFloat16: break;
  }
  return f(BFloat16{});
}

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<bool>() { return DType::Bool; }
template <> constexpr DType dtype_of<int64_t>() { return DType::Int64; }
template <> constexpr DType dtype_of<float>() { return DType::Float32; }
template <> constexpr DType dtype_of<double>() { return DType::Float64; }

}  // namespace fg
