// Scans along one dim: cumsum, cumprod, logcumsumexp, cummax and cummin. Each kernel walks every
// line along the dim in order (or in reverse, for the reversed scans their gradients use), keeps its
// running value in double (int64 for integers) as PyTorch's CPU kernels do, and rounds each stored
// value once; one thread, one order: the result does not depend on the thread count.
// python/fastgrad/reference/_scan.py does the same arithmetic in the same order.
#include <cmath>
#include <limits>
#include <type_traits>

#include "autograd/node.h"
#include "core/numeric.h"
#include "core/shape.h"
#include "ops/ops.h"

namespace fg {

namespace {

// Calls line(first, n, stride) for every line along `dim` of a contiguous tensor of `shape`: its
// first element, its length and the distance between its elements. A 0-d tensor is one line of one.
template <class F>
void for_each_line(const Shape& shape, int64_t dim, F&& line) {
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) (d < dim ? outer : d == dim ? n : inner) *= shape[d];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) line(o * n * inner + i, n, inner);
}

enum class ScanOp { Sum, Prod, LogSumExp };

// log(exp(x) + exp(acc)), as PyTorch's _log_add_exp_helper: NaN spreads, and equal infinities
// (where exp(min - max) would be NaN) give x.
double log_add_exp(double x, double acc) {
  double lo = std::isnan(acc) ? acc : std::min(x, acc), hi = std::isnan(acc) ? acc : std::max(x, acc);
  if (lo != hi || std::isfinite(lo)) return std::log1p(std::exp(lo - hi)) + hi;
  return x;
}

// out[k] = op(x[0], ..., x[k]) along dim, or op(x[k], ..., x[n-1]) when `reverse`; x's dtype.
Tensor scan(const Tensor& x, int64_t dim, ScanOp op, bool reverse) {
  if (compute_type(x->dtype) != x->dtype)  // a storage dtype: scanned in its compute type, stored rounded
    return cast_values(scan(cast_values(x, compute_type(x->dtype)), dim, op, reverse), x->dtype);
  Tensor src = contiguous(x), out = empty(x->shape, x->dtype);
  dispatch(x->dtype, [&](auto tag) {
    using T = decltype(tag);
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
    const T* in = src->data_as<T>();
    T* res = out->data_as<T>();
    for_each_line(x->shape, dim, [&](int64_t first, int64_t n, int64_t stride) {
      Acc acc = op == ScanOp::Sum ? Acc(0) : op == ScanOp::Prod ? Acc(1) : Acc(-INFINITY);
      for (int64_t i = 0; i < n; ++i) {
        int64_t at = first + (reverse ? n - 1 - i : i) * stride;
        Acc v = static_cast<Acc>(in[at]);
        if constexpr (std::is_floating_point_v<T>)
          acc = op == ScanOp::Sum ? acc + v : op == ScanOp::Prod ? acc * v : log_add_exp(v, acc);
        else acc = op == ScanOp::Sum ? wrap_add(acc, v) : wrap_mul(acc, v);
        res[at] = static_cast<T>(acc);
      }
    });
  });
  return out;
}

// cumsum and cumprod compute in `dtype`, by default x's, or int64 for integers and bools.
DType scan_dtype(const Tensor& x, std::optional<DType> dtype, const char* kernel) {
  DType out = dtype ? *dtype : is_floating(x->dtype) ? x->dtype : DType::Int64;
  if (out == DType::Bool) throw not_implemented_for(kernel, out);
  return out;
}

// x in the scan's dtype (an integer result of an x that requires grad is refused when it is
// recorded: check_differentiable_output).
Tensor converted(const Tensor& x, DType dtype) {
  GradModeGuard no_grad(false);
  return to_dtype(x, dtype);
}

// The input's shape and dtype (the gradient returns to its dtype), the dim and the direction.
struct ScanNode : Node {
  InputMeta input;
  int64_t dim = 0;
  bool reverse = false;
};

template <class N>
void remember(N* node, const Tensor& x, int64_t dim, bool reverse) {
  node->input = InputMeta::of(x);
  node->dim = dim;
  node->reverse = reverse;
}

}  // namespace

// ---- cumsum: the gradient is the cumulative sum of the gradient the other way.
FG_NODE_FROM(CumsumBackward0, ScanNode);
namespace {
// The cumulative sum of `src`, x converted to the result's dtype (or x itself), recorded for x.
Tensor cumsum_along(const Tensor& x, const Tensor& src, int64_t dim, bool reverse) {
  Tensor out = scan(src, dim, ScanOp::Sum, reverse);
  if (auto* node = record<CumsumBackward0>(out, {&x})) remember(node, x, dim, reverse);
  return out;
}
}  // namespace
GradList CumsumBackward0::apply(GradList&& grads) {
  return {to_dtype(cumsum_along(grads[0], grads[0], dim, !reverse), input.dtype)};
}

Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  int64_t d = wrap_dim(dim, x->dim());
  return cumsum_along(x, converted(x, scan_dtype(x, dtype, "cumsum_out_cpu")), d, false);
}

