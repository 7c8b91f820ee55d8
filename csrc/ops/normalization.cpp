// Batch and group normalization as fused passes over the input seen as (N, C, S), S the product of
// its spatial dims (PyTorch's native_batch_norm and native_group_norm, one node each:
// NativeBatchNormBackward0, NativeGroupNormBackward0); layer normalization over rows of the
// trailing dims (native_layer_norm, NativeLayerNormBackward0), at the end of the file.
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
#include <array>
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
// `row_stride` after the last: the kernel's lanes (norm_impl.h), totalled by lane_total.
template <class T>
std::pair<double, double> unit_sums(const SumTerms<T>& t, int64_t u, int64_t begin, int64_t rows, int64_t len,
                                    int64_t row_stride) {
  const auto sums = kernels().of<T>().norm_sums;
  double first[kNormLanes] = {}, second[kNormLanes] = {};
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t at = begin + r * row_stride;
    sums(t.p + at, t.s1[u], t.q + at, t.s2[u], len, first, second);
  }
  return {lane_total(first), lane_total(second)};
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
      kernels().of<T>().norm_moments(p.c, std::max<int64_t>(count, 1), shift.data(), sum.data(), squares.data(), eps,
                                     mean.data(), invstd.data(), var.data());
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
    kernels().of<T>().norm_moments(units, std::max<int64_t>(group_size, 1), shift.data(), sum.data(), squares.data(),
                                   eps, mean.data(), invstd.data(), nullptr);
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

// ---- layer norm: statistics per row of the trailing `normalized_dims` dims (D contiguous elements:
// group norm's passes with one group), the affine per element of the row. float16 and bfloat16 are
// computed in float32 (PyTorch's accumulate type) and rounded once. Saves the input, the weight, and
// the mean and 1 / std per row in the compute type, shaped as PyTorch's (the leading dims, then ones).
// Forward: one pass per row (its statistics, then its output while the row is in cache; norm_impl.h
// takes rows in groups whose statistics are finished side by side). The backward is one pass per row
// for its two sums and the input gradient, PyTorch's formula
// rstd * (w dy - mean(w dy) - xhat * mean(w dy xhat)), and one pass for the weight's and bias's
// gradients with threads splitting the columns (each column's sum in blocks of rows counted from the
// first, in row order: no bit depends on the thread count). It is an
// op of its own (PyTorch's native_layer_norm_backward), recorded in a backward with create_graph as
// NativeLayerNormBackwardBackward0: one node for the three gradients, so each has a graph wherever
// any of grad, input and weight has one, as PyTorch's; its backward is composed of tensor ops.
namespace {

struct LayerNormNode : Node {
  double eps = 0;
  int64_t normalized_dims = 0;
};

struct LayerNormDoubleNode : LayerNormNode {
  uint32_t num_outputs() const override { return 3; }  // grad_input, grad_weight, grad_bias
};

// The number of rows and their length D for the trailing `normalized_dims` dims of `shape`.
std::pair<int64_t, int64_t> layer_norm_rows(const Shape& shape, int64_t normalized_dims) {
  const size_t leading = shape.size() - size_t(normalized_dims);
  int64_t rows = 1, len = 1;
  for (size_t d = 0; d < shape.size(); ++d) (d < leading ? rows : len) *= shape[d];
  return {rows, len};
}

std::vector<int64_t> trailing_dims(int64_t count) {
  std::vector<int64_t> dims;
  for (int64_t d = -count; d < 0; ++d) dims.push_back(d);
  return dims;
}

// t summed over its dims before the trailing `normalized_dims` (a weight's or bias's gradient), as ops.
Tensor sum_over_rows(const Tensor& t, int64_t normalized_dims) {
  std::vector<int64_t> leading;
  for (int64_t d = 0; d < t->dim() - normalized_dims; ++d) leading.push_back(d);
  return leading.empty() ? t : sum(t, leading, false);
}

// An optional tensor's values, contiguous, in `type` (undefined stays undefined).
Tensor dense_in(const Tensor& t, DType type) { return t ? cast_values(dense(t), type) : Tensor(); }

template <class T>
const T* data_or_null(const Tensor& t) {
  return t ? t->data_as<T>() : nullptr;
}

DType layer_norm_type(const Tensor& input) {
  const DType type = compute_type(input->dtype);
  if (type != DType::Float32 && type != DType::Float64) throw not_implemented_for("LayerNormKernelImpl", input->dtype);
  return type;
}

// The gradients of layer_norm(input, weight, bias) for `grad`, where `wanted` (undefined
// otherwise), from the forward's saved mean and rstd (in the compute type); recorded as one node
// (see above) when any of grad, input and weight requires grad in grad mode.
std::array<Tensor, 3> layer_norm_backward(const Tensor& grad, const Tensor& input, const Tensor& weight,
                                          const Tensor& saved_mean, const Tensor& saved_rstd, int64_t normalized_dims,
                                          double eps, const std::array<bool, 3>& wanted);

}  // namespace

