// Reductions. The kernel views the input as [kept dims..., reduced dims...] and visits it in that
// order, so every result element sees its reduced block as one run (deterministic order). Backward
// formulas broadcast the output gradient back over the reduced dims.
#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/node.h"
#include "core/numeric.h"
#include "core/shape.h"
#include "kernels/kernel_table.h"
#include "kernels/loops.h"
#include "kernels/thread_pool.h"
#include "ops/ops.h"

namespace fg {

namespace {

// Calls f(out_index, position_in_block, value) over x, reduced dims innermost. Long loops split
// across threads by whole results: each result's block is visited in the same order for any
// thread count, and f may write only to its out_index's state.
template <class T, class F>
void visit_reduced(const Tensor& x, const std::vector<bool>& mask, F&& f) {
  Shape shape, strides;
  int64_t block = 1;
  for (int pass = 0; pass < 2; ++pass)
    for (int64_t d = 0; d < x->dim(); ++d)
      if (mask[d] == (pass == 1)) {
        shape.push_back(x->shape[d]);
        strides.push_back(x->strides[d]);
        if (pass == 1) block *= x->shape[d];
      }
  const T* data = x->data_as<T>();
  if (block == 0) return;
  const int64_t results = element_count(shape) / block;
  parallel_for(0, results, std::max<int64_t>(1, kParallelElements / block), [&](int64_t lo, int64_t hi) {
    int64_t out = lo, r = 0;
    for_each_offset<1>(shape, {strides.data()}, lo * block, hi * block, [&](int64_t, const std::array<int64_t, 1>& o) {
      f(out, r, data[o[0]]);
      if (++r == block) {
        r = 0;
        ++out;
      }
    });
  });
}

int64_t block_size(const Tensor& x, const std::vector<bool>& mask) {
  int64_t n = 1;
  for (int64_t d = 0; d < x->dim(); ++d)
    if (mask[d]) n *= x->shape[d];
  return n;
}

// The result shape with reduced dims kept as 1, for broadcasting a gradient back.
Shape keepdim_shape(const Shape& in, const std::vector<bool>& mask) { return reduced_shape(in, mask, true); }

// Broadcasts a reduction's output (or its gradient) back to the input shape.
Tensor expand_back(const Tensor& g, const Shape& in_shape, const std::vector<bool>& mask) {
  return expand(reshape(g, keepdim_shape(in_shape, mask)), in_shape);
}

// `all`: reducing over every dim because none was given.
void require_nonempty(const Tensor& x, const std::vector<bool>& mask, const char* op, bool all) {
  if (all && x->numel() == 0)
    throw RuntimeError(cat(op, "(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                               "reduction dim with the 'dim' argument."));
  for (int64_t d = 0; d < x->dim(); ++d)
    if (mask[d] && x->shape[d] == 0)
      throw IndexError(cat(op, "(): Expected reduction dim ", d, " to have non-zero size."));
}

// Accumulator type: doubles for floats (better sums than float), int64 for integers and bools.
template <class T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

// Stores reduction results kept in `acc` (one per output element) into a new tensor.
template <class A>
Tensor store(const std::vector<A>& acc, const Shape& shape, DType dtype) {
  Tensor out = empty(shape, dtype);
  dispatch(dtype, [&](auto tag) {
    using R = decltype(tag);
    for (size_t i = 0; i < acc.size(); ++i) out->data_as<R>()[i] = static_cast<R>(acc[i]);
  });
  return out;
}

// The dims of x that `mask` marks as `reduced` (or not), size-1 dims left out, in dim order: the
// trailing ones that x lays out as one contiguous block count `dense` elements (1 if none), the
// dims before them are listed with their strides. `all()`: every one of them, the block as one dim.
struct DimGroup {
  Shape shape, strides;
  int64_t dense = 1;

  DimGroup(const Tensor& x, const std::vector<bool>& mask, bool reduced) {
    for (int64_t d = 0; d < x->dim(); ++d)
      if (mask[d] == reduced && x->shape[d] != 1) {
        shape.push_back(x->shape[d]);
        strides.push_back(x->strides[d]);
      }
    while (!shape.empty() && strides.back() == dense) {
      dense *= shape.back();
      shape.resize(shape.size() - 1);
      strides.resize(strides.size() - 1);
    }
  }
  std::pair<Shape, Shape> all() const {
    std::pair<Shape, Shape> dims{shape, strides};
    dims.first.push_back(dense);
    dims.second.push_back(1);
    return dims;
  }
};

// Float sums by the vector kernels, for any strides, when the reduced dims end in a contiguous
// block of at least kMinRow elements (each result sums its blocks in order, each block in the sum
// kernel's fixed lane order) or else the kept dims end in one (each result sums its elements in
// the reduced dims' row-major order, a row of results at a time). False for other layouts, left
// to visit_reduced. Threads split the results only, never one result's sum: its order stays the
// same for any count.
template <class T>
bool vector_sum(const Tensor& x, const std::vector<bool>& mask, std::vector<double>& acc) {
  constexpr int64_t kMinRow = 16;  // shorter blocks: the plain loop beats a kernel call per block
  if (x->numel() == 0) return false;
  const DimGroup reduced(x, mask, true), kept(x, mask, false);
  const int64_t block = block_size(x, mask), results = x->numel() / block;
  const TypedKernels<T>& k = kernels().of<T>();
  const T* data = x->data_as<T>();
  if (reduced.dense >= kMinRow) {
    const auto [kept_shape, kept_strides] = kept.all();
    parallel_for(0, results, kParallelElements / block + 1, [&](int64_t lo, int64_t hi) {
      for_each_offset<1>(kept_shape, {kept_strides.data()}, lo, hi, [&](int64_t o, const std::array<int64_t, 1>& at) {
        for_each_offset<1>(reduced.shape, {reduced.strides.data()}, [&](int64_t, const std::array<int64_t, 1>& from) {
          acc[o] += k.sum(data + at[0] + from[0], reduced.dense);
        });
      });
    });
  } else if (kept.dense > 1) {
    const auto [reduced_shape, reduced_strides] = reduced.all();
    const int64_t row = kept.dense;  // results per row, adjacent in memory
    parallel_for(0, results, std::max(kParallelElements / block, int64_t(64)), [&](int64_t lo, int64_t hi) {
      for_each_offset<1>(kept.shape, {kept.strides.data()}, lo / row, (hi + row - 1) / row,
                         [&](int64_t q, const std::array<int64_t, 1>& at) {
                           const int64_t begin = std::max(lo - q * row, int64_t(0)), end = std::min(hi - q * row, row);
                           for_each_offset<1>(reduced_shape, {reduced_strides.data()},
                                              [&](int64_t, const std::array<int64_t, 1>& from) {
                                                k.accumulate(acc.data() + q * row + begin,
                                                             data + at[0] + from[0] + begin, end - begin);
                                              });
                         });
    });
  } else {
    return false;
  }
  return true;
}

// A reduction node knows the input shape and which dims it reduced.
struct ReduceNode : Node {
  InputMeta input;
  SmallVec<uint8_t, 6> mask;  // 1 = reduced dim
  bool keepdim = false;
  void remember(const Tensor& x, const std::vector<bool>& reduced, bool keep) {
    input = InputMeta::of(x);
    for (bool m : reduced) mask.push_back(m);
    keepdim = keep;
  }
  std::vector<bool> reduced() const {
    std::vector<bool> m;
    for (uint8_t b : mask) m.push_back(b);
    return m;
  }
  Tensor expand_grad(const Tensor& g) const { return expand_back(g, input.sizes(), reduced()); }
  std::vector<int64_t> dims() const {
    std::vector<int64_t> d;
    for (size_t i = 0; i < mask.size(); ++i)
      if (mask[i]) d.push_back(static_cast<int64_t>(i));
    return d;
  }
  // How many input elements fed each output element.
  int64_t count() const {
    int64_t n = 1;
    for (size_t d = 0; d < mask.size(); ++d)
      if (mask[d]) n *= input.shape[d];
    return n;
  }
};

}  // namespace

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad->shape == shape) return grad;
  int64_t lead = grad->dim() - static_cast<int64_t>(shape.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < lead; ++d) dims.push_back(d);
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 1 && grad->shape[lead + i] != 1) dims.push_back(lead + static_cast<int64_t>(i));
  Tensor r = dims.empty() ? grad : sum(grad, dims, true);
  return reshape(r, shape);
}

