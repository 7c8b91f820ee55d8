// Float functions of two operands (atan2, hypot, logaddexp, logaddexp2, copysign): their values in
// the operands' promoted float type (integers compute in the default dtype), without a node: the
// Python layer records PyTorch's node over them, whose gradient formulas are compositions of ops.
// Every value is computed in double and rounded once to the element type (the 16-bit floats through
// float32, as every op computes them): float64 by the C library (special_functions.h), float32 by
// the vector kernels' explicit algorithms in double lanes (float_binary_impl.h), which give the same
// bits on every ISA. The pure-Python reference (reference/_math.py) computes the same bits with the
// same steps. This file is compiled with -ffp-contract=off, so no a * b + c here is fused (Python's
// floats never fuse).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/special_functions.h"
#include "ops/elementwise_maps.h"

namespace fg {

namespace {
// The element function of the strided loops (runs too short for the kernel), with the kernel's bits:
// float32 the kernel itself on one element; float64 the C library function the kernel loops over
// (the maps instantiate it for every type, but only float types compute these ops).
template <VecBinary kOp, double (*f)(double, double)>
auto by_kernel = [](auto x, auto y) {
  if constexpr (std::is_same_v<decltype(x), float>) {
    float out;
    kernels().f32.binary[static_cast<int>(kOp)](&x, false, &y, false, &out, 1);
    return out;
  } else {
    return static_cast<decltype(x)>(f(static_cast<double>(x), static_cast<double>(y)));
  }
};

// copysign is exact: in double and rounded back, each type's own bits.
auto copysign_value = [](auto x, auto y) {
  return static_cast<decltype(x)>(std::copysign(static_cast<double>(x), static_cast<double>(y)));
};

// t, or for float32 computations a dense copy of t when t is strided but not broadcast (no zero stride:
// a transposed matrix, a column, ...): the kernel then runs along whole rows, where the strided loop
// would call it once per element (atan2 of a transposed 1000 x 1000 float32 operand, one thread: 54 ->
// 1.6 ms). The copy keeps t's dtype: the conversions are binary_map's, as without it.
Tensor dense_operand(const Tensor& t, DType dt) {
  const bool broadcast = std::find(t->strides.begin(), t->strides.end(), 0) != t->strides.end();
  if (compute_type(dt) != DType::Float32 || t->is_contiguous() || broadcast) return t;
  Tensor copy = empty(t->shape, t->dtype);
  copy_values(copy, t);
  return copy;
}

// op(a, b) for b a tensor or a number.
template <class B>
Tensor float_map(const Tensor& a_in, const B& b_in, FloatBinary op) {
  if constexpr (std::is_same_v<B, Tensor>) broadcast_shapes(a_in->shape, b_in->shape);  // checked first, as PyTorch
  DType dt = float_type(result_type(a_in, b_in));
  const Tensor a = dense_operand(a_in, dt);
  auto map = [&](auto f, std::optional<VecBinary> vec) {
    if constexpr (std::is_same_v<B, Tensor>) return binary_map(a, dense_operand(b_in, dt), dt, dt, f, vec);
    else return scalar_map(a, b_in, dt, dt, f, vec);
  };
  switch (op) {
    case FloatBinary::Atan2: return map(by_kernel<VecBinary::Atan2, special::atan2>, VecBinary::Atan2);
    case FloatBinary::Hypot: return map(by_kernel<VecBinary::Hypot, special::hypot>, VecBinary::Hypot);
    case FloatBinary::Logaddexp: return map(by_kernel<VecBinary::Logaddexp, special::logaddexp>, VecBinary::Logaddexp);
    case FloatBinary::Logaddexp2:
      return map(by_kernel<VecBinary::Logaddexp2, special::logaddexp2>, VecBinary::Logaddexp2);
    case FloatBinary::Copysign: return map(copysign_value, std::nullopt);
  }
  throw RuntimeError("float_binary: unknown op");  // not reached: the switch names every op
}
}  // namespace

Tensor float_binary(const Tensor& a, const Tensor& b, FloatBinary op) { return float_map(a, b, op); }
Tensor float_binary(const Tensor& a, const Scalar& b, FloatBinary op) { return float_map(a, b, op); }

}  // namespace fg
