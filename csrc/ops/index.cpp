// Advanced indexing (index tensors and masks) and Python's x[key] / x[key] = v on top of the views.
#include <algorithm>
#include <cstring>

#include "autograd/node.h"
#include "core/numeric.h"
#include "core/shape.h"
#include "kernels/loops.h"
#include "ops/ops.h"

namespace fg {

namespace {

// Bool masks become int64 coordinates of their true elements: one index tensor per mask dim.
std::vector<Tensor> masks_to_indices(const Tensor& x, const std::vector<Tensor>& indices) {
  std::vector<Tensor> out;
  for (const Tensor& idx : indices) {
    if (!idx || idx->dtype != DType::Bool) {
      if (idx && idx->dtype != DType::Int64 && idx->dtype != DType::Int32)
        throw IndexError("tensors used as indices must be long, int, byte or bool tensors");
      out.push_back(idx && idx->dtype == DType::Int32 ? to_dtype(idx, DType::Int64) : idx);
      continue;
    }
    int64_t first = static_cast<int64_t>(out.size());
    for (int64_t d = 0; d < idx->dim(); ++d) {
      if (first + d >= x->dim() || idx->shape[d] != x->shape[first + d])
        throw IndexError(cat("The shape of the mask ", shape_str(idx->shape), " at index ", d,
                             " does not match the shape of the indexed tensor ", shape_str(x->shape), " at index ",
                             first + d));
    }
    Tensor mask = contiguous(idx);
    std::vector<std::vector<int64_t>> coords(idx->dim());
    const bool* m = mask->data_as<bool>();
    Shape strides = contiguous_strides(idx->shape);
    for (int64_t i = 0, n = mask->numel(); i < n; ++i)
      if (m[i])
        for (int64_t d = 0; d < idx->dim(); ++d) coords[d].push_back(i / strides[d] % idx->shape[d]);
    for (auto& c : coords) {
      Tensor t = empty({static_cast<int64_t>(c.size())}, DType::Int64);
      std::copy(c.begin(), c.end(), t->data_as<int64_t>());
      out.push_back(t);
    }
  }
  return out;
}

// Where x[indices] reads from: for each position b of the broadcast index shape, an element offset
// into x; the non-indexed dims are walked with their own strides. The result is laid out as
// [index dims..., other dims...] and permuted into PyTorch's order (index dims stay in place when
// the indexed dims are adjacent, else they go first).
struct IndexPlan {
  Shape index_shape;
  Shape rest_shape, rest_strides;
  std::vector<int64_t> offsets;
  Shape out_shape;
  std::vector<int64_t> to_out;  // permutation from the [index..., rest...] layout to out_shape
  Shape gathered_shape() const {
    Shape s = index_shape;
    s.insert(s.end(), rest_shape.begin(), rest_shape.end());
    return s;
  }
};

IndexPlan plan_index(const Tensor& x, const std::vector<Tensor>& raw) {
  std::vector<Tensor> indices = masks_to_indices(x, raw);
  if (static_cast<int64_t>(indices.size()) > x->dim())
    throw IndexError(cat("too many indices for tensor of dimension ", x->dim()));
  indices.resize(x->dim());
  IndexPlan plan;
  std::vector<int64_t> indexed;
  bool first = true;
  for (int64_t d = 0; d < x->dim(); ++d) {
    if (!indices[d]) continue;
    indexed.push_back(d);
    if (first) plan.index_shape = indices[d]->shape;
    else {
      try {
        plan.index_shape = broadcast_shapes(plan.index_shape, indices[d]->shape);
      } catch (const RuntimeError&) {
        std::string shapes;
        for (const Tensor& i : indices)
          if (i) shapes += (shapes.empty() ? "" : ", ") + shape_str(i->shape);
        throw IndexError(cat("shape mismatch: indexing tensors could not be broadcast together with shapes ", shapes));
      }
    }
    first = false;
  }
  plan.offsets.assign(numel_of(plan.index_shape), 0);
  // As PyTorch, indices are checked only when something is read: an empty result takes any.
  int64_t rest = 1;
  for (int64_t d = 0; d < x->dim(); ++d)
    if (!indices[d]) rest *= x->shape[d];
  for (int64_t d : indexed) {
    const Tensor& idx = indices[d];
    Shape strides = broadcast_strides(idx, plan.index_shape);
    const int64_t* v = idx->data_as<int64_t>();
    int64_t size = x->shape[d];
    for_each_offset<1>(plan.index_shape, {strides.data()}, [&](int64_t i, const std::array<int64_t, 1>& o) {
      int64_t k = v[o[0]];
      if ((k < -size || k >= size) && rest > 0)
        throw IndexError(size == 0 ? std::string("index is out of bounds for dimension with size 0")
                                   : cat("index ", k, " is out of bounds for dimension ", d, " with size ", size));
      plan.offsets[i] += (k < 0 ? k + size : k) * x->strides[d];
    });
  }
  int64_t before = 0;  // rest dims that precede the index dims in the output
  bool adjacent = indexed.empty() || indexed.back() - indexed.front() + 1 == static_cast<int64_t>(indexed.size());
  for (int64_t d = 0; d < x->dim(); ++d) {
    if (indices[d]) continue;
    plan.rest_shape.push_back(x->shape[d]);
    plan.rest_strides.push_back(x->strides[d]);
    if (adjacent && !indexed.empty() && d < indexed.front()) ++before;
  }
  int64_t nb = static_cast<int64_t>(plan.index_shape.size()), nr = static_cast<int64_t>(plan.rest_shape.size());
  for (int64_t i = 0; i < before; ++i) plan.to_out.push_back(nb + i);
  for (int64_t i = 0; i < nb; ++i) plan.to_out.push_back(i);
  for (int64_t i = before; i < nr; ++i) plan.to_out.push_back(nb + i);
  Shape gathered = plan.gathered_shape();
  for (int64_t p : plan.to_out) plan.out_shape.push_back(gathered[p]);
  return plan;
}

// Visits (position in the gathered layout, element offset into x) for every element x[indices] reads.
template <class F>
void visit_plan(const IndexPlan& plan, F&& f) {
  int64_t rest = numel_of(plan.rest_shape);
  for (size_t b = 0; b < plan.offsets.size(); ++b)
    for_each_offset<1>(plan.rest_shape, {plan.rest_strides.data()}, [&](int64_t r, const std::array<int64_t, 1>& o) {
      f(static_cast<int64_t>(b) * rest + r, plan.offsets[b] + o[0]);
    });
}

std::vector<int64_t> inverse(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
  return inv;
}

// Writes `values` (broadcast to the indexing result) into self[indices]; no autograd.
void scatter_values(const Tensor& self, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate) {
  IndexPlan plan = plan_index(self, indices);
  GradModeGuard no_grad(false);
  Tensor v;
  try {
    v = expand(to_dtype(values, self->dtype), plan.out_shape);
  } catch (const RuntimeError&) {
    throw RuntimeError(cat("shape mismatch: value tensor of shape ", shape_str(values->shape),
                           " cannot be broadcast to indexing result of shape ", shape_str(plan.out_shape)));
  }
  Tensor gathered = contiguous(permute(v, inverse(plan.to_out)));
  dispatch_stored(self->dtype, [&](auto tag) {
    using T = decltype(tag);
    T* dst = self->data_as<T>();
    const T* src = gathered->data_as<T>();
    visit_plan(plan, [&](int64_t i, int64_t off) {
      if (!accumulate) dst[off] = src[i];
      else if constexpr (is_half_v<T>) dst[off] = T::from_float(dst[off].to_float() + src[i].to_float());
      else dst[off] = static_cast<T>(wrap_add(dst[off], src[i]));
    });
  });
}

// A node that keeps index tensors (and masks) for backward: they are its saved tensors, one per
// index (not defined for a None). As PyTorch, they are version-checked like any saved tensor:
// changing one in place makes backward fail.
struct IndexingNode : Node {
  void save_indices(const std::vector<Tensor>& indices) {
    for (const Tensor& idx : indices) save(idx);
  }
  std::vector<Tensor> unpack_indices() const {
    std::vector<Tensor> out;
    for (size_t i = 0; i < saved.size(); ++i) out.push_back(saved[i].defined() ? unpack(i) : Tensor());
    return out;
  }
};

// x[mask] = v with a one-element v: PyTorch runs it as masked_fill_ with v's value, which makes no
// memory-overlap check. Otherwise index_put_ may not read (values or indices) what it writes.
void check_index_put_overlap(const Tensor& self, const std::vector<Tensor>& indices, const Tensor& values);
bool fills_through_mask(const std::vector<Tensor>& indices, const Tensor& value) {
  int defined = 0;
  bool mask = false;
  for (const Tensor& idx : indices)
    if (idx) {
      ++defined;
      mask = idx->dtype == DType::Bool;
    }
  return value->numel() == 1 && defined == 1 && mask;
}

void check_index_put_overlap(const Tensor& self, const std::vector<Tensor>& indices, const Tensor& values) {
  if (fills_through_mask(indices, values)) return;
  assert_no_overlap(self, values);
  for (const Tensor& idx : indices)
    if (idx) assert_no_overlap(self, idx);
}

// index_put_ (unlike a copy, or masked_fill_ with a one-element value) does not convert dtypes.
void check_index_put_dtype(const Tensor& self, const std::vector<Tensor>& indices, const Tensor& values) {
  if (values->dtype != self->dtype && !fills_through_mask(indices, values))
    throw RuntimeError(cat("Index put requires the source and destination dtypes match, got ",
                           scalar_type_name(self->dtype), " for the destination and ", scalar_type_name(values->dtype),
                           " for the source."));
}

struct IndexNode : IndexingNode {
  InputMeta input;
};

}  // namespace

FG_NODE_FROM(IndexBackward0, IndexNode);
GradList IndexBackward0::apply(GradList&& grads) {
  return {index_put_(zeros(input.sizes(), input.dtype), unpack_indices(), grads[0], true)};
}

Tensor index(const Tensor& x, const std::vector<Tensor>& indices) {
  IndexPlan plan = plan_index(x, indices);
  Tensor gathered = empty(plan.gathered_shape(), x->dtype);
  dispatch_stored(x->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* src = x->data_as<T>();
    T* dst = gathered->data_as<T>();
    visit_plan(plan, [&](int64_t i, int64_t off) { dst[i] = src[off]; });
  });
  Tensor out;
  {
    GradModeGuard no_grad(false);
    out = clone(permute(gathered, plan.to_out));
  }
  if (auto* node = record<IndexBackward0>(out, {&x})) {
    node->input = InputMeta::of(x);
    node->save_indices(indices);
  }
  return out;
}

