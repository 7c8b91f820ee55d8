// Sorting and selection along one dim: sort, argsort, topk, kthvalue, median, mode. Each row along `dim`
// is ordered by value with NaN largest. Equal values come in PyTorch's CPU order: index order for the
// stable sort and for median (whose nth_element breaks ties by position); elsewhere PyTorch compares
// values alone and the order of equal values is what the exact steps of its algorithm give, so each
// op runs the same algorithm on the same comparisons: std::sort (unstable sort, mode), std::partial_sort
// or std::nth_element (topk), PyTorch's own quickselect (kthvalue). The pure-Python twin replays
// libstdc++'s steps (python/fastgrad/reference/_stl.py).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "autograd/node.h"
#include "core/shape.h"
#include "ops/ops.h"

namespace fg {

namespace {

template <class T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return v != v;
  else return false;
}

// a < b with NaN largest (NaNs are equal to each other).
template <class T>
bool less_nan_last(T a, T b) {
  return (!is_nan(a) && is_nan(b)) || a < b;
}

// PyTorch's CPU comparators of two positions of `row` by value alone (KeyValueCompAsc/Desc, topk's,
// kthvalue's gt_or_nan): NaN largest, equal values left where the algorithm puts them.
template <class T>
auto by_value(const std::vector<T>& row, bool descending) {
  return [&row, descending](int64_t a, int64_t b) {
    return descending ? less_nan_last(row[b], row[a]) : less_nan_last(row[a], row[b]);
  };
}

std::vector<int64_t>& positions(std::vector<int64_t>& order, size_t n) {
  order.resize(n);
  std::iota(order.begin(), order.end(), int64_t(0));
  return order;
}

// PyTorch sorts a 1-D integer tensor of at least this many elements in ascending order with a radix
// sort (can_use_radix_sort), which is stable; other unstable sorts with std::sort.
constexpr int64_t kRadixSortFrom = 32768;

bool sorts_stably(const Tensor& x, bool descending, std::optional<bool> stable) {
  bool radix =
      x->dim() == 1 && !descending && !is_floating(x->dtype) && x->dtype != DType::Bool && x->numel() >= kRadixSortFrom;
  return stable.value_or(false) || radix;
}

// PyTorch's quick_select_template (aten/src/ATen/native/SortingUtils.h) over the positions of `row`:
// median-of-three quickselect that leaves the k-th smallest (NaN largest) at order[k].
template <class T>
void quick_select(const std::vector<T>& row, int64_t k, std::vector<int64_t>& order) {
  auto gt = by_value(row, true);
  int64_t low = 0, high = static_cast<int64_t>(order.size()) - 1;
  while (high > low) {
    if (high == low + 1) {
      if (gt(order[low], order[high])) std::swap(order[low], order[high]);
      return;
    }
    int64_t mid = low + (high - low) / 2;
    std::swap(order[mid], order[low + 1]);
    if (gt(order[low + 1], order[high])) std::swap(order[low + 1], order[high]);
    if (gt(order[low], order[high])) std::swap(order[low], order[high]);
    if (gt(order[low + 1], order[low])) std::swap(order[low + 1], order[low]);
    int64_t i = low + 1, j = high, pivot = order[low];
    while (true) {
      do ++i;
      while (gt(pivot, order[i]));
      do --j;
      while (gt(order[j], pivot));
      if (j < i) break;
      std::swap(order[i], order[j]);
    }
    std::swap(order[low], order[j]);
    if (j <= k) low = i;
    if (j >= k) high = j - 1;
  }
}

// Calls f(row, values, indices, stride) for each row of x along `dim` (a 0-d x is one row of one
// element): `row` holds the row's values; the row's `per_row` results go to values[j * stride] and
// indices[j * stride], in new contiguous tensors of `out_shape` (x's shape with `dim` of length
// per_row, or without `dim` when per_row is 1).
template <class F>
std::pair<Tensor, Tensor> for_each_row(const Tensor& x, int64_t dim, int64_t per_row, const Shape& out_shape, F&& f) {
  if (compute_type(x->dtype) != x->dtype) {  // a storage dtype: ordered in its compute type, which orders alike
    auto [values, indices] = for_each_row(cast_values(x, compute_type(x->dtype)), dim, per_row, out_shape, f);
    return {cast_values(values, x->dtype), indices};
  }
  Tensor values = empty(out_shape, x->dtype), indices = empty(out_shape, DType::Int64);
  Tensor xc;
  {
    GradModeGuard no_grad(false);
    xc = contiguous(x);
  }
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t d = 0; d < x->dim(); ++d) {
    if (d < dim) outer *= x->shape[d];
    else if (d > dim) inner *= x->shape[d];
    else n = x->shape[d];
  }
  dispatch(x->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* in = xc->data_as<T>();
    std::vector<T> row(n);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        for (int64_t j = 0; j < n; ++j) row[j] = in[(o * n + j) * inner + i];
        int64_t at = o * per_row * inner + i;
        f(row, values->data_as<T>() + at, indices->data_as<int64_t>() + at, inner);
      }
  });
  return {values, indices};
}