// ---- sum and mean (SumBackward0, MeanBackward0 over all elements; SumBackward1, MeanBackward1 over dims)
FG_NODE_UNNAMED(SumBackward, ReduceNode);
GradList SumBackward::apply(GradList&& grads) { return {expand_grad(grads[0])}; }

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, std::optional<DType> dtype) {
  std::vector<bool> mask = reduction_mask(dims, x->dim());
  DType out_dtype = dtype ? *dtype : is_floating(x->dtype) ? x->dtype : DType::Int64;
  Tensor src = to_dtype(x, out_dtype);
  const char* name = dims.empty() ? "SumBackward0" : "SumBackward1";
  if (compute_type(out_dtype) != out_dtype) {  // float16, bfloat16: summed in float32, as PyTorch
    Tensor out;
    {
      GradModeGuard no_grad(false);
      out = to_dtype(sum(src, dims, keepdim, compute_type(out_dtype)), out_dtype);
    }
    if (auto* node = record<SumBackward>(out, {&src}, name)) node->remember(src, mask, keepdim);
    return out;
  }
  Shape shape = reduced_shape(x->shape, mask, keepdim);
  Tensor out = dispatch(out_dtype, [&](auto tag) {
    using T = decltype(tag);
    std::vector<Acc<T>> acc(numel_of(shape), 0);
    bool done = false;
    if constexpr (std::is_floating_point_v<T>) done = vector_sum<T>(src, mask, acc);
    if (!done) visit_reduced<T>(src, mask, [&](int64_t o, int64_t, T v) { acc[o] = wrap_add(acc[o], Acc<T>(v)); });
    return store(acc, shape, out_dtype);
  });
  if (auto* node = record<SumBackward>(out, {&src}, name)) node->remember(x, mask, keepdim);
  return out;
}