FG_NODE_FROM(NativeLayerNormBackward0, LayerNormNode);

GradList NativeLayerNormBackward0::apply(GradList&& grads) {
  const Tensor input = unpack(0), weight = saved[1].defined() ? unpack(1) : Tensor();
  const auto [grad_input, grad_weight, grad_bias] =
      layer_norm_backward(grads[0], input, weight, unpack(2), unpack(3), normalized_dims, eps,
                          {needs_input_grad(0), needs_input_grad(1), needs_input_grad(2)});
  GradList out(3);
  out[0] = grad_input, out[1] = grad_weight, out[2] = grad_bias;
  return out;
}

// Saves grad, input and weight; edges to the three. The gradients of the gradients, composed of tensor
// ops with xhat and rstd recomputed from the input (an output whose gradient is undefined adds nothing).
FG_NODE_FROM(NativeLayerNormBackwardBackward0, LayerNormDoubleNode);

GradList NativeLayerNormBackwardBackward0::apply(GradList&& grads) {
  const Tensor grad = unpack(0), input = unpack(1), weight = saved[2].defined() ? unpack(2) : Tensor();
  const Tensor &gg_input = grads[0], &gg_weight = grads[1], &gg_bias = grads[2];
  const std::vector<int64_t> dims = trailing_dims(normalized_dims);
  auto [xhat, rstd] = normalized_composed(input, dims, eps);
  const Tensor scaled = weight ? mul(grad, weight) : grad;
  auto row_mean = [&](const Tensor& t) { return mean(t, dims, true); };
  auto plus = [](const Tensor& a, const Tensor& b) { return a ? add(a, b) : b; };
  GradList out(3);  // along grad, input, weight
  if (gg_input) {
    // gg_input . grad_input = rstd * <gg_input, P(scaled)>, P projecting off the row's mean and off
    // xhat (symmetric): linear in scaled; in the input through rstd and xhat.
    const Tensor projected = projected_gradient(gg_input, xhat, rstd, dims);
    if (needs_input_grad(0)) out[0] = weight ? mul(projected, weight) : projected;
    if (weight && needs_input_grad(2)) out[2] = sum_over_rows(mul(grad, projected), normalized_dims);
    if (needs_input_grad(1)) {
      const Tensor m = row_mean(mul(scaled, xhat)), p = row_mean(mul(gg_input, xhat));
      const Tensor through_xhat = neg(mul(rstd, add(mul(scaled, p), mul(m, gg_input))));
      const Tensor through_rstd =
          sub(sub(row_mean(mul(gg_input, scaled)), mul(row_mean(gg_input), row_mean(scaled))), mul(m, p));
      out[1] = sub(projected_gradient(through_xhat, xhat, rstd, dims), mul(mul(mul(rstd, rstd), xhat), through_rstd));
    }
  }
  // gg_weight . grad_weight = the sum of gg_weight * grad * xhat; gg_bias . grad_bias = the sum of gg_bias * grad
  if (gg_weight) {
    if (needs_input_grad(0)) out[0] = plus(out[0], mul(gg_weight, xhat));
    if (needs_input_grad(1)) out[1] = plus(out[1], projected_gradient(mul(gg_weight, grad), xhat, rstd, dims));
  }
  if (gg_bias && needs_input_grad(0)) out[0] = out[0] ? add(out[0], gg_bias) : expand(gg_bias, grad->shape);
  return out;
}

