// Batch and group normalization as fused passes over the input seen as (N, C, S), S the product of
// its spatial dims (PyTorch's native_batch_norm and native_group_norm, one node each:
// NativeBatchNormBackward0, NativeGroupNormBackward0).
//
// Forward: one pass for the statistics of each unit (a channel for batch norm, an (n, group) block
// for group norm), summing x - shift and its square with the unit's first element as the shift
// (the shifted-data variance: no cancellation when the mean is large against the spread); then one
// pass for the normalization and the affine together, y = x * scale + shift per (n, c) plane.
// Backward: one pass for the sums of dy and dy * (x - mean) per unit (batch norm) or per plane
// (group norm), then one pass for grad_input = k1 * dy + k2 * (x - mean) + k3, PyTorch's formulas
// with the saved mean and 1 / std. In a backward with create_graph the gradients are composed of
// tensor ops instead (the same formulas), so gradients of any order follow.
//
// The passes over the contiguous runs are the per-ISA kernels of csrc/kernels/norm_impl.h (sums in
// kNormLanes lanes, blocks in the input's type and the blocks in double; the same order on every
// ISA). Every sum runs in one thread in an order fixed by the shape alone, so the results do not
// depend on the thread count either; threads split units, rows, channels or samples.
// The argument checks with PyTorch's messages are in the shared Python layer (nn/functional.py);
// the checks here only keep direct calls from reading out of bounds.
#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "autograd/node.h"
#include "kernels/kernel_table.h"
#include "kernels/thread_pool.h"
#include "ops/ops.h"

namespace fg {

namespace {

// The input seen as (n, c, s).
struct Planes {
  int64_t n = 0, c = 1, s = 1;
  explicit Planes(const Shape& shape) {
    n = shape[0];
    c = shape.size() > 1 ? shape[1] : 1;
    for (size_t d = 2; d < shape.size(); ++d) s *= shape[d];
  }
};

// Rows (or units) per thread: at least kParallelElements elements each.
int64_t grain_for(int64_t elements_each) {
  return std::max<int64_t>(1, kParallelElements / std::max<int64_t>(1, elements_each));
}

// The two sums of a pass over the elements i of a unit u: of a = p[i] - s1[u] and of a * (q[i] -
// s2[u]). The statistics: p = q = x, s1 = s2 = the unit's shift; the backward: p = dy, s1 = 0,
// q = x, s2 = the unit's mean.
template <class T>
struct SumTerms {
  const T *p, *s1, *q, *s2;
};

// The sums of unit u's terms over `rows` runs of `len` elements, the first at `begin` and each
// `row_stride` after the last: the kernel's lanes (norm_impl.h), added in lane order at the end.
template <class T>
std::pair<double, double> unit_sums(const SumTerms<T>& t, int64_t u, int64_t begin, int64_t rows, int64_t len,
                                    int64_t row_stride) {
  const auto sums = kernels().of<T>().norm_sums;
  double first[kNormLanes] = {}, second[kNormLanes] = {};
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t at = begin + r * row_stride;
    sums(t.p + at, t.s1[u], t.q + at, t.s2[u], len, first, second);
  }
  double a = 0, b = 0;
  for (int l = 0; l < kNormLanes; ++l) a += first[l], b += second[l];
  return {a, b};
}

// Per channel c: the sums of the terms over its N * S elements (unit c).
template <class T>
void per_channel_sums(const Planes& p, const SumTerms<T>& t, double* first, double* second) {
  if (p.s == 1) {  // (N, C): each row's channels side by side, one chain per channel; threads split the channels
    const auto column_sums = kernels().of<T>().norm_column_sums;
    std::fill(first, first + p.c, 0.0);
    std::fill(second, second + p.c, 0.0);
    parallel_for(0, p.c, grain_for(p.n), [&](int64_t lo, int64_t hi) {
      for (int64_t n = 0; n < p.n; ++n) {
        const int64_t at = n * p.c + lo;
        column_sums(t.p + at, t.s1 + lo, t.q + at, t.s2 + lo, hi - lo, first + lo, second + lo);
      }
    });
    return;
  }
  parallel_for(0, p.c, grain_for(p.n * p.s), [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) std::tie(first[c], second[c]) = unit_sums(t, c, c * p.s, p.n, p.s, p.c * p.s);
  });
}