FG_NODE_UNNAMED(MeanBackward, ReduceNode);
GradList MeanBackward::apply(GradList&& grads) { return {div(expand_grad(grads[0]), Scalar::from_int(count()))}; }

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  if (!is_floating(x->dtype))
    throw RuntimeError(cat("mean(): could not infer output dtype. Input dtype must be either a floating point or "
                           "complex dtype. Got: ",
                           scalar_type_name(x->dtype)));
  std::vector<bool> mask = reduction_mask(dims, x->dim());
  Tensor out;
  {
    GradModeGuard no_grad(false);
    // float16 and bfloat16 sum and divide in float32, as PyTorch (their sum alone may overflow)
    Tensor total = sum(x, dims, keepdim, compute_type(x->dtype));
    out = cast_values(div(total, Scalar::from_int(block_size(x, mask))), x->dtype);
  }
  if (auto* node = record<MeanBackward>(out, {&x}, dims.empty() ? "MeanBackward0" : "MeanBackward1"))
    node->remember(x, mask, keepdim);
  return out;
}

// ---- prod. Its gradient is, for each element, the product of the other elements of its block:
// an op of its own (a direct loop, so zeros in the input are handled exactly), whose node defines
// its derivative. Saves x.
FG_NODE_FROM(ProductOfOthersBackward0, ReduceNode);
namespace {
Tensor product_of_others(const Tensor& x, const std::vector<bool>& mask) {
  Tensor out = empty(x->shape, x->dtype);
  Shape shape, in_strides, out_strides;
  int64_t block = 1;
  for (int pass = 0; pass < 2; ++pass)
    for (int64_t d = 0; d < x->dim(); ++d)
      if (mask[d] == (pass == 1)) {
        shape.push_back(x->shape[d]);
        in_strides.push_back(x->strides[d]);
        out_strides.push_back(out->strides[d]);
        if (pass == 1) block *= x->shape[d];
      }
  dispatch_floating(x->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* in = x->data_as<T>();
    T* o = out->data_as<T>();
    std::vector<T> values(block);
    std::vector<int64_t> where(block);
    for_each_offset<2>(shape, {in_strides.data(), out_strides.data()},
                       [&](int64_t i, const std::array<int64_t, 2>& off) {
                         int64_t r = i % block;
                         values[r] = in[off[0]];
                         where[r] = off[1];
                         if (r != block - 1) return;
                         T prefix = 1;
                         for (int64_t k = 0; k < block; ++k) {  // o = product before k, then times product after k
                           o[where[k]] = prefix;
                           prefix *= values[k];
                         }
                         T suffix = 1;
                         for (int64_t k = block - 1; k >= 0; --k) {
                           o[where[k]] *= suffix;
                           suffix *= values[k];
                         }
                       });
  });
  if (auto* node = record<ProductOfOthersBackward0>(out, {&x})) {
    node->remember(x, mask, false);
    node->save(x);
  }
  return out;
}
}  // namespace