struct EmbeddingNode : Node {
  InputMeta weight;
  int64_t padding_row = -1;
  bool scale_grad_by_freq = false;
};
FG_NODE_FROM(EmbeddingBackward0, EmbeddingNode);
GradList EmbeddingBackward0::apply(GradList&& grads) {
  Tensor flat = reshape(unpack(0), {-1});
  Tensor g = reshape(grads[0], {flat->numel(), weight.sizes()[1]});
  if (scale_grad_by_freq) {
    Tensor counts = bincount(flat, std::nullopt, weight.sizes()[0]);
    g = div(g, unsqueeze(to_dtype(index(counts, {flat}), g->dtype), 1));
  }
  if (padding_row >= 0) {
    Tensor is_padding = unsqueeze(compare(flat, Scalar::from_int(padding_row), CompareOp::Eq), 1);
    g = where(is_padding, zeros({}, g->dtype), g);
  }
  return {index_put_(zeros(weight.sizes(), weight.dtype), {flat}, g, true)};
}

namespace {

// The rows of the 2-D weight that `indices` (int64 or int32) name, laid out as indices.shape +
// [columns]: a copy per row, where index() plans a general gather, then permutes and clones its
// result (3.3 -> ~1 us for a tiny GPT's 32 tokens). Checks the range first, with PyTorch's
// messages in its order (F.embedding's own checks were two reductions and two reads: ~2.5 us).
template <class I>
Tensor gather_rows(const Tensor& weight, const Tensor& indices) {
  const Tensor flat = dense(indices);
  const I* rows = flat->data_as<I>();
  const int64_t count = flat->numel(), height = weight->shape[0];
  if (count && !height) throw RuntimeError("index_select(): self indexing axis dim should be positive");
  for (int64_t i = 0; i < count; ++i)
    if (rows[i] < 0 || rows[i] >= height) throw IndexError("index out of range in self");
  Shape out_shape = indices->shape;
  out_shape.push_back(weight->shape[1]);
  Tensor out = empty(out_shape, weight->dtype);
  const int64_t columns = weight->shape[1], item = static_cast<int64_t>(itemsize(weight->dtype));
  const int64_t row_stride = weight->strides[0] * item, column_stride = weight->strides[1] * item;
  const char* src = weight->data();
  char* dst = out->data();
  for (int64_t i = 0; i < count; ++i, dst += columns * item) {
    const char* row = src + static_cast<int64_t>(rows[i]) * row_stride;
    if (column_stride == item || columns <= 1) {
      std::memcpy(dst, row, static_cast<size_t>(columns * item));
    } else {
      for (int64_t j = 0; j < columns; ++j) std::memcpy(dst + j * item, row + j * column_stride, item);
    }
  }
  return out;
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_row, bool scale_grad_by_freq) {
  if (weight->dim() != 2) throw RuntimeError("'weight' must be 2-D");
  if (indices->dtype != DType::Int64 && indices->dtype != DType::Int32)
    throw RuntimeError(cat("Expected tensor for argument #1 'indices' to have one of the following scalar types: ",
                           "Long, Int; but got ", c_type_name(indices->dtype), " instead"));
  Tensor out =
      indices->dtype == DType::Int64 ? gather_rows<int64_t>(weight, indices) : gather_rows<int32_t>(weight, indices);
  if (auto* node = record<EmbeddingBackward0>(out, {&weight})) {
    node->weight = InputMeta::of(weight);
    node->padding_row = padding_row;
    node->scale_grad_by_freq = scale_grad_by_freq;
    node->save(indices);
  }
  return out;
}

struct IndexPutNode : IndexNode {
  InputMeta values;
  bool accumulate = false;  // then self's elements all stay in the result: its gradient passes whole
};
FG_NODE_FROM(IndexPutBackward0, IndexPutNode);
GradList IndexPutBackward0::apply(GradList&& grads) {
  const Tensor& g = grads[0];
  std::vector<Tensor> where = unpack_indices();
  GradList out(2);
  if (needs_input_grad(0)) out[0] = accumulate ? g : index_put_(clone(g), where, zeros({}, g->dtype), false);
  if (needs_input_grad(1)) out[1] = to_dtype(sum_to(index(g, where), values.sizes()), values.dtype);
  return out;
}

Tensor index_put_(const Tensor& self, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate) {
  check_inplace(self, &values);
  if (accumulate) assert_no_overlap(self, values);
  else check_index_put_overlap(self, indices, values);
  check_index_put_dtype(self, indices, values);
  Edge self_edge = gradient_edge(self), values_edge = gradient_edge(values);
  bool recording = should_record({&self, &values}) && is_floating(self->dtype);
  scatter_values(self, indices, values, accumulate);
  self->bump_version();
  if (recording) {
    auto* node = make_inplace_node<IndexPutBackward0>(std::move(self_edge), std::move(values_edge));
    node->input = InputMeta::of(self);
    node->values = InputMeta::of(values);
    node->accumulate = accumulate;
    node->save_indices(indices);
    rebase_history(self, {NodeRef(node), 0});
  }
  return self;
}

// ---- x[key] and x[key] = value
namespace {
// The value as PyTorch's x[key] = value hands it to copy_ (whose overlap check compares strides):
// as is if the shapes match, else without its leading size-1 dims and expanded, where PyTorch's
// expand gives a new size-1 dim the stride of the dims after it.
Tensor as_copied_by_setitem(const Tensor& value, const Shape& shape) {
  if (value->shape == shape) return value;
  Shape vs = value->shape, vst = value->strides;
  while (!vs.empty() && vs.front() == 1) {
    vs.erase(vs.begin());
    vst.erase(vst.begin());
  }
  int64_t n = static_cast<int64_t>(shape.size()), lead = n - static_cast<int64_t>(vs.size());
  if (lead < 0) return value;  // expand will fail with its own message
  Shape strides(n, 0);
  for (int64_t i = n - 1; i >= 0; --i) {
    if (i >= lead) strides[i] = vs[i - lead] == shape[i] ? vst[i - lead] : 0;
    else if (!vs.empty() && shape[i] == 1) strides[i] = i + 1 < n ? shape[i + 1] * strides[i + 1] : 1;
  }
  return make_view(value, shape, strides, value->offset);
}

Tensor apply_steps(const Tensor& x, const std::vector<IndexStep>& steps) {
  Tensor t = x;
  for (const IndexStep& s : steps) {
    switch (s.kind) {
      case IndexStep::Select: t = select(t, s.dim, s.index); break;
      case IndexStep::Slice: t = slice(t, s.dim, s.start, s.stop, s.step); break;
      case IndexStep::Unsqueeze: t = unsqueeze(t, s.dim); break;
    }
  }
  return t;
}
}  // namespace

Tensor getitem(const Tensor& x, const IndexSpec& spec) {
  Tensor view = apply_steps(x, spec.steps);
  if (spec.advanced.empty()) return view.get() == x.get() ? alias_view(x) : view;
  return index(view, spec.advanced);
}

// x[key] = value is, as in PyTorch, an in-place write into the region x[key'] (key' = the key's
// ints, slices and Nones: a view of x): a copy, or with index tensors an index_put_ into it. This
// node is that write's backward: the overwritten part gets no gradient, the value gets its
// gradient (summed back to its shape). Its history lands on x's base through rebase_history.
struct CopySlicesNode : IndexingNode {  // saves the advanced indices (over the region)
  InputMeta value;
};
FG_NODE_NAMED(IndexCopySlices, CopySlicesNode, "torch::autograd::CopySlices");
GradList IndexCopySlices::apply(GradList&& grads) {
  const Tensor& g = grads[0];
  IndexSpec spec{{}, unpack_indices()};
  GradList out(2);
  if (needs_input_grad(0)) {
    out[0] = clone(g);
    if (spec.advanced.empty()) zero_(out[0]);
    else index_put_(out[0], spec.advanced, zeros({}, g->dtype), false);
  }
  if (needs_input_grad(1)) out[1] = to_dtype(sum_to(getitem(g, spec), value.sizes()), value.dtype);
  return out;
}

void setitem(const Tensor& self, const IndexSpec& spec, const Tensor& value) {
  Tensor region = apply_steps(self, spec.steps);  // first, as PyTorch: a bad slice is reported before the rest
  check_inplace(region, &value);
  Edge region_edge = gradient_edge(region), value_edge = gradient_edge(value);
  bool recording = should_record({&region, &value}) && is_floating(self->dtype);
  {
    GradModeGuard no_grad(false);
    // PyTorch's checks: a copy (basic indexing) may not write memory twice nor read memory it
    // partly writes; index_put_ (advanced) may not read memory it writes at all.
    if (spec.advanced.empty()) {
      assert_no_internal_overlap(region);
      if (value->dim() > 0) assert_no_partial_overlap(region, as_copied_by_setitem(value, region->shape));
    } else {
      check_index_put_overlap(region, spec.advanced, value);
      check_index_put_dtype(region, spec.advanced, value);
    }
    // What may still share memory (x[...] = x, or layouts too irregular to judge) is read first.
    Tensor source = value->storage->data() == self->storage->data() ? clone(value) : value;
    if (spec.advanced.empty()) copy_values(region, expand(source, region->shape));
    else scatter_values(region, spec.advanced, source, false);
  }
  region->bump_version();
  if (recording) {
    auto* node = make_inplace_node<IndexCopySlices>(std::move(region_edge), std::move(value_edge));
    node->value = InputMeta::of(value);
    node->save_indices(spec.advanced);
    rebase_history(region, {NodeRef(node), 0});
  }
}

}  // namespace fg

