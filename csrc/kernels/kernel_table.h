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

// The binary and unary operations with vector kernels; indices into the tables below. Atan2 ... Logaddexp2
// are the float functions of two operands (float_binary_impl.h; ops/float_binary.cpp).
enum class VecBinary : uint8_t { Add, Sub, Mul, Div, Max, Min, ReluGrad, Atan2, Hypot, Logaddexp, Logaddexp2, Count };
enum class VecUnary : uint8_t { Neg, Abs, Relu, Exp, Log, Tanh, Sigmoid, Sqrt, Sin, Cos, Count };
// The activations with a forward and a gradient kernel each: with parameters (ops/activation.cpp),
// and GELU (ops/nn.cpp; no parameters) with approximate='none' and 'tanh'.
enum class Activation : uint8_t { LeakyRelu, Hardtanh, Gelu, GeluTanh, Count };

// out[i] = a[i] op b[i] for i < n, where an operand flagged as broadcast is the single value a[0]
// (b[0]) repeated. out may alias a or b.
template <class T>
using BinaryKernel = void (*)(const T* a, bool a_broadcast, const T* b, bool b_broadcast, T* out, int64_t n);
// out[i] = x[i] * y[i] + z[i] rounded once (the FMA instruction's result), with broadcast operands as
// BinaryKernel's: PyTorch's vector loops compute add with alpha, addcmul and lerp so.
template <class T>
using FmaKernel = void (*)(const T* x, bool x_broadcast, const T* y, bool y_broadcast, const T* z, bool z_broadcast,
                           T* out, int64_t n);
// out[i] = f(x[i]) for i < n; out may alias x.
template <class T>
using UnaryKernel = void (*)(const T* x, T* out, int64_t n);
// out[i] = f(x[i]) for i < n, f an activation with the parameters params[0..] (its slope, bounds, ...).
template <class T>
using ActivationKernel = void (*)(const T* x, T* out, int64_t n, const T* params);
// out[i] = g[i] f'(x[i]) for i < n (g[0] for every i when g_broadcast); x is the activation's input,
// or its result where f' reads the same from it (leaky_relu with a slope >= 0, hardtanh).
template <class T>
using ActivationGradKernel = void (*)(const T* g, bool g_broadcast, const T* x, T* out, int64_t n, const T* params);
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
// The same product with B already packed as the GEMM packs it: ceil(n / nr) panels of nr columns
// (nr = GemmBlocks::nr), k * nr elements apart, each depth-major (B[p][j] at panel[p * nr + j % nr])
// with the last one's columns past n zero; every element the same chain as GemmKernel's.
template <class T>
using GemmPackedBKernel = void (*)(int64_t m, int64_t n, int64_t k, const T* a, int64_t rsa, int64_t csa,
                                   const T* b_panels, T* c, int64_t ldc);
// The same product with B's rows read in place and its columns in runs of `run` (a multiple of the
// vector width, or at least n) `run_stride` apart: B[p][j] = b[b_rows[p] + (j / run) * run_stride +
// j % run], each row readable up to its last column rounded up to a whole vector (columns past n are
// read and dropped).
template <class T>
using GemmOffsetBKernel = void (*)(int64_t m, int64_t n, int64_t k, const T* a, int64_t rsa, int64_t csa, const T* b,
                                   const int64_t* b_rows, int64_t run, int64_t run_stride, T* c, int64_t ldc);
// The same product with A's columns read in place: A[i][p] = a[a_columns[p] + i]; B as GemmKernel's.
template <class T>
using GemmOffsetAKernel = void (*)(int64_t m, int64_t n, int64_t k, const T* a, const int64_t* a_columns, const T* b,
                                   int64_t rsb, int64_t csb, T* c, int64_t ldc);

// dst (cols x rows, contiguous) = src (rows x cols, rows ld_src apart) transposed.
template <class T>
using TransposeKernel = void (*)(int64_t rows, int64_t cols, const T* src, int64_t ld_src, T* dst);