// d others_i / d x_j (i != j, one block) is the product of the elements other than i and j, so x's
// gradient is, at j, the sum over i != j of gg_i times that. With x's blocks as rows [kept, 1, block]:
// row j of with_one [kept, block, block] is the block with x_j set to 1, whose product_of_others is,
// at i != j, that product (and product_of_others differentiates itself again, to any order).
GradList ProductOfOthersBackward0::apply(GradList&& grads) {
  Tensor x = unpack(0);
  std::vector<bool> mask = reduced();
  std::vector<int64_t> order;  // kept dims, then reduced dims
  for (int pass = 0; pass < 2; ++pass)
    for (int64_t d = 0; d < x->dim(); ++d)
      if (mask[d] == (pass == 1)) order.push_back(d);
  Tensor grouped = permute(x, order);
  int64_t block = count(), kept = numel_of(reduced_shape(x->shape, mask, false));
  Tensor diagonal = compare(eye(block, block, DType::Int64), Scalar::from_int(1), CompareOp::Eq);
  Tensor with_one = where(diagonal, full({}, 1.0, x->dtype), reshape(grouped, {kept, 1, block}));
  Tensor others = product_of_others(with_one, {false, false, true});
  Tensor gg = reshape(permute(grads[0], order), {kept, 1, block});
  Tensor terms = where(diagonal, full({}, 0.0, x->dtype), mul(gg, others));
  std::vector<int64_t> back(order.size());
  for (size_t i = 0; i < order.size(); ++i) back[order[i]] = static_cast<int64_t>(i);
  return {permute(reshape(sum(terms, {2}, false), grouped->shape), back)};
}

// PyTorch's prod_backward, case by case, so that NaN and inf spread the same way: without zeros
// in the input, the gradient is result / x; with zeros, the product of the other elements of the
// block; and over all elements with two or more zeros, zeros outright (even for an infinite or NaN
// incoming gradient) unless in grad mode (create_graph), where the product of the others is needed
// for its own gradient, which is not zero. Over all elements, PyTorch takes the product of the
// others of the flattened input and views it back (ViewBackward0 in a create_graph gradient).
namespace {
GradList prod_backward(const ReduceNode& node, const Tensor& g, bool all_elements) {
  Tensor x = node.unpack(0), result = node.unpack(1);
  if (x->dim() == 0) return {g};
  int64_t zeros = static_cast<int64_t>(item(sum(compare(x, Scalar::from_int(0), CompareOp::Eq), {}, false)).value);
  if (zeros == 0) return {mul(node.expand_grad(g), div(node.expand_grad(result), x))};
  if (!all_elements) return {mul(node.expand_grad(g), product_of_others(x, node.reduced()))};
  if (zeros > 1 && !grad_enabled()) return {zeros_like(x)};
  return {view(mul(g, product_of_others(reshape(x, {x->numel()}), {true})), x->shape)};
}
}  // namespace