// Per row r of `rows` contiguous rows of `len` elements: the sums of the terms of unit
// r / rows_per_unit over the row.
template <class T>
void per_row_sums(int64_t rows, int64_t len, int64_t rows_per_unit, const SumTerms<T>& t, double* first,
                  double* second) {
  parallel_for(0, rows, grain_for(len), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r)
      std::tie(first[r], second[r]) = unit_sums(t, r / rows_per_unit, r * len, 1, len, 0);
  });
}

// The coefficients of plane_affine, each per (n, c) plane at index n * stride_n + c (stride_n 0:
// per channel, C: per sample and channel).
template <class T>
struct PlaneCoefficients {
  const T *k1, *k2, *center, *k3;
  int64_t stride_n;
};

// out = k1 * u + k2 * (v - center) + k3 elementwise; v may be null (then no k2 term: the forward's
// x * scale + shift). The centred form is PyTorch's backward's: (x - mean) before the product.
// One kernel call per plane (the coefficients broadcast), or per sample when S = 1 (a coefficient
// per element).
template <class T>
void plane_affine(const Planes& p, const PlaneCoefficients<T>& k, const T* u, const T* v, T* out) {
  const auto affine = kernels().of<T>().norm_affine;
  parallel_for(0, p.n, grain_for(p.c * p.s), [&](int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; ++n) {
      const int64_t at = n * k.stride_n;
      const NormAffine<T> row{k.k1 + at, v ? k.k2 + at : nullptr, v ? k.center + at : nullptr, k.k3 + at, p.s == 1};
      if (p.s == 1) {
        const int64_t first = n * p.c;
        affine(row, u + first, v ? v + first : nullptr, out + first, p.c);
        continue;
      }
      for (int64_t c = 0; c < p.c; ++c) {
        const int64_t plane = (n * p.c + c) * p.s;
        const NormAffine<T> coefficients{row.k1 + c, v ? row.k2 + c : nullptr, v ? row.center + c : nullptr, row.k3 + c,
                                         false};
        affine(coefficients, u + plane, v ? v + plane : nullptr, out + plane, p.s);
      }
    }
  });
}

// The mean and 1 / sqrt(var + eps) of each unit, from the sums of x - shift and its square over
// `count` elements; the biased variance in `var` (when given).
template <class T>
void finish_moments(int64_t units, int64_t count, const T* shift, const double* sum, const double* squares, double eps,
                    double* mean, double* invstd, double* var) {
  for (int64_t u = 0; u < units; ++u) {
    const double m = sum[u] / double(count);
    const double v = std::max(0.0, squares[u] / double(count) - m * m);
    mean[u] = double(shift[u]) + m;
    invstd[u] = 1.0 / std::sqrt(v + eps);
    if (var) var[u] = v;
  }
}

template <class T>
Tensor vector_of(const std::vector<double>& values, DType dtype) {
  Tensor t = empty({static_cast<int64_t>(values.size())}, dtype);
  std::copy(values.begin(), values.end(), t->data_as<T>());
  return t;
}

template <class T>
std::vector<double> values_of(const Tensor& t) {  // t contiguous
  const T* data = t->data_as<T>();
  return std::vector<double>(data, data + t->numel());
}

// running = (1 - momentum) * running + momentum * batch, computed in double and written in place.
template <class T>
void update_running(const Tensor& running, const std::vector<double>& batch, double momentum) {
  Tensor current = dense(running);
  const T* old = current->data_as<T>();
  std::vector<double> updated(batch.size());
  for (size_t c = 0; c < batch.size(); ++c) updated[c] = (1 - momentum) * double(old[c]) + momentum * batch[c];
  copy_values(running, vector_of<T>(updated, running->dtype));
  running->bump_version();
}

struct NormNode : Node {
  double eps = 0;
  bool training = true;
  int64_t groups = 1;  // group norm's
};

