// Sorting and selection along one dim: sort, argsort, topk, kthvalue, median. Each row along `dim`
// is ordered by value with NaN largest and ties in index order: a strict total order, so every
// algorithm (sort, partial_sort, nth_element) gives the same rows. That is PyTorch's stable sort,
// and its CPU sort of rows of up to 16 elements (an insertion sort); where PyTorch leaves the order
// of ties unspecified (topk, kthvalue, median, longer unstable sorts) the values are still its.
#include <algorithm>
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

// Positions 0..n-1 of `row`, the first `count` of them in order (ascending, or descending);
// `only_nth`: just position count-1 in its place (nth_element).
template <class T>
void order_row(const std::vector<T>& row, int64_t count, bool descending, bool only_nth, std::vector<int64_t>& order) {
  order.resize(row.size());
  std::iota(order.begin(), order.end(), int64_t(0));
  auto before = [&](int64_t a, int64_t b) {
    T va = row[a], vb = row[b];
    if (descending ? less_nan_last(vb, va) : less_nan_last(va, vb)) return true;
    if (descending ? less_nan_last(va, vb) : less_nan_last(vb, va)) return false;
    return a < b;
  };
  if (count == 0) return;
  if (only_nth) std::nth_element(order.begin(), order.begin() + count - 1, order.end(), before);
  else if (count == static_cast<int64_t>(order.size())) std::sort(order.begin(), order.end(), before);
  else std::partial_sort(order.begin(), order.begin() + count, order.end(), before);
}

// Calls f(row, values, indices, stride) for each row of x along `dim` (a 0-d x is one row of one
// element): `row` holds the row's values; the row's `per_row` results go to values[j * stride] and
// indices[j * stride], in new contiguous tensors of `out_shape` (x's shape with `dim` of length
// per_row, or without `dim` when per_row is 1).
template <class F>
std::pair<Tensor, Tensor> for_each_row(const Tensor& x, int64_t dim, int64_t per_row, const Shape& out_shape, F&& f) {
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

// The `count` first (or, `only_nth`, the count-th) of each row in order.
std::pair<Tensor, Tensor> ordered(const Tensor& x, int64_t dim, int64_t count, bool descending, bool only_nth,
                                  const Shape& out_shape) {
  std::vector<int64_t> order;
  return for_each_row(x, dim, only_nth ? 1 : count, out_shape,
                      [&](const auto& row, auto* values, int64_t* indices, int64_t stride) {
                        order_row(row, count, descending, only_nth, order);
                        for (int64_t j = only_nth ? count - 1 : 0, out = 0; j < count; ++j, ++out) {
                          values[out * stride] = row[order[j]];
                          indices[out * stride] = order[j];
                        }
                      });
}

// x's shape with `dim` of length n (a 0-d x keeps its shape: its one row has one element).
Shape with_length(const Tensor& x, int64_t dim, int64_t n) {
  Shape shape = x->shape;
  if (x->dim()) shape[dim] = n;
  return shape;
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
  int64_t n = x->dim() ? x->shape[dim] : 1;
  return record_selection(ordered(x, dim, n, descending, false, x->shape), x, dim, true,
                          stable ? "SortBackward1" : "SortBackward0");
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending) {
  dim = wrap_dim(dim, x->dim());
  return ordered(x, dim, x->dim() ? x->shape[dim] : 1, descending, false, x->shape).second;
}

std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest) {
  dim = wrap_dim(dim, x->dim());
  int64_t n = x->dim() ? x->shape[dim] : 1;
  if (k < 0 || k > n) throw RuntimeError("selected index k out of range");
  if (x->dtype == DType::Bool) throw RuntimeError("topk does not support bool dtypes on CPU");
  if (!x->dim()) k = 1;  // a 0-d input gives itself, for k 0 or 1 (as PyTorch)
  return record_selection(ordered(x, dim, k, largest, false, with_length(x, dim, k)), x, dim, true, "TopkBackward0");
}

}  // namespace fg