FG_NODE_FROM(ProdBackward0, ReduceNode);
GradList ProdBackward0::apply(GradList&& grads) { return prod_backward(*this, grads[0], true); }
FG_NODE_FROM(ProdBackward1, ReduceNode);
GradList ProdBackward1::apply(GradList&& grads) { return prod_backward(*this, grads[0], false); }

Tensor prod(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  std::vector<int64_t> dims;
  if (dim) dims.push_back(*dim);
  std::vector<bool> mask = reduction_mask(dims, x->dim());
  DType dtype = is_floating(x->dtype) ? x->dtype : DType::Int64;
  DType computed = compute_type(dtype);  // float16 and bfloat16 multiply in float32
  Tensor src = cast_values(x, computed);
  Shape shape = reduced_shape(x->shape, mask, dim && keepdim);
  Tensor products = dispatch(computed, [&](auto tag) {
    using T = decltype(tag);
    std::vector<Acc<T>> acc(numel_of(shape), 1);
    visit_reduced<T>(src, mask, [&](int64_t o, int64_t, T v) { acc[o] = wrap_mul(acc[o], Acc<T>(v)); });
    return store(acc, shape, computed);
  });
  Tensor out = cast_values(products, dtype);
  ReduceNode* node = dim ? static_cast<ReduceNode*>(record<ProdBackward1>(out, {&x}))
                         : static_cast<ReduceNode*>(record<ProdBackward0>(out, {&x}));
  if (node) {
    node->remember(x, mask, dim && keepdim);
    node->save(x);
    node->save(out, true);
  }
  return out;
}

// ---- var and std (with Bessel's correction by default, as PyTorch)
namespace {
Tensor deviations(const Tensor& x, const std::vector<int64_t>& dims) { return sub(x, mean(x, dims, true)); }
void require_floating(const Tensor& x, const char* op) {
  if (!is_floating(x->dtype))
    throw RuntimeError(cat(op, "(): input dtype should be either floating point or complex. Got ",
                           scalar_type_name(x->dtype), " instead."));
}
}  // namespace

struct VarNode : ReduceNode {
  double correction = 1;
  bool all = false;  // called without dims
  // Degrees of freedom: what the sum of squares is divided by. PyTorch's forward clamps it at 0.
  double dof() const { return static_cast<double>(count()) - correction; }
  // PyTorch's var_backward, given the gradient of the variance.
  Tensor var_grad(const Tensor& grad_var) const {
    Tensor x = unpack(0);
    Tensor d = deviations(x, dims());
    if (all && dof() <= 0) {
      // 2 / dof is infinite: NaN where x equals the mean (infinity * 0), infinity elsewhere.
      Tensor nan = full({}, std::numeric_limits<double>::quiet_NaN(), x->dtype);
      Tensor inf = full({}, std::numeric_limits<double>::infinity(), x->dtype);
      return mul(expand_grad(grad_var), where(compare(d, Scalar::from_int(0), CompareOp::Eq), nan, inf));
    }
    return mul(expand_grad(grad_var), mul(d, Scalar::from_float(2.0 / dof())));
  }
};

FG_NODE_FROM(VarBackward0, VarNode);
GradList VarBackward0::apply(GradList&& grads) { return {var_grad(grads[0])}; }

Tensor var(const Tensor& x, const std::vector<int64_t>& dims, double correction, bool keepdim) {
  require_floating(x, "var");
  std::vector<bool> mask = reduction_mask(dims, x->dim());
  Tensor out;
  {
    GradModeGuard no_grad(false);
    Tensor d = deviations(x, dims);
    double dof = std::max(0.0, static_cast<double>(block_size(x, mask)) - correction);
    out = div(sum(mul(d, d), dims, keepdim), Scalar::from_float(dof));
  }
  if (auto* node = record<VarBackward0>(out, {&x})) {
    node->remember(x, mask, keepdim);
    node->correction = correction;
    node->all = dims.empty() || x->dim() == 0;
    node->save(x);
  }
  return out;
}