Tensor reshaped_as_planes(const Tensor& t, const Planes& p) { return reshape(t, {p.n, p.c, p.s}); }

// rstd * (g - mean(g) - xhat * mean(g * xhat)) over `dims`: the input's gradient of a normalization
// for the gradient g of its normalized value xhat, as tensor ops (for create_graph).
Tensor projected_gradient(const Tensor& g, const Tensor& xhat, const Tensor& rstd, const std::vector<int64_t>& dims) {
  Tensor centred = sub(g, mean(g, dims, true));
  return mul(rstd, sub(centred, mul(xhat, mean(mul(g, xhat), dims, true))));
}

// xhat and rstd of x over `dims`, as tensor ops.
std::pair<Tensor, Tensor> normalized_composed(const Tensor& x, const std::vector<int64_t>& dims, double eps) {
  Tensor centred = sub(x, mean(x, dims, true));
  Tensor rstd = rsqrt(add(mean(mul(centred, centred), dims, true), Scalar::from_float(eps)));
  return {mul(centred, rstd), rstd};
}

// The weight's and bias's gradients per channel of xhat * weight + bias, as tensor ops ((N, C, S) views).
void affine_gradients_composed(const Node& node, const Tensor& g, const Tensor& xhat, GradList& out) {
  if (node.needs_input_grad(1)) out[1] = sum(mul(g, xhat), {0, 2}, false);
  if (node.needs_input_grad(2)) out[2] = sum(g, {0, 2}, false);
}

}  // namespace

// ---- batch norm. Saves the input, the weight, and the mean and 1 / sqrt(var + eps) per channel
// (the batch's in training, the running stats' otherwise), in the input's dtype.
FG_NODE_FROM(NativeBatchNormBackward0, NormNode);

GradList NativeBatchNormBackward0::apply(GradList&& grads) {
  Tensor input = unpack(0), weight = saved[1].defined() ? unpack(1) : Tensor();
  Tensor saved_mean = unpack(2), saved_invstd = unpack(3);
  const Planes p(input->shape);
  GradList out(3);
  if (grad_enabled()) {  // create_graph: the same formulas as tensor ops, the batch's statistics recomputed from the
                         // input
    Tensor x = reshaped_as_planes(input, p), g = reshaped_as_planes(grads[0], p);
    Tensor xhat, rstd;
    if (training) {
      std::tie(xhat, rstd) = normalized_composed(x, {0, 2}, eps);
    } else {
      rstd = reshape(saved_invstd, {1, p.c, 1});
      xhat = mul(sub(x, reshape(saved_mean, {1, p.c, 1})), rstd);
    }
    Tensor scaled = weight ? mul(g, reshape(weight, {1, p.c, 1})) : g;
    if (needs_input_grad(0))
      out[0] = reshape(training ? projected_gradient(scaled, xhat, rstd, {0, 2}) : mul(scaled, rstd), input->shape);
    affine_gradients_composed(*this, g, xhat, out);
    return out;
  }
  Tensor x = dense(input), dy = dense(grads[0]);
  dispatch_floating(input->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *xs = x->data_as<T>(), *g = dy->data_as<T>();
    const std::vector<double> mean = values_of<T>(saved_mean), invstd = values_of<T>(saved_invstd);
    const T* centre = saved_mean->data_as<T>();  // the mean as the sums' terms use it
    std::vector<double> sum_dy(p.c), sum_dy_xmu(p.c);
    const std::vector<T> no_shift(p.c, T(0));
    per_channel_sums<T>(p, {g, no_shift.data(), xs, centre}, sum_dy.data(), sum_dy_xmu.data());
    const Tensor w_dense = weight ? dense(weight) : Tensor();  // alive while w is read
    const T* w = weight ? w_dense->data_as<T>() : nullptr;
    if (needs_input_grad(0)) {
      // training: (dy - (x - mean) * invstd^2 * sum(dy (x - mean)) / M - sum(dy) / M) * invstd * w;
      // evaluation: dy * invstd * w.
      const double count = double(p.n * p.s);
      std::vector<T> k1(p.c), k2(p.c), center(p.c), k3(p.c);
      for (int64_t c = 0; c < p.c; ++c) {
        const double scale = invstd[c] * (w ? double(w[c]) : 1.0);
        const double projection = training ? sum_dy_xmu[c] / count * invstd[c] * invstd[c] : 0.0;
        const double grad_mean = training ? sum_dy[c] / count : 0.0;
        k1[c] = T(scale), k2[c] = T(-projection * scale), center[c] = T(mean[c]), k3[c] = T(-grad_mean * scale);
      }
      out[0] = empty(input->shape, input->dtype);
      plane_affine<T>(p, {k1.data(), k2.data(), center.data(), k3.data(), 0}, g, training ? xs : nullptr,
                      out[0]->data_as<T>());
    }
    if (needs_input_grad(1)) {
      std::vector<double> grad_weight(p.c);
      for (int64_t c = 0; c < p.c; ++c) grad_weight[c] = sum_dy_xmu[c] * invstd[c];
      out[1] = vector_of<T>(grad_weight, input->dtype);
    }
    if (needs_input_grad(2)) out[2] = vector_of<T>(sum_dy, input->dtype);
  });
  return out;
}