// Each row's positions, `count` of them, as `order_row(row, order)` leaves them in `order`.
template <class OrderRow>
std::pair<Tensor, Tensor> ordered(const Tensor& x, int64_t dim, int64_t count, const Shape& out_shape,
                                  OrderRow&& order_row) {
  std::vector<int64_t> order;
  return for_each_row(x, dim, count, out_shape, [&](const auto& row, auto* values, int64_t* indices, int64_t stride) {
    order_row(row, positions(order, row.size()));
    for (int64_t j = 0; j < count; ++j) {
      values[j * stride] = row[order[j]];
      indices[j * stride] = order[j];
    }
  });
}

std::pair<Tensor, Tensor> sorted_rows(const Tensor& x, int64_t dim, bool descending, std::optional<bool> stable) {
  bool stably = sorts_stably(x, descending, stable);
  return ordered(x, dim, x->dim() ? x->shape[dim] : 1, x->shape, [&](const auto& row, std::vector<int64_t>& order) {
    if (stably) std::stable_sort(order.begin(), order.end(), by_value(row, descending));
    else std::sort(order.begin(), order.end(), by_value(row, descending));
  });
}

// x's shape with `dim` of length n (a 0-d x keeps its shape: its one row has one element).
Shape with_length(const Tensor& x, int64_t dim, int64_t n) {
  Shape shape = x->shape;
  if (x->dim()) shape[dim] = n;
  return shape;
}

// The lower median of each row, or its first NaN (as PyTorch's median: NaN wins). PyTorch's
// nth_element breaks ties by position: a total order, which any selection follows.
std::pair<Tensor, Tensor> median_rows(const Tensor& x, int64_t dim, const Shape& out_shape) {
  std::vector<int64_t> order;
  return for_each_row(x, dim, 1, out_shape, [&](const auto& row, auto* values, int64_t* indices, int64_t) {
    auto nan = std::find_if(row.begin(), row.end(), [](auto v) { return is_nan(v); });
    int64_t at = nan - row.begin();
    if (nan == row.end()) {
      auto nth = positions(order, row.size()).begin() + (static_cast<int64_t>(row.size()) - 1) / 2;
      std::nth_element(order.begin(), nth, order.end(),
                       [&](int64_t a, int64_t b) { return row[a] < row[b] || (row[a] == row[b] && a < b); });
      at = *nth;
    }
    *values = row[at];
    *indices = at;
  });
}

// The most frequent value of each row (the smallest of equally frequent ones) and its last position:
// PyTorch's CPU mode, the end of its run in a std::sort of the row by `<` alone.
std::pair<Tensor, Tensor> mode_rows(const Tensor& x, int64_t dim, const Shape& out_shape) {
  std::vector<int64_t> order;
  return for_each_row(x, dim, 1, out_shape, [&](const auto& row, auto* values, int64_t* indices, int64_t) {
    int64_t n = static_cast<int64_t>(row.size()), best_count = 0, run = 0;
    positions(order, row.size());
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return row[a] < row[b]; });
    for (int64_t j = 0; j < n; ++j) {
      ++run;
      if (j + 1 < n && row[order[j + 1]] == row[order[j]]) continue;  // the run goes on (NaN ends it)
      if (run > best_count) {
        best_count = run;
        *values = row[order[j]];
        *indices = order[j];
      }
      run = 0;
    }
  });
}