// gemm_pack_b(k, n, b, rsb, csb, panels): B (k x n, B[p][j] = b[p * rsb + j * csb]) into the panels
// GemmPackedBKernel reads (round_up(n, nr) * k elements), so a B used by many products (a recurrent
// layer's W_hh at every time step) is packed once.
template <class T>
using GemmPackBKernel = void (*)(int64_t k, int64_t n, const T* b, int64_t rsb, int64_t csb, T* panels);

// The GEMM's micro-tile (mr x nr, nr a whole number of vectors of `lanes` elements) and cache blocks
// (kc, mc, nc; gemm_impl.h), derived from the CPU's caches at load time; small_a_bytes: the largest A
// the small path reads in place; prefetch_b: how many steps of k ahead the micro-kernel prefetches
// its packed panel of B (0: none; derived from the CPU's vendor).
struct GemmBlocks {
  int64_t mr, nr, lanes, kc, mc, nc, small_a_bytes, prefetch_b;
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

// One step of torch.optim.Adam / AdamW for one parameter (optim_impl.h), the scalars already rounded
// to T as PyTorch rounds a scalar argument.
template <class T>
struct AdamStep {
  T weight_decay;           // with l2: the gradient is grad + weight_decay * param
  T decay;                  // decoupled weight decay: param * decay first (1: none)
  T lerp_weight;            // 1 - beta1
  T beta2, one_minus_beta2;
  T bias_correction2_sqrt;  // sqrt(1 - beta2^step)
  T eps;
  T neg_step_size;  // -lr / (1 - beta1^step)
  bool l2, maximize, amsgrad;
};
// param, exp_avg, exp_avg_sq (and max_exp_avg_sq, with amsgrad) updated in place over n elements.
template <class T>
using AdamKernel = void (*)(const AdamStep<T>& step, T* param, const T* grad, T* exp_avg, T* exp_avg_sq,
                            T* max_exp_avg_sq, int64_t n);

// One step of torch.optim.SGD for one parameter (optim_impl.h).
template <class T>
struct SgdStep {
  T weight_decay, momentum, one_minus_dampening, neg_lr;
  bool l2, with_momentum, first_step, nesterov, maximize;
};
// param (and momentum_buffer, with momentum) updated in place over n elements.
template <class T>
using SgdKernel = void (*)(const SgdStep<T>& step, T* param, const T* grad, T* momentum_buffer, int64_t n);

// One step of torch.optim.Adagrad for one parameter (optim_impl.h); neg_lr: -lr / (1 + (step - 1) * lr_decay).
template <class T>
struct AdagradStep {
  T weight_decay, eps, neg_lr;
  bool l2, maximize;
};
template <class T>
using AdagradKernel = void (*)(const AdagradStep<T>& step, T* param, const T* grad, T* sum, int64_t n);

// dst (rows x width, rows ld_dst apart) = src (rows ld_src apart); the blocks do not overlap (copy_impl.h).
template <class T>
using CopyBlockKernel = void (*)(int64_t rows, int64_t width, const T* src, int64_t ld_src, T* dst, int64_t ld_dst);

// A row of pool outputs whose windows hold all their rows x kernel taps (pool_impl.h): output j < count
// reads in[ty * row_step + j * stride + tx * step] for ty < rows, tx < kernel; `room` elements may
// be read from in (to the end of the input).
struct PoolColumns {
  int64_t count, rows, row_step, kernel, step, stride, room;
};
// max_pool_columns(cols, in, best, tap): best[j] = output j's maximum (NaN the largest), tap[j] its tap's
// number ty * kernel + tx as a T (-1 when no tap is above -inf; callers keep the numbers exact in T);
// sum_pool_columns(cols, in, sums): sums[j] = the sum of output j's taps in double.
template <class T>
using MaxPoolKernel = void (*)(const PoolColumns& cols, const T* in, T* best, T* tap);
template <class T>
using SumPoolKernel = void (*)(const PoolColumns& cols, const T* in, double* sums);
// The gradient of an average pool over a run of inputs that `count` windows of `width` inputs tile
// (pool_impl.h): out[j * width + r] = shares[j] for r < width.
template <class T>
using SpreadAverageKernel = void (*)(const T* shares, int64_t count, int64_t width, T* out);

// Batch and group normalization's passes (norm_impl.h). norm_sums(p, s1, q, s2, n, first, second):
// first[l] += the sum of p[i] - s1 and second[l] += that of (p[i] - s1) * (q[i] - s2) over the i < n
// of lane l (kNormLanes lanes, the same order on every ISA); norm_column_sums(...): the same terms
// with per-element shifts s1[j], s2[j], added to first[j], second[j] (j < n).
inline constexpr int kNormLanes = 16;  // a multiple of every ISA's float and double width
// The total of kNormLanes lane sums, added in a fixed pairwise order: lane l and lane l + 8, then l
// and l + 4, ...: four dependent adds per total where a chain of lanes took 15. The halves go to a
// local array the compiler keeps in registers (adding in place in the caller's array, which escapes
// to the out-of-line sums, was a loop of stores and reloads: a fifth of a 64-wide layer norm row).
// static: every translation unit (each ISA's too) keeps its own copy, so the linker cannot hand
// the baseline code one compiled for AVX-512.
static inline double lane_total(const double* lanes) {
  double half[kNormLanes / 2];
  for (int l = 0; l < kNormLanes / 2; ++l) half[l] = lanes[l] + lanes[l + kNormLanes / 2];
  for (int width = kNormLanes / 4; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) half[l] += half[l + width];
  return half[0];
}
template <class T>
using NormSumsKernel = void (*)(const T* p, T s1, const T* q, T s2, int64_t n, double* first, double* second);
template <class T>
using NormColumnSumsKernel = void (*)(const T* p, const T* s1, const T* q, const T* s2, int64_t n, double* first,
                                      double* second);
// The coefficients of out[i] = k1 * u[i] + k2 * (v[i] - center) + k3 (without v: k1 * u[i] + k3),
// each the single value *k, or k[i] when per_element.
template <class T>
struct NormAffine {
  const T *k1, *k2, *center, *k3;
  bool per_element;
};
template <class T>
using NormAffineKernel = void (*)(const NormAffine<T>& k, const T* u, const T* v, T* out, int64_t n);
// norm_moments(units, count, shift, sum, squares, eps, mean, invstd, var): per unit u, from the sums of
// x - shift[u] and of its square over `count` elements, in double: m = sum / count, var = squares /
// count - m^2 (a negative from rounding: 0; a NaN stays), mean = shift + m, invstd = 1 / sqrt(var + eps)
// (var null: not stored).
template <class T>
using NormMomentsKernel = void (*)(int64_t units, int64_t count, const T* shift, const double* sum,
                                   const double* squares, double eps, double* mean, double* invstd, double* var);
// Layer normalization over `rows` contiguous rows of `len` elements (norm_impl.h), with a weight and
// bias per element of a row (each null when absent):
// layer_norm_forward(x, rows, len, weight, bias, eps, out, mean, rstd): each row's statistics (norm_sums
// with the row's first element as the shift, lane_total, norm_moments) saved in mean[r] and rstd[r]
// (rounded to T), and out = (x - mean) * rstd * weight + bias;
// layer_norm_input_grad(dy, x, rows, len, weight, mean, rstd, out): per row the sums s1 of dy * weight
// and s2 of dy * weight * (x - mean) (norm_sums' lanes), then out = (dy * weight - (x - mean) *
// projection - grad_mean) * rstd with projection = s2 / len * rstd^2 and grad_mean = s1 / len, each
// computed in double and rounded to T;
// layer_norm_param_sums(dy, x, ld, mean, rstd, rows, n, grad_weight, grad_bias): over `rows` rows ld apart,
// grad_weight[j] += the sum of dy * (x - mean) * rstd, grad_bias[j] += that of dy (blocks of rows in T, then double).
template <class T>
using LayerNormForwardKernel = void (*)(const T* x, int64_t rows, int64_t len, const T* weight, const T* bias,
                                        double eps, T* out, T* mean, T* rstd);
template <class T>
using LayerNormInputGradKernel = void (*)(const T* dy, const T* x, int64_t rows, int64_t len, const T* weight,
                                          const T* mean, const T* rstd, T* out);
template <class T>
using LayerNormParamSumsKernel = void (*)(const T* dy, const T* x, int64_t ld, const T* mean, const T* rstd,
                                          int64_t rows, int64_t n, double* grad_weight, double* grad_bias);

// Softmax over a block of a tensor seen as [n, inner] (softmax_impl.h): `columns` rows of n values,
// column j's at x[j], x[j + inner], ... (inner == 1: `columns` contiguous rows).
// forward(x, y, n, inner, columns, log): y = softmax(x) or log_softmax(x);
// backward(y, g, gx, n, inner, columns, log): gx = the input gradient from the output y and its gradient g.
template <class T>
using SoftmaxForwardKernel = void (*)(const T* x, T* y, int64_t n, int64_t inner, int64_t columns, bool log);
template <class T>
using SoftmaxBackwardKernel = void (*)(const T* y, const T* g, T* gx, int64_t n, int64_t inner, int64_t columns,
                                       bool log);

// Scaled dot-product attention over one (batch, head) plane (attention_impl.h): `queries` rows of q,
// `keys` rows of k and v, each row `width` contiguous elements, rows ld_* apart. causal: query i sees
// keys j <= i (top left). The kernels' scratch: attention_scratch(keys, width) elements.
struct AttentionPlane {
  int64_t queries, keys, width;
  double scale;
  bool causal;
};
// The panel rows' length for `keys` keys: a multiple of twice every ISA's vector width (the kernels
// read keys two vectors at a time).
constexpr int64_t attention_padded(int64_t keys) { return (keys + 31) / 32 * 32; }
constexpr int64_t attention_row_block = 8;  // query rows the forward takes together
constexpr int64_t attention_scratch(int64_t keys, int64_t width) {
  return (width + attention_row_block) * attention_padded(keys);
}
// forward: out, and the softmax weights to `probs` (queries x keys, contiguous) unless it is null.
template <class T>
struct AttentionForward {
  const T *q, *k, *v;
  int64_t ld_q, ld_k, ld_v;
  T* out;
  int64_t ld_out;
  T* probs;
};
// backward: from the weights (contiguous rows) and dout, the gradients (null: not wanted; dk, dv zeroed).
template <class T>
struct AttentionBackward {
  const T *q, *k, *v, *probs, *dout;
  int64_t ld_q, ld_k, ld_v, ld_dout;
  T *dq, *dk, *dv;
  int64_t ld_dq, ld_dk, ld_dv;
};
template <class T>
using AttentionForwardKernel = void (*)(const AttentionPlane& plane, const AttentionForward<T>& io, T* scratch);
template <class T>
using AttentionBackwardKernel = void (*)(const AttentionPlane& plane, const AttentionBackward<T>& io, T* scratch);

// The cells of the recurrent layers (recurrent_impl.h, ops/recurrent.cpp); gates in PyTorch's order.
enum class RecurrentCell : uint8_t { RnnTanh, RnnRelu, Lstm, Gru, Count };
// Gates per unit (LSTM i, f, g, o; GRU r, z, n), and what the forward keeps per unit for the backward.
constexpr int64_t recurrent_gates(RecurrentCell cell) {
  return cell == RecurrentCell::Lstm ? 4 : cell == RecurrentCell::Gru ? 3 : 1;
}
constexpr int64_t recurrent_kept(RecurrentCell cell) {
  return cell == RecurrentCell::Lstm ? 5 : cell == RecurrentCell::Gru ? 4 : 0;
}
// One time step of `rows` rows of `hidden` units, every buffer rows of contiguous units: `hh`
// (recurrent_gates * hidden a row) = h W_hh^T; `bias` b_hh (null: none); `x` the projected input (as
// hh); `h`, `c` the previous state (c: LSTM); writes `h_out`, `c_out` (LSTM) and `keep`
// (recurrent_kept * hidden a row: LSTM i, f, g, o, tanh(c'); GRU r, z, n, h W_hn + b_hn; RNN none).
template <class T>
struct RecurrentStep {
  int64_t rows, hidden;
  const T *hh, *bias, *x, *h, *c;
  T *h_out, *c_out, *keep;
};
// The step's backward from the forward's buffers (`keep`, `h_out`, the previous `h` and `c`) and: `grad_h` (in: the
// part of h''s gradient that reached it directly from the next step, GRU's dh'' z, else zero; out: this step's direct
// part to h), `through` (the part through the next step's hidden product), `grad_h_out` / `grad_c_out` (the gradients
// of this step's outputs from the layer's outputs), `grad_c` (LSTM: in, the gradient of c' from the next step; out,
// that of c); writes `grad_x`, the gradient of the projected input, and for GRU `grad_hh`, that of h W_hh^T + b_hh (it
// differs in the n-part; the other cells' is grad_x).
template <class T>
struct RecurrentStepGrad {
  int64_t rows, hidden;
  const T *keep, *h_out, *h, *c, *through, *grad_h_out, *grad_c_out;
  T *grad_h, *grad_c, *grad_x, *grad_hh;
};
// forward: the step's gates with the elementwise kernels' own functions in the composition's order
// (nn/rnn.py: gates = (h W_hh^T + b_hh) + x, ...), so the states are the composed ops' bits.
template <class T>
using RecurrentForwardKernel = void (*)(const RecurrentStep<T>& step);
template <class T>
using RecurrentBackwardKernel = void (*)(const RecurrentStepGrad<T>& grad);

// Runs `iterations` steps of independent register-only FMA chains; returns the flops done (gemm_impl.h).
using FmaLoopKernel = double (*)(int64_t iterations);

template <class T>
struct TypedKernels {
  BinaryKernel<T> binary[static_cast<int>(VecBinary::Count)];
  FmaKernel<T> fused_multiply_add;
  UnaryKernel<T> unary[static_cast<int>(VecUnary::Count)];
  ActivationKernel<T> activation[static_cast<int>(Activation::Count)];
  ActivationGradKernel<T> activation_grad[static_cast<int>(Activation::Count)];
  SumKernel<T> sum;
  AccumulateKernel<T> accumulate;
  GemmKernel<T> gemm;
  GemmPackedBKernel<T> gemm_packed_b;
  GemmOffsetBKernel<T> gemm_offset_b;
  GemmOffsetAKernel<T> gemm_offset_a;
  TransposeKernel<T> transpose;
  GemmPackBKernel<T> gemm_pack_b;
  GemmBlocks gemm_blocks;
  FmaLoopKernel fma_loop;
  DepthwiseKernel<T> depthwise_forward, depthwise_grad_input, depthwise_grad_weight;
  AdamKernel<T> adam;
  SgdKernel<T> sgd;
  AdagradKernel<T> adagrad;
  CopyBlockKernel<T> copy_block;
  MaxPoolKernel<T> max_pool_columns;
  SumPoolKernel<T> sum_pool_columns;
  SpreadAverageKernel<T> spread_average;
  NormSumsKernel<T> norm_sums;
  NormColumnSumsKernel<T> norm_column_sums;
  NormAffineKernel<T> norm_affine;
  NormMomentsKernel<T> norm_moments;
  LayerNormForwardKernel<T> layer_norm_forward;
  LayerNormInputGradKernel<T> layer_norm_input_grad;
  LayerNormParamSumsKernel<T> layer_norm_param_sums;
  SoftmaxForwardKernel<T> softmax_forward;
  SoftmaxBackwardKernel<T> softmax_backward;
  RecurrentForwardKernel<T> recurrent_forward[static_cast<int>(RecurrentCell::Count)];
  RecurrentBackwardKernel<T> recurrent_backward[static_cast<int>(RecurrentCell::Count)];
  AttentionForwardKernel<T> attention_forward;
  AttentionBackwardKernel<T> attention_backward;
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
