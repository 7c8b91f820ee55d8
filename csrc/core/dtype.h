// The four element types and PyTorch's promotion lattice bool < int64 < float32 < float64.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/error.h"

namespace fg {

enum class DType : uint8_t { Bool = 0, Int64 = 1, Float32 = 2, Float64 = 3 };

inline size_t itemsize(DType d) {
  switch (d) {
    case DType::Bool: return 1;
    case DType::Int64: return 8;
    case DType::Float32: return 4;
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
  }
  return "?";
}

inline bool is_floating(DType d) { return d == DType::Float32 || d == DType::Float64; }

// Categories order the lattice; within a category the wider type wins.
inline DType promote(DType a, DType b) { return static_cast<uint8_t>(a) > static_cast<uint8_t>(b) ? a : b; }

enum class Category : uint8_t { Bool = 0, Integral = 1, Floating = 2 };
inline Category category(DType d) {
  return d == DType::Bool ? Category::Bool : d == DType::Int64 ? Category::Integral : Category::Floating;
}

// Calls f with a value of the C++ type of `d` (only the type matters), e.g.
// dispatch(d, [&](auto tag) { using T = decltype(tag); ... }).
template <class F>
decltype(auto) dispatch(DType d, F&& f) {
  switch (d) {
    case DType::Bool: return f(bool{});
    case DType::Int64: return f(int64_t{});
    case DType::Float32: return f(float{});
    case DType::Float64: break;
  }
  return f(double{});
}

template <class F>
decltype(auto) dispatch_floating(DType d, F&& f) {
  if (d == DType::Float32) return f(float{});
  return f(double{});
}

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<bool>() { return DType::Bool; }
template <> constexpr DType dtype_of<int64_t>() { return DType::Int64; }
template <> constexpr DType dtype_of<float>() { return DType::Float32; }
template <> constexpr DType dtype_of<double>() { return DType::Float64; }

}  // namespace fg