void require_nonempty_dim(const Tensor& x, int64_t dim, const char* op) {
  if (x->dim() && x->shape[dim] == 0)
    throw IndexError(cat(op, "(): Expected reduction dim ", dim, " to have non-zero size."));
}

void require_not_bool(const Tensor& x, const char* kernel) {
  if (x->dtype == DType::Bool) throw NotImplementedError(cat("\"", kernel, "\" not implemented for 'Bool'"));
}

Shape reduced(const Tensor& x, int64_t dim, bool keepdim) {
  return x->dim() ? reduced_shape(x->shape, reduction_mask({dim}, x->dim()), keepdim) : Shape{};
}

}  // namespace

// sort, topk, kthvalue, median(dim): the gradient goes to the positions the indices (output 1)
// name, as PyTorch's value_selecting_reduction_backward; `keepdim` false when the op removed `dim`.
struct SelectAlongDimNode : Node {
  InputMeta input;
  int64_t dim = 0;
  bool keepdim = true;
};
FG_NODE_UNNAMED(SelectAlongDimBackward, SelectAlongDimNode);
GradList SelectAlongDimBackward::apply(GradList&& grads) {
  Tensor g = grads[0], indices = unpack(0);
  const Shape& in_shape = input.sizes();
  if (in_shape.empty()) return {reshape(g, in_shape)};  // a 0-d input is its own only element
  if (!keepdim) {
    g = unsqueeze(g, dim);
    indices = unsqueeze(indices, dim);
  }
  // zeros(input).index_put_(key, g) where key picks, at each element of g, its own coordinates
  // except along `dim`, where it picks the index.
  std::vector<Tensor> key;
  for (int64_t d = 0; d < static_cast<int64_t>(in_shape.size()); ++d) {
    Shape along(in_shape.size(), 1);
    along[d] = g->shape[d];
    key.push_back(d == dim ? indices : reshape(arange(0, static_cast<double>(g->shape[d]), 1, DType::Int64), along));
  }
  return {index_put_(zeros(in_shape, g->dtype), key, g, true)};
}

namespace {
std::pair<Tensor, Tensor> record_selection(std::pair<Tensor, Tensor> result, const Tensor& x, int64_t dim, bool keepdim,
                                           const char* node_name) {
  if (auto* node = record<SelectAlongDimBackward>(result.first, {&x}, node_name)) {
    node->input = InputMeta::of(x);
    node->dim = dim;
    node->keepdim = keepdim || x->dim() == 0;
    node->save(result.second, true);
  }
  return result;
}
}  // namespace

std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending, std::optional<bool> stable) {
  dim = wrap_dim(dim, x->dim());
  return record_selection(sorted_rows(x, dim, descending, stable), x, dim, true,
                          stable ? "SortBackward1" : "SortBackward0");
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  dim = wrap_dim(dim, x->dim());
  return sorted_rows(x, dim, descending, stable).second;
}

std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  dim = wrap_dim(dim, x->dim());
  int64_t n = x->dim() ? x->shape[dim] : 1;
  if (k < 0 || k > n) throw RuntimeError("selected index k out of range");
  if (x->dtype == DType::Bool) throw RuntimeError("topk does not support bool dtypes on CPU");
  if (!x->dim()) k = 1;  // a 0-d input gives itself, for k 0 or 1 (as PyTorch)
  // PyTorch's topk_impl_loop: partial_sort for a few of many, else nth_element at k - 1 and (sorted)
  // a sort of those before it.
  auto select = [&](const auto& row, std::vector<int64_t>& order) {
    if (k == 0) return;
    auto before = by_value(row, largest);
    if (k * 64 <= n) {
      std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
    } else {
      std::nth_element(order.begin(), order.begin() + k - 1, order.end(), before);
      if (sorted) std::sort(order.begin(), order.begin() + k - 1, before);
    }
  };
  return record_selection(ordered(x, dim, k, with_length(x, dim, k), select), x, dim, true, "TopkBackward0");
}