Tensor batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, double momentum, double eps) {
  if (input->dim() < 2) throw RuntimeError("batch_norm: expected an input of at least 2 dims (N, C, *)");
  if (input->dtype != DType::Float32 && input->dtype != DType::Float64)
    throw not_implemented_for("batch_norm", input->dtype);
  const Planes p(input->shape);
  for (const Tensor* t : {&weight, &bias, &running_mean, &running_var})
    if (*t && ((*t)->dtype != input->dtype || (*t)->numel() != p.c))
      throw RuntimeError(
          "batch_norm: weight, bias and running stats must have the input's dtype and one value per channel");
  if (!training && (!running_mean || !running_var))
    throw RuntimeError("batch_norm: evaluation needs running_mean and running_var");
  const int64_t count = p.n * p.s;
  Tensor x = dense(input), out = empty(input->shape, input->dtype), saved_mean, saved_invstd;
  dispatch_floating(input->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* xs = x->data_as<T>();
    std::vector<double> mean(p.c), invstd(p.c);
    if (training) {
      std::vector<T> shift(p.c, T(0));
      std::vector<double> sum(p.c), squares(p.c), var(p.c);
      if (count > 0)
        for (int64_t c = 0; c < p.c; ++c) shift[c] = xs[c * p.s];
      per_channel_sums<T>(p, {xs, shift.data(), xs, shift.data()}, sum.data(), squares.data());
      finish_moments(p.c, std::max<int64_t>(count, 1), shift.data(), sum.data(), squares.data(), eps, mean.data(),
                     invstd.data(), var.data());
      if (count > 0) {  // an empty batch leaves the running stats as they are, as PyTorch's
        if (running_mean) update_running<T>(running_mean, mean, momentum);
        if (running_var) {
          for (double& v : var) v *= double(count) / double(count - 1);  // the unbiased variance
          update_running<T>(running_var, var, momentum);
        }
      }
    } else {
      mean = values_of<T>(dense(running_mean));
      const std::vector<double> var = values_of<T>(dense(running_var));
      for (int64_t c = 0; c < p.c; ++c) invstd[c] = 1.0 / std::sqrt(var[c] + eps);
    }
    // y = x * scale + shift, scale = invstd * w, shift = b - mean * scale
    const Tensor w_dense = weight ? dense(weight) : Tensor();  // alive while w is read
    const T* w = weight ? w_dense->data_as<T>() : nullptr;
    const Tensor b_dense = bias ? dense(bias) : Tensor();
    const T* b = bias ? b_dense->data_as<T>() : nullptr;
    std::vector<T> scale(p.c), offset(p.c);
    for (int64_t c = 0; c < p.c; ++c) {
      const double sc = invstd[c] * (w ? double(w[c]) : 1.0);
      scale[c] = T(sc), offset[c] = T((b ? double(b[c]) : 0.0) - mean[c] * sc);
    }
    plane_affine<T>(p, {scale.data(), nullptr, nullptr, offset.data(), 0}, xs, nullptr, out->data_as<T>());
    saved_mean = vector_of<T>(mean, input->dtype), saved_invstd = vector_of<T>(invstd, input->dtype);
  });
  if (auto* node = record<NativeBatchNormBackward0>(out, {&input, &weight, &bias})) {
    node->save(input);
    node->save(weight);
    node->save(saved_mean);
    node->save(saved_invstd);
    node->eps = eps, node->training = training;
  }
  return out;
}

