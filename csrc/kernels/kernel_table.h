// The function table of the SIMD kernels, one instance per ISA. Kernel code is written once in
// csrc/kernels/*_impl.h against the vector wrapper (simd.h) and compiled once per ISA, each copy
// inside its own namespace fg::simd::<isa> (so the linker can never hand AVX-512 code to the
// baseline path); isa_table_impl.h fills each copy's table. The active ISA's table is chosen once,
// at import (isa.cpp). Ops call kernels().member(...).
//
// Each kernel family adds its members here (and its fill_* call in isa_table_impl.h).
#pragma once
#include <cstdint>
#include <type_traits>

namespace fg {

// The binary and unary operations with vector kernels; indices into the tables below.
enum class VecBinary : uint8_t { Add, Sub, Mul, Div, Max, Min, Count };
enum class VecUnary : uint8_t { Neg, Abs, Relu, Exp, Log, Tanh, Sigmoid, Sqrt, Count };

// out[i] = a[i] op b[i] for i < n, where an operand flagged as broadcast is the single value a[0]
// (b[0]) repeated. out may alias a or b.
template <class T>
using BinaryKernel = void (*)(const T* a, bool a_broadcast, const T* b, bool b_broadcast, T* out, int64_t n);
// out[i] = f(x[i]) for i < n; out may alias x.
template <class T>
using UnaryKernel = void (*)(const T* x, T* out, int64_t n);
// The sum of x[0..n) in double, in a fixed order for every ISA (see reduce_impl.h).
template <class T>
using SumKernel = double (*)(const T* x, int64_t n);
// acc[j] += x[j] for j < n, in double (one row of a sum over leading dims).
template <class T>
using AccumulateKernel = void (*)(double* acc, const T* x, int64_t n);
// C (m x n, rows ldc apart, columns contiguous) = A (m x k) @ B (k x n), with A[i][p] =
// a[i * rsa + p * csa] and B[p][j] = b[p * rsb + j * csb]; each element one k-ordered chain (gemm_impl.h).
template <class T>
using GemmKernel = void (*)(int64_t m, int64_t n, int64_t k, const T* a, int64_t rsa, int64_t csa, const T* b,
                            int64_t rsb, int64_t csb, T* c, int64_t ldc);

// The GEMM's micro-tile (mr x nr) and cache blocks (kc, mc, nc; gemm_impl.h), derived from the CPU's
// caches at load time; small_a_bytes: the largest A the small path reads in place.
struct GemmBlocks {
  int64_t mr, nr, kc, mc, nc, small_a_bytes;
};

// One plane of a depthwise convolution (depthwise_impl.h): an output of oh x ow, taps kh x kw with
// strides sy, sx and dilations dy, dx, over an input plane padded with zeros, its rows ld apart.
struct DepthwisePlane {
  int64_t oh, ow, kh, kw, sy, sx, dy, dx, ld;
};
// forward(plane, in, w, out): out = the taps w over the padded plane in;
// grad_input(plane, grad, w, gin): the padded plane gin += grad spread back through the taps;
// grad_weight(plane, grad, in, acc): acc (kh * kw rows of ow lanes) += grad times the plane it read.
template <class T>
using DepthwiseKernel = void (*)(const DepthwisePlane& plane, const T* a, const T* b, T* c);

// Softmax over a block of a tensor seen as [n, inner] (softmax_impl.h): `columns` rows of n values,
// column j's at x[j], x[j + inner], ... (inner == 1: one contiguous row, columns == 1).
// forward(x, y, n, inner, columns, log): y = softmax(x) or log_softmax(x);
// backward(y, g, gx, n, inner, columns, log): gx = the input gradient from the output y and its gradient g.
template <class T>
using SoftmaxForwardKernel = void (*)(const T* x, T* y, int64_t n, int64_t inner, int64_t columns, bool log);
template <class T>
using SoftmaxBackwardKernel = void (*)(const T* y, const T* g, T* gx, int64_t n, int64_t inner, int64_t columns,
                                       bool log);

// Runs `iterations` steps of independent register-only FMA chains; returns the flops done (gemm_impl.h).
using FmaLoopKernel = double (*)(int64_t iterations);

template <class T>
struct TypedKernels {
  BinaryKernel<T> binary[static_cast<int>(VecBinary::Count)];
  UnaryKernel<T> unary[static_cast<int>(VecUnary::Count)];
  SumKernel<T> sum;
  AccumulateKernel<T> accumulate;
  GemmKernel<T> gemm;
  GemmBlocks gemm_blocks;
  FmaLoopKernel fma_loop;
  DepthwiseKernel<T> depthwise_forward, depthwise_grad_input, depthwise_grad_weight;
  SoftmaxForwardKernel<T> softmax_forward;
  SoftmaxBackwardKernel<T> softmax_backward;
};

struct KernelTable {
  const char* isa;  // isa_name() of the ISA these kernels were compiled for
  TypedKernels<float> f32;
  TypedKernels<double> f64;

  template <class T>
  const TypedKernels<T>& of() const {
    if constexpr (std::is_same_v<T, float>) return f32;
    else return f64;
  }
};

// The active ISA's table (chosen once, at import).
const KernelTable& kernels();

namespace simd {
// Each ISA's table, defined by csrc/kernels/isa_<isa>.cpp (only the ISAs built for this CPU family).
namespace scalar {
const KernelTable& kernel_table();
}
namespace avx2 {
const KernelTable& kernel_table();
}
namespace avx512 {
const KernelTable& kernel_table();
}
namespace neon {
const KernelTable& kernel_table();
}
}  // namespace simd

}  // namespace fg