std::pair<Tensor, Tensor> kthvalue(const Tensor& x, int64_t k, int64_t dim, bool keepdim) {
  dim = wrap_dim(dim, x->dim());
  require_nonempty_dim(x, dim, "kthvalue");
  if (k < 1 || k > (x->dim() ? x->shape[dim] : 1))
    throw RuntimeError(cat("kthvalue(): selected number k out of range for dimension ", dim));
  require_not_bool(x, "kthvalue_cpu");
  std::vector<int64_t> order;
  auto kth =
      for_each_row(x, dim, 1, reduced(x, dim, keepdim), [&](const auto& row, auto* values, int64_t* indices, int64_t) {
        quick_select(row, k - 1, positions(order, row.size()));
        *values = row[order[k - 1]];
        *indices = order[k - 1];
      });
  return record_selection(kth, x, dim, keepdim, "KthvalueBackward0");
}

std::pair<Tensor, Tensor> median_dim(const Tensor& x, int64_t dim, bool keepdim) {
  dim = wrap_dim(dim, x->dim());
  require_nonempty_dim(x, dim, "median");
  require_not_bool(x, "median_out");
  return record_selection(median_rows(x, dim, reduced(x, dim, keepdim)), x, dim, keepdim, "MedianBackward1");
}

std::pair<Tensor, Tensor> mode(const Tensor& x, int64_t dim, bool keepdim) {
  dim = wrap_dim(dim, x->dim());
  require_nonempty_dim(x, dim, "mode");
  return record_selection(mode_rows(x, dim, reduced(x, dim, keepdim)), x, dim, keepdim, "ModeBackward0");
}

// median() of all elements (MedianBackward0) splits the gradient evenly among the elements equal
// to the result (the NaNs, for a NaN result), as PyTorch's evenly_distribute_backward.
FG_NODE(MedianBackward0);
GradList MedianBackward0::apply(GradList&& grads) {
  Tensor x = unpack(0), out = unpack(1);
  Tensor hit = logical_or(compare(x, out, CompareOp::Eq),
                          logical_and(compare(x, x, CompareOp::Ne), compare(out, out, CompareOp::Ne)));
  Tensor share = div(expand(grads[0], x->shape), sum(to_dtype(hit, grads[0]->dtype), {}, false));
  return {where(hit, share, zeros_like(share))};
}

Tensor median_all(const Tensor& x) {
  require_not_bool(x, "median_cpu");
  Tensor out;
  if (x->numel() == 0) {  // PyTorch's NaN, converted to the dtype
    out = x->dtype == DType::Int64 ? full({}, Scalar::from_int(std::numeric_limits<int64_t>::min()), x->dtype)
                                   : full({}, std::nan(""), x->dtype);
  } else {
    GradModeGuard no_grad(false);
    out = median_rows(reshape(x, {-1}), 0, {}).first;
  }
  if (auto* node = record<MedianBackward0>(out, {&x})) {
    node->save(x);
    node->save(out, true);
  }
  return out;
}

// ---- searching, counting and unique (issue 13). None of these records a graph: their results are
// positions and counts.

Tensor searchsorted(const Tensor& sorted, const Tensor& values, bool right) {
  Tensor out = empty(values->shape, DType::Int64);
  Tensor seq = dense(sorted), val = dense(values);
  const int64_t n = sorted->shape.back(), per_row = values->dim() ? values->shape.back() : 1;
  const bool one_row = sorted->dim() == 1;
  dispatch(values->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* rows = seq->data_as<T>();
    const T* v = val->data_as<T>();
    int64_t* o = out->data_as<int64_t>();
    for (int64_t i = 0; i < val->numel(); ++i) {
      const T* row = rows + (one_row ? 0 : i / per_row * n);
      int64_t lo = 0, hi = n;
      while (lo < hi) {  // PyTorch's comparisons, so that NaN values and boundaries land where its do
        const int64_t mid = lo + (hi - lo) / 2;
        if (right ? !(row[mid] > v[i]) : !(row[mid] >= v[i])) lo = mid + 1;
        else hi = mid;
      }
      o[i] = lo;
    }
  });
  return out;
}