// ---- group norm: statistics per (n, group) over its C / G * S elements, contiguous; the affine per
// channel. Saves the input, the weight, and the mean and 1 / sqrt(var + eps) per (n, group).
FG_NODE_FROM(NativeGroupNormBackward0, NormNode);

GradList NativeGroupNormBackward0::apply(GradList&& grads) {
  Tensor input = unpack(0), weight = saved[1].defined() ? unpack(1) : Tensor();
  Tensor saved_mean = unpack(2), saved_invstd = unpack(3);
  const Planes p(input->shape);
  const int64_t units = p.c == 0 ? 0 : p.n * groups, per_group = p.c / groups, group_size = per_group * p.s;
  GradList out(3);
  if (grad_enabled()) {  // create_graph: the same formulas as tensor ops
    Tensor xg = reshape(input, {p.n, groups, group_size}), g = reshaped_as_planes(grads[0], p);
    auto [xhat_g, rstd] = normalized_composed(xg, {2}, eps);
    Tensor scaled = weight ? mul(g, reshape(weight, {1, p.c, 1})) : g;
    if (needs_input_grad(0))
      out[0] = reshape(projected_gradient(reshape(scaled, {p.n, groups, group_size}), xhat_g, rstd, {2}), input->shape);
    affine_gradients_composed(*this, g, reshaped_as_planes(xhat_g, p), out);
    return out;
  }
  Tensor x = dense(input), dy = dense(grads[0]);
  dispatch_floating(input->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *xs = x->data_as<T>(), *g = dy->data_as<T>();
    const std::vector<double> mean = values_of<T>(saved_mean), invstd = values_of<T>(saved_invstd);
    const T* centre = saved_mean->data_as<T>();  // the mean as the sums' terms use it
    // Per (n, c) plane: the sums of dy and dy * (x - mean of its group).
    std::vector<double> sum_dy(p.n * p.c), sum_dy_xmu(p.n * p.c);
    const std::vector<T> no_shift(units, T(0));
    per_row_sums<T>(p.n * p.c, p.s, per_group, {g, no_shift.data(), xs, centre}, sum_dy.data(), sum_dy_xmu.data());
    const Tensor w_dense = weight ? dense(weight) : Tensor();  // alive while w is read
    const T* w = weight ? w_dense->data_as<T>() : nullptr;
    if (needs_input_grad(0)) {
      // Per (n, group), with dy scaled by the weight: grad_input = (w dy - (x - mean) * invstd^2 *
      // sum(w dy (x - mean)) / D - sum(w dy) / D) * invstd, D = C / G * S.
      std::vector<T> k1(p.n * p.c), k2(p.n * p.c), center(p.n * p.c), k3(p.n * p.c);
      for (int64_t unit = 0; unit < units; ++unit) {
        double weighted_dy = 0, weighted_dy_xmu = 0;
        for (int64_t plane = unit * per_group; plane < (unit + 1) * per_group; ++plane) {
          const double wc = w ? double(w[plane % p.c]) : 1.0;
          weighted_dy += wc * sum_dy[plane], weighted_dy_xmu += wc * sum_dy_xmu[plane];
        }
        const double projection = weighted_dy_xmu / double(group_size) * invstd[unit] * invstd[unit];
        const double grad_mean = weighted_dy / double(group_size);
        for (int64_t plane = unit * per_group; plane < (unit + 1) * per_group; ++plane) {
          k1[plane] = T((w ? double(w[plane % p.c]) : 1.0) * invstd[unit]);
          k2[plane] = T(-projection * invstd[unit]), center[plane] = T(mean[unit]);
          k3[plane] = T(-grad_mean * invstd[unit]);
        }
      }
      out[0] = empty(input->shape, input->dtype);
      plane_affine<T>(p, {k1.data(), k2.data(), center.data(), k3.data(), p.c}, g, xs, out[0]->data_as<T>());
    }
    // grad_weight[c] = sum over n of sum(dy (x - mean)) * invstd; grad_bias[c] = sum of dy; in sample order.
    std::vector<double> grad_weight(p.c, 0.0), grad_bias(p.c, 0.0);
    for (int64_t n = 0; n < p.n; ++n)
      for (int64_t c = 0; c < p.c; ++c) {
        grad_weight[c] += sum_dy_xmu[n * p.c + c] * invstd[n * groups + c / per_group];
        grad_bias[c] += sum_dy[n * p.c + c];
      }
    if (needs_input_grad(1)) out[1] = vector_of<T>(grad_weight, input->dtype);
    if (needs_input_grad(2)) out[2] = vector_of<T>(grad_bias, input->dtype);
  });
  return out;
}