// ---- logcumsumexp. Its gradient, PyTorch's logcumsumexp_backward: at k, the sum over j >= k of
// g[j] exp(x[k] - out[j]), taken in log space, for the positive and negative parts of g apart.
FG_NODE_FROM(LogcumsumexpBackward0, ScanNode);
namespace {
Tensor logcumsumexp_along(const Tensor& x, int64_t dim, bool reverse) {
  Tensor out = scan(x, dim, ScanOp::LogSumExp, reverse);
  if (auto* node = record<LogcumsumexpBackward0>(out, {&x})) {
    remember(node, x, dim, reverse);
    node->save(x);
    node->save(out, true);
  }
  return out;
}
}  // namespace
GradList LogcumsumexpBackward0::apply(GradList&& grads) {
  const Tensor& g = grads[0];
  Tensor x = unpack(0), out = unpack(1);  // first: a saved tensor changed in place is an error here too
  if (g->dim() == 0 || g->numel() == 0) return {g};
  Tensor lowest = dispatch_floating(g->dtype, [&](auto tag) {
    return full({}, static_cast<double>(std::numeric_limits<decltype(tag)>::lowest()), g->dtype);
  });
  Tensor log_abs = log(abs(g));
  auto part = [&](CompareOp sign) {
    Tensor log_g = where(compare(g, Scalar::from_int(0), sign), log_abs, lowest);
    return exp(add(logcumsumexp_along(sub(log_g, out), dim, !reverse), x));
  };
  return {sub(part(CompareOp::Gt), part(CompareOp::Lt))};
}

Tensor logcumsumexp(const Tensor& x, int64_t dim) {
  int64_t d = wrap_dim(dim, x->dim());
  if (!is_floating(x->dtype)) throw not_implemented_for("logcumsumexp_out_cpu", x->dtype);
  return logcumsumexp_along(x, d, false);
}

// ---- cumprod. Its gradient, PyTorch's cumprod_backward: without zeros in the input, the reversed
// cumulative sum of out * g, divided by x; with zeros (where that divides by zero), a loop, or in a
// backward with create_graph, at k the sum over j >= k of g[j] times the product of x[0..j] without
// x[k], one k at a time (differentiable again).
FG_NODE_FROM(CumprodBackward0, ScanNode);
namespace {
// As cumsum_along.
Tensor cumprod_along(const Tensor& x, const Tensor& src, int64_t dim) {
  Tensor out = scan(src, dim, ScanOp::Prod, false);
  if (auto* node = record<CumprodBackward0>(out, {&x})) {
    remember(node, x, dim, false);
    node->save(src);
    node->save(out, true);
  }
  return out;
}

bool has_zero(const Tensor& x) {
  GradModeGuard no_grad(false);
  return item(sum(to_dtype(compare(x, Scalar::from_int(0), CompareOp::Eq), DType::Int64), {}, false)).integer > 0;
}

// PyTorch's O(n) case with zeros, for a backward that records nothing (its derivative is not the
// second derivative of cumprod). On each line, z1 and z2 its first two zeros: at k < z1, the sum over
// k <= j < z1 of out[j] g[j], over x[k]; at z1, the product of x before z1 times the sum over
// z1 <= j < z2 of g[j] times the product of x(z1, j]; after z1, zero (g there is never read).
Tensor cumprod_grad_with_zeros(const Tensor& x, const Tensor& out, const Tensor& g, int64_t dim) {
  Tensor xc = contiguous(x), oc = contiguous(out), gc = contiguous(g), grad = zeros(x->shape, g->dtype);
  dispatch_floating(x->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *xs = xc->data_as<T>(), *os = oc->data_as<T>(), *gs = gc->data_as<T>();
    T* r = grad->data_as<T>();
    for_each_line(x->shape, dim, [&](int64_t first, int64_t n, int64_t stride) {
      auto at = [&](int64_t i) { return first + i * stride; };
      int64_t z1 = 0;
      while (z1 < n && xs[at(z1)] != 0) ++z1;
      double tail = 0;
      for (int64_t k = z1 - 1; k >= 0; --k) {
        tail += static_cast<double>(os[at(k)]) * gs[at(k)];
        r[at(k)] = static_cast<T>(tail / xs[at(k)]);
      }
      if (z1 == n) return;
      double sum = gs[at(z1)], product = 1;
      for (int64_t j = z1 + 1; j < n && xs[at(j)] != 0; ++j) {
        product *= xs[at(j)];
        sum += gs[at(j)] * product;
      }
      r[at(z1)] = static_cast<T>((z1 == 0 ? 1.0 : static_cast<double>(os[at(z1 - 1)])) * sum);
    });
  });
  return grad;
}