Tensor bincount(const Tensor& x, const std::optional<Tensor>& weights, int64_t minlength) {
  Tensor idx = dense(x);
  const int64_t* at = idx->data_as<int64_t>();
  int64_t length = minlength;
  for (int64_t i = 0; i < idx->numel(); ++i) length = std::max(length, at[i] + 1);
  Tensor out = full({length}, Scalar::from_int(0), weights ? (*weights)->dtype : DType::Int64);
  if (!weights) {
    int64_t* counts = out->data_as<int64_t>();
    for (int64_t i = 0; i < idx->numel(); ++i) ++counts[at[i]];
    return out;
  }
  Tensor w = dense(*weights);
  dispatch_floating(w->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* wt = w->data_as<T>();
    T* sums = out->data_as<T>();
    for (int64_t i = 0; i < idx->numel(); ++i) sums[at[i]] += wt[i];
  });
  return out;
}

Tensor histogram_counts(const Tensor& x, const Tensor& edges, const std::optional<Tensor>& weights) {
  // The shared layer gives PyTorch's errors; these keep the loop below in bounds whatever the caller.
  if (edges->dtype != x->dtype || edges->numel() < 2) throw RuntimeError("histogram: edges of x's dtype expected");
  if (weights && ((*weights)->dtype != x->dtype || (*weights)->numel() != x->numel()))
    throw RuntimeError("histogram: weights of x's dtype and size expected");
  const int64_t bins = edges->numel() - 1;
  Tensor out = full({bins}, Scalar::from_int(0), x->dtype);
  Tensor v = dense(x), e = dense(edges);
  std::optional<Tensor> w;
  if (weights) w = dense(*weights);
  dispatch_floating(x->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* values = v->data_as<T>();
    const T* edge = e->data_as<T>();
    const T* weight = w ? (*w)->data_as<T>() : nullptr;
    T* counts = out->data_as<T>();
    const T left = edge[0], right = edge[bins];
    for (int64_t i = 0; i < v->numel(); ++i) {
      const T value = values[i];
      if (!(value >= left && value <= right)) continue;  // outside, or NaN
      // the bin whose left edge is the last one <= value; the right edge belongs to the last bin
      int64_t pos = std::upper_bound(edge, edge + bins + 1, value) - edge - 1;
      if (pos == bins) --pos;
      counts[pos] += weight ? weight[i] : T(1);
    }
  });
  return out;
}

std::tuple<Tensor, Tensor, Tensor> unique_rows(const Tensor& rows, bool consecutive) {
  const int64_t n = rows->shape[0], width = rows->shape[1];
  Tensor r = dense(rows);
  std::vector<int64_t> order(n), first, counts;
  std::iota(order.begin(), order.end(), int64_t(0));
  Tensor inverse = empty({n}, DType::Int64);
  dispatch(rows->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* data = r->data_as<T>();
    auto row = [&](int64_t i) { return data + i * width; };
    if (!consecutive)  // rows in lexicographic order, NaN largest, ties in index order
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        return std::lexicographical_compare(row(a), row(a) + width, row(b), row(b) + width, less_nan_last<T>);
      });
    int64_t* inv = inverse->data_as<int64_t>();
    for (int64_t j = 0; j < n; ++j) {
      const int64_t i = order[j];
      if (first.empty() || !std::equal(row(i), row(i) + width, row(first.back()))) {  // NaN: a new value
        first.push_back(i);
        counts.push_back(0);
      }
      ++counts.back();
      inv[i] = static_cast<int64_t>(first.size()) - 1;
    }
  });
  auto as_tensor = [](const std::vector<int64_t>& v) {
    Tensor t = empty({static_cast<int64_t>(v.size())}, DType::Int64);
    std::copy(v.begin(), v.end(), t->data_as<int64_t>());
    return t;
  };
  return {as_tensor(first), inverse, as_tensor(counts)};
}

}  // namespace fg