Tensor group_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t groups, double eps) {
  if (input->dim() < 2) throw RuntimeError("group_norm: expected an input of at least 2 dims (N, C, *)");
  if (input->dtype != DType::Float32 && input->dtype != DType::Float64)
    throw not_implemented_for("GroupNormKernelImpl", input->dtype);
  const Planes p(input->shape);
  if (groups < 1 || p.c % groups != 0) throw RuntimeError("group_norm: the channels must split into groups");
  for (const Tensor* t : {&weight, &bias})
    if (*t && ((*t)->dtype != input->dtype || (*t)->numel() != p.c))
      throw RuntimeError("group_norm: weight and bias must have the input's dtype and one value per channel");
  // Without channels there are no groups to normalize (and `groups` may be any size).
  const int64_t units = p.c == 0 ? 0 : p.n * groups, per_group = p.c / groups, group_size = per_group * p.s;
  Tensor x = dense(input), out = empty(input->shape, input->dtype), saved_mean, saved_invstd;
  dispatch_floating(input->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* xs = x->data_as<T>();
    std::vector<T> shift(units, T(0));
    std::vector<double> sum(units), squares(units), mean(units), invstd(units);
    if (group_size > 0)
      for (int64_t u = 0; u < units; ++u) shift[u] = xs[u * group_size];
    per_row_sums<T>(units, group_size, 1, {xs, shift.data(), xs, shift.data()}, sum.data(), squares.data());
    finish_moments(units, std::max<int64_t>(group_size, 1), shift.data(), sum.data(), squares.data(), eps, mean.data(),
                   invstd.data(), nullptr);
    // y = x * scale + shift per (n, c): scale = invstd[n, g] * w[c], shift = b[c] - mean[n, g] * scale
    const Tensor w_dense = weight ? dense(weight) : Tensor();  // alive while w is read
    const T* w = weight ? w_dense->data_as<T>() : nullptr;
    const Tensor b_dense = bias ? dense(bias) : Tensor();
    const T* b = bias ? b_dense->data_as<T>() : nullptr;
    std::vector<T> scale(p.n * p.c), offset(p.n * p.c);
    for (int64_t plane = 0; plane < p.n * p.c; ++plane) {
      const int64_t c = plane % p.c, unit = plane / per_group;
      const double sc = invstd[unit] * (w ? double(w[c]) : 1.0);
      scale[plane] = T(sc), offset[plane] = T((b ? double(b[c]) : 0.0) - mean[unit] * sc);
    }
    plane_affine<T>(p, {scale.data(), nullptr, nullptr, offset.data(), p.c}, xs, nullptr, out->data_as<T>());
    saved_mean = vector_of<T>(mean, input->dtype), saved_invstd = vector_of<T>(invstd, input->dtype);
  });
  if (auto* node = record<NativeGroupNormBackward0>(out, {&input, &weight, &bias})) {
    node->save(input);
    node->save(weight);
    node->save(saved_mean);
    node->save(saved_invstd);
    node->eps = eps, node->groups = groups;
  }
  return out;
}

}  // namespace fg
