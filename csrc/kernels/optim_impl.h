// The optimizers' fused updates, written once against simd.h and compiled once per ISA: one pass
// over a parameter and its state per step, instead of PyTorch's chain of in-place ops, that rounds
// each element as that chain does on PyTorch's vectorized CPU path (float32 and float64 alike):
// every op in the tensor's type, scalars first rounded to it, and a fused multiply-add exactly where
// PyTorch's kernels fuse: add(alpha=), lerp, and addcmul's final product-plus-self (measured
// against torch 2.13 over vector bodies and tails; addcdiv's division is never fused). The scalar
// ISA, whose fma() rounds twice, fuses with the C library's fma. The result of each step is the
// same on every ISA.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

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

// The last partial vector goes through zero-padded buffers (the padding lanes compute values
// nobody stores).
template <class T>
void adam_kernel(const AdamStep<T>& s, T* param, const T* grad, T* exp_avg, T* exp_avg_sq, T* max_exp_avg_sq,
                 int64_t n) {
  constexpr int W = Vec<T>::kWidth;
  int64_t i = 0;
  for (; i + W <= n; i += W)
    adam_vector(s, param + i, grad + i, exp_avg + i, exp_avg_sq + i, s.amsgrad ? max_exp_avg_sq + i : nullptr);
  if (i == n) return;
  T p[W] = {}, g[W] = {}, m[W] = {}, v[W] = {}, mv[W] = {};
  std::copy(param + i, param + n, p);
  std::copy(grad + i, grad + n, g);
  std::copy(exp_avg + i, exp_avg + n, m);
  std::copy(exp_avg_sq + i, exp_avg_sq + n, v);
  if (s.amsgrad) std::copy(max_exp_avg_sq + i, max_exp_avg_sq + n, mv);
  adam_vector(s, p, g, m, v, mv);
  const int64_t rest = n - i;
  std::copy(p, p + rest, param + i);
  std::copy(m, m + rest, exp_avg + i);
  std::copy(v, v + rest, exp_avg_sq + i);
  if (s.amsgrad) std::copy(mv, mv + rest, max_exp_avg_sq + i);
}

template <class T>
void fill_optim(TypedKernels<T>& k) {
  k.adam = adam_kernel<T>;
}

}  // namespace fg::simd::FG_ISA_NAMESPACE