// d std = d var / (2 std), taken as 0 where std == 0 (as PyTorch).
FG_NODE_FROM(StdBackward0, VarNode);
GradList StdBackward0::apply(GradList&& grads) {
  Tensor result = unpack(1);
  Tensor grad_var = div(grads[0], mul(result, Scalar::from_int(2)));
  return {var_grad(where(compare(result, Scalar::from_int(0), CompareOp::Eq), zeros_like(grad_var), grad_var))};
}

Tensor std(const Tensor& x, const std::vector<int64_t>& dims, double correction, bool keepdim) {
  require_floating(x, "std");
  std::vector<bool> mask = reduction_mask(dims, x->dim());
  Tensor out;
  {
    GradModeGuard no_grad(false);
    out = sqrt(var(x, dims, correction, keepdim));
  }
  if (auto* node = record<StdBackward0>(out, {&x})) {
    node->remember(x, mask, keepdim);
    node->correction = correction;
    node->all = dims.empty() || x->dim() == 0;
    node->save(x);
    node->save(out, true);
  }
  return out;
}

// ---- max / min. The value reductions spread the gradient evenly over tied extremes; the
// dim forms return (values, indices) and send the gradient to the index they report.
namespace {

template <class T>
bool beats(T v, T best, bool want_max) {
  if (best != best) return false;  // NaN already won
  if (v != v) return true;
  return want_max ? v > best : v < best;
}

// Values and (for each output element) the first position in its block that holds the extreme.
std::pair<Tensor, Tensor> extreme(const Tensor& x, const std::vector<bool>& mask, bool keepdim, bool want_max) {
  if (compute_type(x->dtype) != x->dtype) {  // a storage dtype: compared in its compute type, which orders alike
    auto [values, positions] = extreme(cast_values(x, compute_type(x->dtype)), mask, keepdim, want_max);
    return {cast_values(values, x->dtype), positions};
  }
  Shape shape = reduced_shape(x->shape, mask, keepdim);
  Tensor values = empty(shape, x->dtype), positions = empty(shape, DType::Int64);
  dispatch(x->dtype, [&](auto tag) {
    using T = decltype(tag);
    T* best = values->data_as<T>();
    int64_t* at = positions->data_as<int64_t>();
    visit_reduced<T>(x, mask, [&](int64_t o, int64_t r, T v) {
      if (r == 0 || beats(v, best[o], want_max)) {
        best[o] = v;
        at[o] = r;
      }
    });
  });
  return {values, positions};
}

std::vector<bool> single_dim_mask(const Tensor& x, int64_t dim) { return reduction_mask({dim}, x->dim()); }

}  // namespace

// amax/amin (AmaxBackward0, AminBackward0) and the all-element max/min (MaxBackward1,
// MinBackward1) split the gradient evenly among ties, each pair in its own way (split_among_ties).
FG_NODE_UNNAMED(AmaxAminBackward, ReduceNode);
FG_NODE_UNNAMED(MaxMinAllBackward, ReduceNode);
namespace {
// `all_elements` (max()/min(), as PyTorch's evenly_distribute_backward): a NaN result counts the
// NaN elements as its ties, and the other elements get exactly 0. amax/amin (PyTorch's
// scale_grad_by_count) multiply by the mask instead, so a NaN gradient or a NaN result spreads.
Tensor split_among_ties(const ReduceNode& node, const Tensor& g, bool all_elements) {
  Tensor x = node.unpack(0), out = node.expand_grad(node.unpack(1));
  Tensor hit = compare(x, out, CompareOp::Eq);
  if (all_elements) hit = logical_or(hit, logical_and(compare(x, x, CompareOp::Ne), compare(out, out, CompareOp::Ne)));
  Tensor is_extreme = to_dtype(hit, g->dtype);
  Tensor share = div(node.expand_grad(g), expand(sum(is_extreme, node.dims(), true), x->shape));
  return all_elements ? where(hit, share, zeros_like(share)) : mul(share, is_extreme);
}

template <class N>
Tensor record_extreme(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, bool want_max, const char* op,
                      const char* node_name) {
  for (int64_t dim : dims)  // each dim's size before repeated dims, as PyTorch checks
    require_nonempty(x, reduction_mask({dim}, x->dim()), op, false);
  std::vector<bool> mask = reduction_mask(dims, x->dim());
  require_nonempty(x, mask, op, dims.empty());
  Tensor out = extreme(x, mask, keepdim, want_max).first;
  if (auto* node = record<N>(out, {&x}, node_name)) {
    node->remember(x, mask, keepdim);
    node->save(x);
    node->save(out, true);
  }
  return out;
}
}  // namespace
GradList AmaxAminBackward::apply(GradList&& grads) { return {split_among_ties(*this, grads[0], false)}; }
GradList MaxMinAllBackward::apply(GradList&& grads) { return {split_among_ties(*this, grads[0], true)}; }