Tensor cumprod_grad(const Tensor& x, const Tensor& out, const Tensor& g, int64_t dim) {
  if (x->numel() <= 1 || x->shape[dim] == 1) return g;
  if (!has_zero(x)) {
    Tensor w = mul(out, g);
    return div(cumsum_along(w, w, dim, true), x);
  }
  if (!grad_enabled()) return cumprod_grad_with_zeros(x, out, g, dim);
  int64_t n = x->shape[dim];
  Shape along(x->dim(), 1);
  along[dim] = n;
  Tensor positions = reshape(arange(0, static_cast<double>(n), 1, DType::Int64), along);
  Tensor one = full({}, 1.0, x->dtype), zero = zeros({}, g->dtype);
  std::vector<Tensor> columns;
  for (int64_t k = 0; k < n; ++k) {
    Tensor x_without_k = where(compare(positions, Scalar::from_int(k), CompareOp::Eq), one, x);
    Tensor without_k = cumprod_along(x_without_k, x_without_k, dim);
    Tensor terms = where(compare(positions, Scalar::from_int(k), CompareOp::Ge), mul(without_k, g), zero);
    columns.push_back(sum(terms, {dim}, true));
  }
  return cat(columns, dim);
}
}  // namespace
GradList CumprodBackward0::apply(GradList&& grads) {
  return {to_dtype(cumprod_grad(unpack(0), unpack(1), grads[0], dim), input.dtype)};
}

Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  int64_t d = wrap_dim(dim, x->dim());
  return cumprod_along(x, converted(x, scan_dtype(x, dtype, "cumprod_out_cpu")), d);
}

// ---- cummax and cummin: values and the index each value came from (the latest of equal values,
// and of NaNs, which win). The gradient goes back to those indices (CummaxBackward0, CumminBackward0).
struct CumExtremeNode : Node {
  InputMeta input;
  int64_t dim = 0;
};
FG_NODE_UNNAMED(CumExtremeBackward, CumExtremeNode);
GradList CumExtremeBackward::apply(GradList&& grads) {
  const Tensor& g = grads[0];
  Tensor indices = unpack(0);
  unpack(1);  // the input, which PyTorch's node saves: only its version matters
  if (input.shape.empty() || g->numel() == 0) return {g};
  std::vector<Tensor> where_to;  // index_put_'s coordinates: the saved indices along dim, every position elsewhere
  for (int64_t d = 0; d < static_cast<int64_t>(input.shape.size()); ++d) {
    Shape along(input.shape.size(), 1);
    along[d] = input.shape[d];
    where_to.push_back(d == dim ? indices
                                : reshape(arange(0, static_cast<double>(input.shape[d]), 1, DType::Int64), along));
  }
  return {index_put_(zeros(input.sizes(), g->dtype), where_to, g, true)};
}

namespace {
std::pair<Tensor, Tensor> cum_extreme(const Tensor& x, int64_t dim, bool want_max) {
  if (compute_type(x->dtype) != x->dtype) {  // a storage dtype: compared in its compute type, which orders alike
    auto [values, indices] = cum_extreme(cast_values(x, compute_type(x->dtype)), dim, want_max);
    return {cast_values(values, x->dtype), indices};
  }
  int64_t d = wrap_dim(dim, x->dim());
  Tensor src = contiguous(x), values = empty(x->shape, x->dtype), indices = empty(x->shape, DType::Int64);
  dispatch(x->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* in = src->data_as<T>();
    T* best = values->data_as<T>();
    int64_t* at = indices->data_as<int64_t>();
    for_each_line(x->shape, d, [&](int64_t first, int64_t n, int64_t stride) {
      T top{};
      int64_t top_at = 0;
      for (int64_t i = 0; i < n; ++i) {
        T v = in[first + i * stride];
        if (i == 0 || v != v || (top == top && (want_max ? v >= top : v <= top))) {
          top = v;
          top_at = i;
        }
        best[first + i * stride] = top;
        at[first + i * stride] = top_at;
      }
    });
  });
  if (auto* node = record<CumExtremeBackward>(values, {&x}, want_max ? "CummaxBackward0" : "CumminBackward0")) {
    node->input = InputMeta::of(x);
    node->dim = d;
    node->save(indices, true);
    node->save(x);
  }
  return {values, indices};
}
}  // namespace

std::pair<Tensor, Tensor> cummax(const Tensor& x, int64_t dim) { return cum_extreme(x, dim, true); }
std::pair<Tensor, Tensor> cummin(const Tensor& x, int64_t dim) { return cum_extreme(x, dim, false); }

}  // namespace fg