// ---- along one dim: gather and scatter. Element i of `index` (as many dims as self) names the
// position index[i] along `dim`; its other coordinates are i's own. The shared layer composes
// index_select, index_add, index_copy, index_fill and take_along_dim over these, with the index
// expanded along the other dims; `name` is the node PyTorch shows for the op so composed.
namespace fg {
namespace {

// A 0-d tensor takes part as a 1-d one of one element (PyTorch mixes 0-d and 1-d here).
Shape sizes_1d(const Tensor& t) { return t->dim() ? t->shape : Shape{1}; }
Shape strides_1d(const Tensor& t) { return t->dim() ? t->strides : Shape{1}; }

// PyTorch's checks before anything is read or written: the index's shape (it may not be larger than
// `along` in a dim other than `dim`, nor than `src` in any) and every index in [0, size).
void check_along_dim(const Tensor& along, int64_t dim, const Tensor& index, const Tensor* src) {
  if (index->dtype != DType::Int64) throw RuntimeError("gather(): Expected dtype int32/int64 for index");
  Shape shape = sizes_1d(along), index_shape = sizes_1d(index), src_shape = src ? sizes_1d(*src) : Shape();
  if (index_shape.size() != shape.size() || (src && src_shape.size() != shape.size()))
    throw RuntimeError("Index tensor must have the same number of dimensions as self tensor");
  for (size_t d = 0; d < shape.size(); ++d) {
    bool too_large =
        (static_cast<int64_t>(d) != dim && index_shape[d] > shape[d]) || (src && index_shape[d] > src_shape[d]);
    if (too_large && src)
      throw RuntimeError(cat("Expected index ", shape_str(index->shape), " to be no larger than self ",
                             shape_str(along->shape), " apart from dimension ", dim,
                             " and to be no larger size than src ", shape_str((*src)->shape)));
    if (too_large)
      throw RuntimeError(cat("Size does not match at dimension ", d, " expected index ", shape_str(index->shape),
                             " to be no larger than self ", shape_str(along->shape), " apart from dimension ", dim));
  }
  int64_t size = shape[dim];
  const int64_t* idx = index->data_as<int64_t>();
  for_each_offset<1>(index->shape, {index->strides.data()}, [&](int64_t, const std::array<int64_t, 1>& o) {
    int64_t k = idx[o[0]];
    if (k < 0 || k >= size)
      throw RuntimeError(cat("index ", k, " is out of bounds for dimension ", dim, " with size ", size));
  });
}

// Calls f(offset into `along` that index element i names, offset into `other` at i's coordinates)
// for every element of the (checked) index, in row-major order: repeated targets are visited in a
// fixed order, so accumulations do not depend on anything else.
template <class F>
void for_each_along(const Tensor& along, int64_t dim, const Tensor& index, const Tensor& other, F&& f) {
  Shape along_strides = strides_1d(along), index_strides = strides_1d(index), other_strides = strides_1d(other);
  int64_t stride = along_strides[dim];
  along_strides[dim] = 0;
  const int64_t* idx = index->data_as<int64_t>();
  for_each_offset<3>(sizes_1d(index), {index_strides.data(), along_strides.data(), other_strides.data()},
                     [&](int64_t, const std::array<int64_t, 3>& o) { f(o[1] + idx[o[0]] * stride, o[2]); });
}

struct AlongDimNode : Node {
  InputMeta input, src;
  int64_t dim = 0;
  ScatterReduce reduce = ScatterReduce::None;
  const char* refused = nullptr;  // the PyTorch op with no derivative this node stands for, if any
};

}  // namespace

FG_NODE_UNNAMED(GatherBackward, AlongDimNode);  // GatherBackward0, IndexSelectBackward0
GradList GatherBackward::apply(GradList&& grads) {
  if (saved[1].defined()) unpack(1);  // only its version matters
  return {
      scatter_(zeros(input.sizes(), input.dtype), dim, unpack(0), grads[0], ScatterReduce::Add, "ScatterAddBackward0")};
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index, const char* name, const Tensor& checked) {
  dim = wrap_dim(dim, x->dim());
  check_along_dim(x, dim, index, nullptr);
  Tensor out = empty(index->shape, x->dtype);
  dispatch_stored(x->dtype, [&](auto tag) {  // moves elements: every dtype as stored
    using T = decltype(tag);
    const T* src = x->data_as<T>();
    T* dst = out->data_as<T>();
    for_each_along(x, dim, index, out, [&](int64_t from, int64_t to) { dst[to] = src[from]; });
  });
  if (auto* node = record<GatherBackward>(out, {&x}, name)) {
    node->input = InputMeta::of(x);
    node->dim = dim;
    node->save(index);
    node->save(checked);
  }
  return out;
}

// ScatterBackward0/1, ScatterAddBackward0, IndexAddBackward0, IndexCopyBackward0, IndexFillBackward0/1,
// and scatter with reduce= (PyTorch's NotImplemented).
// A write (reduce None) leaves no gradient where it wrote; an accumulation passes self's on whole.
FG_NODE_UNNAMED(ScatterBackward, AlongDimNode);
GradList ScatterBackward::apply(GradList&& grads) {
  const Tensor& g = grads[0];
  Tensor index = unpack(0);
  GradList out(2);
  if (refused) throw RuntimeError(cat("derivative for ", refused, " is not implemented"));
  if (needs_input_grad(0))
    out[0] = reduce == ScatterReduce::Add ? g
                                          : scatter_(clone(g), dim, index, expand(zeros({}, g->dtype), index->shape),
                                                     ScatterReduce::None, "ScatterBackward1");
  if (needs_input_grad(1)) {
    // src's gradient has index's shape: PyTorch's engine refuses it where src is larger.
    if (index->shape != src.sizes())
      throw RuntimeError(cat("Function ", name(), " returned an invalid gradient at index 1 - got ",
                             shape_str(index->shape), " but expected shape compatible with ", shape_str(src.sizes())));
    out[1] = gather(g, dim, index, "GatherBackward0");
  }
  return out;
}

Tensor scatter_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, ScatterReduce reduce,
                const char* name) {
  dim = wrap_dim(dim, self->dim());
  check_along_dim(self, dim, index, &src);
  if (src->dtype != self->dtype) throw RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype");
  check_inplace(self, &src);
  assert_no_internal_overlap(self);
  assert_no_overlap(self, src);
  assert_no_overlap(self, index);
  Edge self_edge = gradient_edge(self), src_edge = gradient_edge(src);
  bool recording = should_record({&self, &src}) && is_floating(self->dtype);
  if (reduce == ScatterReduce::None) {
    dispatch_stored(self->dtype, [&](auto tag) {  // moves elements: every dtype as stored
      using T = decltype(tag);
      T* dst = self->data_as<T>();
      const T* from = src->data_as<T>();
      for_each_along(self, dim, index, src, [&](int64_t to, int64_t at) { dst[to] = from[at]; });
    });
  } else {
    dispatch(self->dtype, [&](auto tag) {  // arithmetic: the compute dtypes only
      using T = decltype(tag);
      T* dst = self->data_as<T>();
      const T* from = src->data_as<T>();
      auto combine = [reduce](T a, T b) -> T {
        switch (reduce) {
          case ScatterReduce::Add: return static_cast<T>(wrap_add(a, b));
          case ScatterReduce::Multiply: return static_cast<T>(wrap_mul(a, b));
          case ScatterReduce::Amax: return b != b ? b : std::max(a, b);  // std::max keeps a NaN a
          default: return b != b ? b : std::min(a, b);
        }
      };
      for_each_along(self, dim, index, src, [&](int64_t to, int64_t at) { dst[to] = combine(dst[to], from[at]); });
    });
  }
  self->bump_version();
  if (recording) {
    // An "aten::<op>" name is an op PyTorch records with a node that refuses backward.
    bool refused = std::strncmp(name, "aten::", 6) == 0;
    auto* node = make_inplace_node<ScatterBackward>(std::move(self_edge), std::move(src_edge),
                                                    refused ? "torch::autograd::NotImplemented" : name);
    node->refused = refused ? name : nullptr;
    node->input = InputMeta::of(self);
    node->src = InputMeta::of(src);
    node->dim = dim;
    node->reduce = reduce;
    node->save(index);
    rebase_history(self, {NodeRef(node), 0});
  }
  return self;
}

}  // namespace fg