Tensor amax(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return record_extreme<AmaxAminBackward>(x, dims, keepdim, true, "amax", "AmaxBackward0");
}
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return record_extreme<AmaxAminBackward>(x, dims, keepdim, false, "amin", "AminBackward0");
}
Tensor max_all(const Tensor& x) { return record_extreme<MaxMinAllBackward>(x, {}, false, true, "max", "MaxBackward1"); }
Tensor min_all(const Tensor& x) {
  return record_extreme<MaxMinAllBackward>(x, {}, false, false, "min", "MinBackward1");
}

// max(x, dim) and min(x, dim) (MaxBackward0, MinBackward0). The indices (output 1) are saved,
// version-checked as in PyTorch.
FG_NODE_UNNAMED(MaxMinDimBackward, ReduceNode);
namespace {
// Gradient to the reported index only: a one-hot mask along the reduced dim.
Tensor to_index(const ReduceNode& node, const Tensor& g) {
  Shape in_shape = node.input.sizes();
  if (in_shape.empty()) return g;  // a 0-d input has no dim to scatter along: it is its own extreme
  int64_t dim = 0;
  while (!node.mask[dim]) ++dim;
  Shape along(in_shape.size(), 1);
  along[dim] = in_shape[dim];
  Tensor positions = reshape(arange(0, static_cast<double>(in_shape[dim]), 1, DType::Int64), along);
  Tensor hit = compare(positions, node.expand_grad(node.unpack(0)), CompareOp::Eq);
  Tensor spread = node.expand_grad(g);
  return where(hit, spread, zeros_like(spread));
}

std::pair<Tensor, Tensor> extreme_dim(const Tensor& x, int64_t dim, bool keepdim, bool want_max, const char* op) {
  std::vector<bool> mask = single_dim_mask(x, dim);
  require_nonempty(x, mask, op, false);
  auto [values, indices] = extreme(x, mask, keepdim, want_max);
  if (auto* node = record<MaxMinDimBackward>(values, {&x}, want_max ? "MaxBackward0" : "MinBackward0")) {
    node->remember(x, mask, keepdim);
    node->save(indices, true);
  }
  return {values, indices};
}
}  // namespace
GradList MaxMinDimBackward::apply(GradList&& grads) { return {to_index(*this, grads[0])}; }

std::pair<Tensor, Tensor> max_dim(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme_dim(x, dim, keepdim, true, "max");
}
std::pair<Tensor, Tensor> min_dim(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme_dim(x, dim, keepdim, false, "min");
}

namespace {
Tensor arg_extreme(const Tensor& x, std::optional<int64_t> dim, bool keepdim, bool want_max, const char* op) {
  if (x->dtype == DType::Bool) throw RuntimeError(cat(op, "(): does not support bool input"));
  if (!dim) {
    if (x->numel() == 0)  // IndexError here, where max() says RuntimeError: as PyTorch
      throw IndexError(cat(op, "(): Expected reduction dim to be specified for input.numel() == 0."));
    GradModeGuard no_grad(false);  // positions have no gradient: no node for the reshape
    Tensor flat = reshape(x, {-1});
    Tensor r = extreme(flat, {true}, false, want_max).second;
    return keepdim ? reshape(r, Shape(x->dim(), 1)) : r;
  }
  std::vector<bool> mask = single_dim_mask(x, *dim);
  require_nonempty(x, mask, op, false);
  return extreme(x, mask, keepdim, want_max).second;
}
}  // namespace
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme(x, dim, keepdim, true, "argmax");
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme(x, dim, keepdim, false, "argmin");
}