namespace {

std::array<Tensor, 3> layer_norm_backward(const Tensor& grad, const Tensor& input, const Tensor& weight,
                                          const Tensor& saved_mean, const Tensor& saved_rstd, int64_t normalized_dims,
                                          double eps, const std::array<bool, 3>& wanted) {
  const DType type = layer_norm_type(input);
  const auto [rows, len] = layer_norm_rows(input->shape, normalized_dims);
  const Tensor dy = dense_in(grad, type), x = dense_in(input, type), w = dense_in(weight, type);
  const Tensor mean_values = dense_in(saved_mean, type), rstd_values = dense_in(saved_rstd, type);
  std::array<Tensor, 3> out;
  dispatch_floating(type, [&](auto tag) {
    using T = decltype(tag);
    const TypedKernels<T>& k = kernels().of<T>();
    const T *g = dy->data_as<T>(), *xs = x->data_as<T>(), *ws = data_or_null<T>(w);
    const T *means = mean_values->data_as<T>(), *rstds = rstd_values->data_as<T>();
    if (wanted[0]) {
      Tensor grad_input = empty(input->shape, type);
      T* gi = grad_input->data_as<T>();
      parallel_for(0, rows, grain_for(len), [&](int64_t lo, int64_t hi) {
        k.layer_norm_input_grad(g + lo * len, xs + lo * len, hi - lo, len, ws, means + lo, rstds + lo, gi + lo * len);
      });
      out[0] = cast_values(grad_input, input->dtype);
    }
    if (wanted[1] || wanted[2]) {
      std::vector<double> grad_weight(len, 0.0), grad_bias(len, 0.0);
      parallel_for(0, len, grain_for(rows), [&](int64_t lo, int64_t hi) {
        k.layer_norm_param_sums(g + lo, xs + lo, len, means, rstds, rows, hi - lo, grad_weight.data() + lo,
                                grad_bias.data() + lo);
      });
      const Shape normalized(input->shape.end() - normalized_dims, input->shape.end());
      if (wanted[1]) out[1] = reshape(cast_values(vector_of<T>(grad_weight, type), input->dtype), normalized);
      if (wanted[2]) out[2] = reshape(cast_values(vector_of<T>(grad_bias, type), input->dtype), normalized);
    }
  });
  if (!should_record({&grad, &input, &weight})) return out;
  auto* node = make_node<NativeLayerNormBackwardBackward0>(NativeLayerNormBackwardBackward0::kName);
  for (const Tensor* in : {&grad, &input, &weight}) node->next_edges.push_back(*in ? gradient_edge(*in) : Edge{});
  const NodeRef ref(node);
  for (uint32_t i = 0; i < 3; ++i)
    if (out[i]) {
      check_differentiable_output(out[i]);
      out[i]->grad_fn = ref, out[i]->output_nr = i;
    }
  node->save(grad);
  node->save(input);
  node->save(weight);
  node->eps = eps, node->normalized_dims = normalized_dims;
  return out;
}

}  // namespace

Tensor layer_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t normalized_dims, double eps) {
  if (normalized_dims < 0 || normalized_dims > input->dim())
    throw RuntimeError("layer_norm: normalized_dims must be between 0 and the input's number of dims");
  const DType type = layer_norm_type(input);
  const auto [rows, len] = layer_norm_rows(input->shape, normalized_dims);
  for (const Tensor* t : {&weight, &bias})
    if (*t && ((*t)->dtype != input->dtype || (*t)->numel() != len))
      throw RuntimeError(
          "layer_norm: weight and bias must have the input's dtype and one value per normalized element");
  Shape statistics_shape = input->shape;
  std::fill(statistics_shape.end() - normalized_dims, statistics_shape.end(), 1);
  const Tensor x = dense_in(input, type), w = dense_in(weight, type), b = dense_in(bias, type);
  Tensor out = empty(input->shape, type), saved_mean, saved_rstd;
  if (grad_enabled()) {  // only a backward reads them (no_grad: scratch; these two were a tenth of a 32 x 64 call)
    saved_mean = empty(statistics_shape, type);
    saved_rstd = empty(statistics_shape, type);
  }
  dispatch_floating(type, [&](auto tag) {
    using T = decltype(tag);
    const T *xs = x->data_as<T>(), *ws = data_or_null<T>(w), *bs = data_or_null<T>(b);
    std::vector<T> scratch(saved_mean ? 0 : 2 * rows);
    T* means = saved_mean ? saved_mean->data_as<T>() : scratch.data();
    T* rstds = saved_mean ? saved_rstd->data_as<T>() : scratch.data() + rows;
    T* ys = out->data_as<T>();
    const TypedKernels<T>& k = kernels().of<T>();
    // Per row, while it is in cache: the sums of x - x[0] and its square, then the output.
    parallel_for(0, rows, grain_for(len), [&](int64_t lo, int64_t hi) {
      k.layer_norm_forward(xs + lo * len, hi - lo, len, ws, bs, eps, ys + lo * len, means + lo, rstds + lo);
    });
  });
  out = cast_values(out, input->dtype);
  if (auto* node = record<NativeLayerNormBackward0>(out, {&input, &weight, &bias})) {
    node->save(input);
    node->save(weight);
    node->save(saved_mean);
    node->save(saved_rstd);
    node->eps = eps, node->normalized_dims = normalized_dims;
  }
  return out;
}

}  // namespace fg
