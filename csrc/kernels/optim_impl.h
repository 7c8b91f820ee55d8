// The optimizers' fused updates, written once against simd.h and compiled once per ISA: one pass
// over a parameter and its state per step, instead of PyTorch's chain of in-place ops, that rounds
// each element as that chain does on PyTorch's vectorized CPU path (float32 and float64 alike):
// every op in the tensor's type, scalars first rounded to it, and a fused multiply-add exactly where
// PyTorch's kernels fuse: add(alpha=), lerp, and addcmul's final product-plus-self (measured
// against torch 2.13 over vector bodies and tails; addcdiv's division is never fused). The scalar
// ISA, whose fma() rounds twice, fuses with the C library's fma. The result of each step is the
// same on every ISA.
// One op differs from PyTorch's on purpose: its CPU sqrt is MKL's vsSqrt/vdSqrt (VML_HA), which is
// not correctly rounded (measured with torch 2.13 on an AMD EPYC: about 20% of float32 and 1% of
// float64 results one ulp off the nearest value); this sqrt is IEEE's. Given a correctly rounded
// sqrt, PyTorch's chain and these kernels agree bit for bit (tests/test_optim_fused.py).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include "kernels/kernel_table.h"
#include "kernels/simd.h"

namespace fg::simd::FG_ISA_NAMESPACE {

// a * b + c, rounded once on every ISA.
template <class T>
Vec<T> fused_multiply_add(Vec<T> a, Vec<T> b, Vec<T> c) {
#if defined(FG_ISA_SCALAR)
  return {std::fma(a.v, b.v, c.v)};
#else
  return fma(a, b, c);
#endif
}

// torch.optim.Adam's single-tensor update of the elements [i, i + kWidth) (see AdamStep).
template <class T>
void adam_vector(const AdamStep<T>& s, T* param, const T* grad, T* exp_avg, T* exp_avg_sq, T* max_exp_avg_sq) {
  using V = Vec<T>;
  V p = V::load(param), g = V::load(grad);
  if (s.maximize) g = neg(g);
  if (s.decay != T(1)) p = p * V::broadcast(s.decay);  // AdamW: param.mul_(1 - lr * weight_decay)
  if (s.l2) g = fused_multiply_add(p, V::broadcast(s.weight_decay), g);  // grad.add(param, alpha=weight_decay)
  // exp_avg.lerp_(grad, weight): ATen's lerp computes from the end nearer to the weight.
  V m = V::load(exp_avg);
  const bool small = std::fabs(s.lerp_weight) < T(0.5);
  m = fused_multiply_add(V::broadcast(small ? s.lerp_weight : s.lerp_weight - T(1)), g - m, small ? m : g);
  m.store(exp_avg);
  // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2): (value * grad) * grad + self, fused.
  V v = V::load(exp_avg_sq) * V::broadcast(s.beta2);
  v = fused_multiply_add(V::broadcast(s.one_minus_beta2) * g, g, v);
  v.store(exp_avg_sq);
  if (s.amsgrad) {  // torch.maximum(max_exp_avg_sq, exp_avg_sq): NaN wins (the vector max gives v when either is)
    V old = V::load(max_exp_avg_sq);
    v = select(ne(old, old), old, max(old, v));
    v.store(max_exp_avg_sq);
  }
  // denom = (v.sqrt() / bias_correction2_sqrt).add_(eps); param.addcdiv_(exp_avg, denom, value=-step_size)
  V denom = sqrt(v) / V::broadcast(s.bias_correction2_sqrt) + V::broadcast(s.eps);
  p = p + V::broadcast(s.neg_step_size) * m / denom;
  p.store(param);
}

// update(pointers...) on each vector of elements of the arrays (nullptr: an array not in use),
// the last partial vector through zero-padded copies (their padding lanes compute values nobody
// stores). Array 1 is the gradient, read only.
template <class T, class Update, class... Arrays, size_t... K>
void run_update_indexed(int64_t n, Update update, std::index_sequence<K...>, Arrays... arrays) {
  constexpr int W = Vec<T>::kWidth;
  int64_t i = 0;
  for (; i + W <= n; i += W) update((arrays ? arrays + i : nullptr)...);
  if (i == n) return;
  T tail[sizeof...(Arrays)][W] = {};
  ((arrays ? std::copy(arrays + i, arrays + n, tail[K]) : nullptr), ...);
  update((arrays ? tail[K] : nullptr)...);
  const int64_t rest = n - i;
  ((K != 1 && arrays ? std::copy(tail[K], tail[K] + rest, const_cast<T*>(arrays) + i) : nullptr), ...);
}
template <class T, class Update, class... Arrays>
void run_update(int64_t n, Update update, Arrays... arrays) {
  run_update_indexed<T>(n, update, std::index_sequence_for<Arrays...>{}, arrays...);
}

template <class T>
void adam_kernel(const AdamStep<T>& s, T* param, const T* grad, T* exp_avg, T* exp_avg_sq, T* max_exp_avg_sq,
                 int64_t n) {
  run_update<T>(
      n, [&](T* p, const T* g, T* m, T* v, T* mv) { adam_vector(s, p, g, m, v, mv); }, param, grad, exp_avg, exp_avg_sq,
      s.amsgrad ? max_exp_avg_sq : nullptr);
}

// torch.optim.SGD's single-tensor update of kWidth elements.
template <class T>
void sgd_vector(const SgdStep<T>& s, T* param, const T* grad, T* momentum_buffer) {
  using V = Vec<T>;
  V p = V::load(param), g = V::load(grad);
  if (s.maximize) g = neg(g);
  if (s.l2) g = fused_multiply_add(p, V::broadcast(s.weight_decay), g);  // grad.add(param, alpha=weight_decay)
  if (s.with_momentum) {
    // the first step: buf = grad.clone(); then buf.mul_(momentum).add_(grad, alpha=1 - dampening)
    V buf = s.first_step ? g
                         : fused_multiply_add(g, V::broadcast(s.one_minus_dampening),
                                              V::load(momentum_buffer) * V::broadcast(s.momentum));
    buf.store(momentum_buffer);
    // nesterov: grad.add(buf, alpha=momentum); else the buffer itself
    g = s.nesterov ? fused_multiply_add(buf, V::broadcast(s.momentum), g) : buf;
  }
  fused_multiply_add(g, V::broadcast(s.neg_lr), p).store(param);  // param.add_(grad, alpha=-lr)
}

template <class T>
void sgd_kernel(const SgdStep<T>& s, T* param, const T* grad, T* momentum_buffer, int64_t n) {
  run_update<T>(
      n, [&](T* p, const T* g, T* buf) { sgd_vector(s, p, g, buf); }, param, grad,
      s.with_momentum ? momentum_buffer : nullptr);
}

// torch.optim.Adagrad's single-tensor update of kWidth elements.
template <class T>
void adagrad_vector(const AdagradStep<T>& s, T* param, const T* grad, T* sum) {
  using V = Vec<T>;
  V p = V::load(param), g = V::load(grad);
  if (s.maximize) g = neg(g);
  if (s.l2) g = fused_multiply_add(p, V::broadcast(s.weight_decay), g);
  // sum.addcmul_(grad, grad, value=1); std = sum.sqrt().add_(eps); param.addcdiv_(grad, std, value=-lr)
  // (value 1: the first product, 1 * grad, is exact)
  V total = fused_multiply_add(g, g, V::load(sum));
  total.store(sum);
  V root = sqrt(total) + V::broadcast(s.eps);
  (p + V::broadcast(s.neg_lr) * g / root).store(param);
}

template <class T>
void adagrad_kernel(const AdagradStep<T>& s, T* param, const T* grad, T* sum, int64_t n) {
  run_update<T>(n, [&](T* p, const T* g, T* total) { adagrad_vector(s, p, g, total); }, param, grad, sum);
}

template <class T>
void fill_optim(TypedKernels<T>& k) {
  k.adam = adam_kernel<T>;
  k.sgd = sgd_kernel<T>;
  k.adagrad = adagrad_kernel<T>;
}

}  // namespace fg::simd::FG_ISA_NAMESPACE