// ---- vector p-norm: d||x||/dx = x * |x|^(p-2) / ||x||^(p-1), 0 where the norm is 0.
struct NormNode : ReduceNode {
  double p = 2;
};
FG_NODE_FROM(LinalgVectorNormBackward0, NormNode);
// The cases of PyTorch's norm_backward, with its limits at zeros: p = 0 has no gradient; for p < 1
// a zero element gets none; for p > 1 a zero norm gives none; ±inf splits among the elements of
// largest (smallest) magnitude, NaNs included.
GradList LinalgVectorNormBackward0::apply(GradList&& grads) {
  Tensor x = unpack(0), n = expand_grad(unpack(1)), g = expand_grad(grads[0]);
  if (p == 0) return {Tensor()};
  // The masks apply where PyTorch applies them, so an infinite or NaN gradient spreads the same way.
  auto zero_where = [](const Tensor& cond, const Tensor& t) { return where(cond, zeros_like(t), t); };
  if (std::isinf(p)) {
    Tensor ax = abs(x);
    Tensor hit = to_dtype(logical_or(compare(ax, n, CompareOp::Eq), compare(ax, ax, CompareOp::Ne)), x->dtype);
    Tensor ties = expand(sum(hit, dims(), true), x->shape);
    return {mul(sign(x), mul(div(g, ties), hit))};
  }
  if (p == 1) return {mul(sign(x), g)};
  if (p == 2)
    return {mul(g, zero_where(compare(n, Scalar::from_int(0), CompareOp::Eq), div(x, n)))};  // PyTorch's own case
  if (p < 1) {
    Tensor part = zero_where(compare(x, Scalar::from_int(0), CompareOp::Eq), pow(abs(x), Scalar::from_float(p - 1)));
    return {mul(mul(mul(sign(x), part), g), pow(n, Scalar::from_float(1 - p)))};
  }
  Tensor part =
      p < 2 ? mul(sign(x), pow(abs(x), Scalar::from_float(p - 1))) : mul(x, pow(abs(x), Scalar::from_float(p - 2)));
  return {
      mul(part, zero_where(compare(n, Scalar::from_int(0), CompareOp::Eq), div(g, pow(n, Scalar::from_float(p - 1)))))};
}

Tensor norm(const Tensor& x, double p, const std::vector<int64_t>& dims, bool keepdim) {
  require_floating(x, "linalg.vector_norm");
  std::vector<bool> mask = reduction_mask(dims, x->dim());
  if (p < 0 || std::isinf(p)) {  // no identity: every reduced block must have an element
    std::string what = std::isinf(p) ? (p > 0 ? "inf" : "-inf") : cat(p);
    if (dims.empty() && x->numel() == 0)
      throw RuntimeError(cat("linalg.vector_norm cannot compute the ", what,
                             " norm on an empty tensor because the "
                             "operation does not have an identity"));
    for (int64_t d = 0; d < x->dim(); ++d)
      if (mask[d] && x->shape[d] == 0)
        throw RuntimeError(cat("linalg.vector_norm cannot compute the ", what, " norm on the dimension ", d,
                               "because this dimension is empty and the operation does not have an identity"));
  }
  Tensor out;
  {
    GradModeGuard no_grad(false);
    if (std::isinf(p)) out = p > 0 ? amax(abs(x), dims, keepdim) : amin(abs(x), dims, keepdim);
    else if (p == 0) out = sum(to_dtype(compare(x, Scalar::from_int(0), CompareOp::Ne), x->dtype), dims, keepdim);
    else if (p == 2) out = sqrt(sum(mul(x, x), dims, keepdim));
    else out = pow(sum(pow(abs(x), Scalar::from_float(p)), dims, keepdim), Scalar::from_float(1.0 / p));
  }
  if (auto* node = record<LinalgVectorNormBackward0>(out, {&x})) {
    node->remember(x, mask, keepdim);
    node->p = p;
    node->save(x);
    node->save(out, true);
  }
  return out;
}

}  // namespace fg
