// Shape ops. All but cat/stack are views: they share the input's storage and only change shape,
// strides and offset; their backward maps the gradient back to the input's geometry.
#include <algorithm>
#include <functional>

#include "autograd/node.h"
#include "core/shape.h"
#include "kernels/loops.h"
#include "ops/ops.h"

namespace fg {

namespace {

// Resolves a single -1 and checks the element count.
Shape infer_shape(const Shape& requested, int64_t numel) {
  Shape shape = requested;
  int64_t known = 1, infer_at = -1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1) {
      if (infer_at >= 0) throw RuntimeError("only one dimension can be inferred");
      infer_at = static_cast<int64_t>(d);
    } else if (shape[d] < 0) {
      throw RuntimeError(
          cat("invalid shape dimension ", shape[d], " at index ", d, " of shape ", shape_str(requested)));
    } else if (__builtin_mul_overflow(known, shape[d], &known)) {
      throw RuntimeError("numel: integer multiplication overflow");  // as PyTorch; a wrapped count could match
    }
  }
  bool ok = infer_at >= 0 ? known != 0 && numel % known == 0 : known == numel;
  if (!ok) throw RuntimeError(cat("shape '", shape_str(requested), "' is invalid for input of size ", numel));
  if (infer_at >= 0) shape[infer_at] = numel / known;
  return shape;
}

// Strides that let `x`'s memory be read with `shape`, if there are any: each run of input dims
// that is contiguous in memory may be regrouped freely.
std::optional<Shape> view_strides(const Tensor& x, const Shape& shape) {
  if (x->is_contiguous() || x->numel() == 0) return contiguous_strides(shape);
  const Shape& old_shape = x->shape;
  const Shape& old_strides = x->strides;
  Shape strides(shape.size());
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base = old_strides.back(), tensor_numel = 1, view_numel = 1;
  for (int64_t d = x->dim() - 1; d >= 0; --d) {
    tensor_numel *= old_shape[d];
    bool chunk_ends = d == 0 || (old_shape[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
      strides[view_d] = view_numel * chunk_base;
      view_numel *= shape[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) {
      chunk_base = old_strides[d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return strides;
}

// The gradient of a view that selects part of its input: zeros except where the view looked.
Tensor scatter_into_zeros(const InputMeta& input, const Tensor& g,
                          const std::function<Tensor(const Tensor&)>& view_of) {
  Tensor full_grad = zeros(input.sizes(), g->dtype);
  GradModeGuard no_grad(false);
  copy_values(view_of(full_grad), g);
  return full_grad;
}

}  // namespace

// ---- view / reshape / flatten. The gradient of every view that keeps the elements in order is
// reshaped to the input's shape: ViewBackward0, UnsafeViewBackward0 (the reshape at the end of
// matmul), SqueezeBackward0/1/2 (no dims, one dim, dims) and UnsqueezeBackward0.
struct ReshapeNode : Node {
  InputMeta input;
};
FG_NODE_UNNAMED(ReshapeBackward, ReshapeNode);
GradList ReshapeBackward::apply(GradList&& grads) { return {reshape(grads[0], input.sizes())}; }

Tensor view(const Tensor& x, const Shape& requested) {
  Shape shape = infer_shape(requested, x->numel());
  auto strides = view_strides(x, shape);
  if (!strides)
    throw RuntimeError(
        "view size is not compatible with input tensor's size and stride (at least one dimension spans across two "
        "contiguous subspaces). Use .reshape(...) instead.");
  Tensor out = make_differentiable_view(x, shape, *strides, x->offset);
  if (auto* node = record<ReshapeBackward>(out, {&x}, "ViewBackward0")) node->input = InputMeta::of(x);
  return out;
}

// As PyTorch's _unsafe_view: shares x's memory but is not a view for autograd (x is an
// intermediate nobody else sees), so an in-place write to the result rewrites its own history.
Tensor unsafe_view(const Tensor& x, const Shape& shape) {
  Tensor out;
  {
    GradModeGuard no_grad(false);
    out = reshape(x, shape);
  }
  out->view_base.reset();
  out->view_tracks_history = false;
  if (auto* node = record<ReshapeBackward>(out, {&x}, "UnsafeViewBackward0")) node->input = InputMeta::of(x);
  return out;
}

Tensor reshape(const Tensor& x, const Shape& requested) {
  Shape shape = infer_shape(requested, x->numel());
  if (view_strides(x, shape)) return view(x, shape);
  return unsafe_view(clone(x), shape);  // as PyTorch: the copy is nobody else's, so not a view
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  int64_t start = wrap_dim(start_dim, x->dim()), end = wrap_dim(end_dim, x->dim());
  if (start > end) throw RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim");
  if (x->dim() == 0) return reshape(x, {1});
  if (start == end) return x;
  Shape shape(x->shape.begin(), x->shape.begin() + start);
  int64_t merged = 1;
  for (int64_t d = start; d <= end; ++d) merged *= x->shape[d];
  shape.push_back(merged);
  shape.insert(shape.end(), x->shape.begin() + end + 1, x->shape.end());
  return reshape(x, shape);
}

// ---- expand
struct ExpandBackward0 final : Node {
  FG_NODE_MEMBERS(ExpandBackward0)
  InputMeta input;
};
GradList ExpandBackward0::apply(GradList&& grads) { return {sum_to(grads[0], input.sizes())}; }

Tensor expand(const Tensor& x, const Shape& requested) {
  if (static_cast<int64_t>(requested.size()) < x->dim())
    throw RuntimeError(cat("expand(torch.FloatTensor{", shape_str(x->shape), "}, size=", shape_str(requested),
                           "): the number of sizes provided (", requested.size(),
                           ") must be greater or equal to the number of dimensions in the tensor (", x->dim(), ")"));
  size_t lead = requested.size() - x->shape.size();
  Shape shape(requested.size()), strides(requested.size(), 0);
  for (size_t d = 0; d < requested.size(); ++d) {
    if (d < lead) {
      if (requested[d] < 0)
        throw RuntimeError(cat("The expanded size of the tensor (", requested[d],
                               ") isn't allowed in a leading, non-existing dimension ", d));
      shape[d] = requested[d];
      continue;
    }
    int64_t have = x->shape[d - lead];
    int64_t want = requested[d] == -1 ? have : requested[d];
    if (want < 0) throw RuntimeError(cat("The expanded size of the tensor (", want, ") isn't allowed"));
    if (have != want && have != 1)
      throw RuntimeError(cat("The expanded size of the tensor (", want, ") must match the existing size (", have,
                             ") at non-singleton dimension ", d, ".  Target sizes: ", shape_str(requested),
                             ".  Tensor sizes: ", shape_str(x->shape)));
    shape[d] = want;
    strides[d] = have == want ? x->strides[d - lead] : 0;
  }
  // Even to x's own shape: a new view, as PyTorch (x.expand_as(x) is not x).
  Tensor out = make_differentiable_view(x, shape, strides, x->offset);
  if (auto* node = record<ExpandBackward0>(out, {&x})) node->input = InputMeta::of(x);
  return out;
}

// ---- permute / transpose / t
struct PermuteBackward0 final : Node {
  FG_NODE_MEMBERS(PermuteBackward0)
  Shape dims;
};
GradList PermuteBackward0::apply(GradList&& grads) {
  std::vector<int64_t> inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) inverse[dims[i]] = static_cast<int64_t>(i);
  return {permute(grads[0], inverse)};
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  if (static_cast<int64_t>(dims.size()) != x->dim())
    throw RuntimeError(cat("permute(sparse_coo): number of dimensions in the tensor input does not match the length of "
                           "the desired ordering of dimensions i.e. input.dim() = ",
                           x->dim(), " is not equal to len(dims) = ", dims.size()));
  Shape shape, strides;
  std::vector<bool> seen(x->dim(), false);
  Shape wrapped;
  for (int64_t dim : dims) {
    int64_t d = wrap_dim(dim, x->dim());
    if (x->dim() == 0) continue;
    if (seen[d]) throw RuntimeError("permute(): duplicate dims are not allowed.");
    seen[d] = true;
    wrapped.push_back(d);
    shape.push_back(x->shape[d]);
    strides.push_back(x->strides[d]);
  }
  Tensor out = make_differentiable_view(x, shape, strides, x->offset);
  if (auto* node = record<PermuteBackward0>(out, {&x})) node->dims = wrapped;
  return out;
}

namespace {
Tensor swap_dims(const Tensor& x, int64_t d0, int64_t d1) {
  Shape shape = x->shape, strides = x->strides;
  std::swap(shape[d0], shape[d1]);
  std::swap(strides[d0], strides[d1]);
  return make_differentiable_view(x, shape, strides, x->offset);
}
}  // namespace

struct TransposeBackward0 final : Node {
  FG_NODE_MEMBERS(TransposeBackward0)
  int64_t dim0 = 0, dim1 = 0;
};
GradList TransposeBackward0::apply(GradList&& grads) { return {transpose(grads[0], dim0, dim1)}; }

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  int64_t d0 = wrap_dim(dim0, x->dim()), d1 = wrap_dim(dim1, x->dim());
  Tensor out = x->dim() == 0 ? make_differentiable_view(x, x->shape, x->strides, x->offset) : swap_dims(x, d0, d1);
  if (auto* node = record<TransposeBackward0>(out, {&x})) {
    node->dim0 = d0;
    node->dim1 = d1;
  }
  return out;
}

FG_NODE(TBackward0);
GradList TBackward0::apply(GradList&& grads) { return {t(grads[0])}; }

Tensor t(const Tensor& x) {
  if (x->dim() > 2) throw RuntimeError(cat("t() expects a tensor with <= 2 dimensions, but self is ", x->dim(), "D"));
  Tensor out = x->dim() == 2 ? swap_dims(x, 0, 1) : make_differentiable_view(x, x->shape, x->strides, x->offset);
  record<TBackward0>(out, {&x});
  return out;
}

// ---- squeeze / unsqueeze (their backward: ReshapeBackward)

Tensor squeeze(const Tensor& x, std::optional<std::vector<int64_t>> dims, bool dim_sequence) {
  std::vector<bool> drop(x->dim(), !dims);
  if (dims) reduction_mask(*dims, x->dim());  // checks the dims: in range, none twice
  if (dims)
    for (int64_t dim : *dims) {
      int64_t d = wrap_dim(dim, x->dim());
      if (x->dim() > 0) drop[d] = true;
    }
  Shape shape, strides;
  for (int64_t d = 0; d < x->dim(); ++d)
    if (!(drop[d] && x->shape[d] == 1)) {
      shape.push_back(x->shape[d]);
      strides.push_back(x->strides[d]);
    }
  Tensor out = make_differentiable_view(x, shape, strides, x->offset);
  const char* name = !dims ? "SqueezeBackward0" : dim_sequence ? "SqueezeBackward2" : "SqueezeBackward1";
  if (auto* node = record<ReshapeBackward>(out, {&x}, name)) node->input = InputMeta::of(x);
  return out;
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  int64_t d = wrap_dim(dim, x->dim() + 1);
  Shape shape = x->shape, strides = x->strides;
  int64_t stride = d < x->dim() ? x->shape[d] * x->strides[d] : 1;
  shape.insert(shape.begin() + d, 1);
  strides.insert(strides.begin() + d, stride);
  Tensor out = make_differentiable_view(x, shape, strides, x->offset);
  if (auto* node = record<ReshapeBackward>(out, {&x}, "UnsqueezeBackward0")) node->input = InputMeta::of(x);
  return out;
}

// ---- slice / select (the views behind basic indexing). Their gradients scatter into zeros: ops
// of their own, recorded in a backward with create_graph; being linear in the gradient, their own
// gradient is the view again.
struct SliceBackwardBackward0 final : Node {
  FG_NODE_MEMBERS(SliceBackwardBackward0)
  int64_t dim = 0, start = 0, stop = 0, step = 1;
};
GradList SliceBackwardBackward0::apply(GradList&& grads) { return {slice(grads[0], dim, start, stop, step)}; }

struct SliceBackward0 final : Node {
  FG_NODE_MEMBERS(SliceBackward0)
  InputMeta input;
  int64_t dim = 0, start = 0, stop = 0, step = 1;
};
GradList SliceBackward0::apply(GradList&& grads) {
  const Tensor& g = grads[0];
  Tensor out = scatter_into_zeros(input, g, [&](const Tensor& full) { return slice(full, dim, start, stop, step); });
  if (auto* node = record<SliceBackwardBackward0>(out, {&g})) {
    node->dim = dim;
    node->start = start;
    node->stop = stop;
    node->step = step;
  }
  return {out};
}

Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step) {
  if (x->dim() == 0) throw IndexError("slice() cannot be applied to a 0-dim tensor.");
  int64_t d = wrap_dim(dim, x->dim());
  if (step <= 0) throw ValueError("step must be greater than zero");
  int64_t size = x->shape[d];
  auto clamp_index = [size](int64_t i) { return std::clamp(i < 0 ? i + size : i, int64_t{0}, size); };
  int64_t lo = start ? clamp_index(*start) : 0;
  int64_t hi = stop ? clamp_index(*stop) : size;
  int64_t len = hi > lo ? (hi - lo - 1) / step + 1 : 0;  // written so a huge step cannot overflow
  Shape shape = x->shape, strides = x->strides;
  shape[d] = len;
  strides[d] = wrap_mul(x->strides[d], step);  // a huge step (x[::2**62]) only matters when len <= 1
  Tensor out = make_differentiable_view(x, shape, strides, x->offset + lo * x->strides[d]);
  if (auto* node = record<SliceBackward0>(out, {&x})) {
    node->input = InputMeta::of(x);
    node->dim = d;
    node->start = lo;
    node->stop = hi;
    node->step = step;
  }
  return out;
}

struct SelectBackwardBackward0 final : Node {
  FG_NODE_MEMBERS(SelectBackwardBackward0)
  int64_t dim = 0, index = 0;
};
GradList SelectBackwardBackward0::apply(GradList&& grads) { return {select(grads[0], dim, index)}; }

struct SelectBackward0 final : Node {
  FG_NODE_MEMBERS(SelectBackward0)
  InputMeta input;
  int64_t dim = 0, index = 0;
};
GradList SelectBackward0::apply(GradList&& grads) {
  const Tensor& g = grads[0];
  Tensor out = scatter_into_zeros(input, g, [&](const Tensor& full) { return select(full, dim, index); });
  if (auto* node = record<SelectBackwardBackward0>(out, {&g})) {
    node->dim = dim;
    node->index = index;
  }
  return {out};
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  if (x->dim() == 0)
    throw IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` in C++ to "
                     "convert a 0-dim tensor to a number");
  int64_t d = wrap_dim(dim, x->dim());
  int64_t size = x->shape[d];
  if (index < -size || index >= size)
    throw IndexError(cat("index ", index, " is out of bounds for dimension ", d, " with size ", size));
  int64_t i = index < 0 ? index + size : index;
  Shape shape = x->shape, strides = x->strides;
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  Tensor out = make_differentiable_view(x, shape, strides, x->offset + i * x->strides[d]);
  if (auto* node = record<SelectBackward0>(out, {&x})) {
    node->input = InputMeta::of(x);
    node->dim = d;
    node->index = i;
  }
  return out;
}

// ---- split / unbind: views of x, the outputs of one node (SplitBackward0, SplitWithSizesBackward0,
// UnbindBackward0) whose gradient joins the parts' gradients back, zeros for a part that got none.
// As in PyTorch, parts with that history may not be written in place: one node cannot stand for a
// write into one of its outputs (their errors say so: ViewOrigin::MultiOutputNode).

struct PartsBackward final : Node {
  GradList apply(GradList&& grads) override;
  uint32_t num_outputs() const override { return static_cast<uint32_t>(sizes.size()); }
  InputMeta input;
  int64_t dim = 0;
  std::vector<int64_t> sizes;  // each part's extent along dim
  bool unbound = false;        // unbind's parts: without dim, joined by stack
};

GradList PartsBackward::apply(GradList&& grads) {
  std::vector<Tensor> parts;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (grads[i]) {
      parts.push_back(grads[i]);
      continue;
    }
    Shape shape = input.shape;
    if (unbound) {
      shape.erase(shape.begin() + dim);
    } else {
      shape[dim] = sizes[i];
    }
    parts.push_back(zeros(shape, input.dtype));
  }
  return {unbound ? stack(parts, dim) : cat(parts, dim)};
}

namespace {

// Makes `parts` (views of x along `dim`) the outputs of one node named `name`, if x's history is
// recorded. Parts made in grad mode are such outputs even when nothing is recorded (PyTorch's
// CreationMeta MULTI_OUTPUT_NODE): an in-place write that involves gradients is refused all the same.
void record_parts(const Tensor& x, const std::vector<Tensor>& parts, const char* name, int64_t dim,
                  std::vector<int64_t> sizes, bool unbound) {
  if (!grad_enabled()) return;
  for (const Tensor& part : parts) {
    part->view_tracks_history = false;
    part->view_origin = ViewOrigin::MultiOutputNode;
  }
  if (!should_record({&x})) return;
  for (const Tensor& part : parts) check_differentiable_output(part);
  NodeRef node(make_node<PartsBackward>(name));
  auto* parts_node = static_cast<PartsBackward*>(node.get());
  parts_node->next_edges.push_back(gradient_edge(x));
  parts_node->input = InputMeta::of(x);
  parts_node->dim = dim;
  parts_node->sizes = std::move(sizes);
  parts_node->unbound = unbound;
  for (size_t i = 0; i < parts.size(); ++i) {
    parts[i]->grad_fn = node;
    parts[i]->output_nr = static_cast<uint32_t>(i);
  }
}

}  // namespace

std::vector<Tensor> split_with_sizes(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim, bool with_sizes) {
  if (x->dim() == 0) throw RuntimeError("split expects at least a 1-dimensional tensor");
  const int64_t d = wrap_dim(dim, x->dim());
  int64_t total = 0;
  for (int64_t n : sizes) {
    if (n < 0 || __builtin_add_overflow(total, n, &total)) total = -1;
    if (total < 0) break;
  }
  if (total != x->shape[d])
    throw RuntimeError(cat("split_with_sizes expects split_sizes to sum exactly to ", x->shape[d],
                           " (input tensor's size at dimension ", d, "), but got split_sizes=", shape_str(sizes)));
  std::vector<Tensor> parts;
  int64_t start = 0;
  for (int64_t n : sizes) {
    Shape shape = x->shape;
    shape[d] = n;
    parts.push_back(make_differentiable_view(x, shape, x->strides, x->offset + start * x->strides[d]));
    start += n;
  }
  record_parts(x, parts, with_sizes ? "SplitWithSizesBackward0" : "SplitBackward0", d, sizes, false);
  return parts;
}

std::vector<Tensor> unbind(const Tensor& x, int64_t dim) {
  if (x->dim() == 0) throw IndexError("Dimension specified as 0 but tensor has no dimensions");
  const int64_t d = wrap_dim(dim, x->dim());
  Shape shape = x->shape, strides = x->strides;
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  std::vector<Tensor> parts;
  for (int64_t i = 0; i < x->shape[d]; ++i)
    parts.push_back(make_differentiable_view(x, shape, strides, x->offset + i * x->strides[d]));
  record_parts(x, parts, "UnbindBackward0", d, std::vector<int64_t>(parts.size(), 1), true);
  return parts;
}

// ---- diagonal: a view whose last dim steps along two of the input's dims at once
struct DiagonalBackwardBackward0 final : Node {
  FG_NODE_MEMBERS(DiagonalBackwardBackward0)
  int64_t offset = 0, dim1 = 0, dim2 = 1;
};
GradList DiagonalBackwardBackward0::apply(GradList&& grads) { return {diagonal(grads[0], offset, dim1, dim2)}; }

struct DiagonalBackward0 final : Node {
  FG_NODE_MEMBERS(DiagonalBackward0)
  InputMeta input;
  int64_t offset = 0, dim1 = 0, dim2 = 1;
};
GradList DiagonalBackward0::apply(GradList&& grads) {
  const Tensor& g = grads[0];
  Tensor out = scatter_into_zeros(input, g, [&](const Tensor& full) { return diagonal(full, offset, dim1, dim2); });
  if (auto* node = record<DiagonalBackwardBackward0>(out, {&g})) {
    node->offset = offset;
    node->dim1 = dim1;
    node->dim2 = dim2;
  }
  return {out};
}

Tensor diagonal(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) {
  int64_t d1 = wrap_dim(dim1, x->dim()), d2 = wrap_dim(dim2, x->dim());
  if (d1 == d2) throw RuntimeError(cat("diagonal dimensions cannot be identical ", dim1, ", ", dim2));
  int64_t rows = x->shape[d1], cols = x->shape[d2];
  // written so that no offset can overflow: an empty diagonal starts at the input's offset
  int64_t len = 0, start = 0;
  if (offset >= 0 && offset < cols) {
    len = std::min(rows, cols - offset);
    start = offset * x->strides[d2];
  } else if (offset < 0 && offset > -rows) {
    len = std::min(rows + offset, cols);
    start = -offset * x->strides[d1];
  }
  Shape shape, strides;
  for (int64_t d = 0; d < x->dim(); ++d) {
    if (d == d1 || d == d2) continue;
    shape.push_back(x->shape[d]);
    strides.push_back(x->strides[d]);
  }
  shape.push_back(len);
  strides.push_back(x->strides[d1] + x->strides[d2]);
  Tensor out = make_differentiable_view(x, shape, strides, x->offset + (len ? start : 0));
  if (auto* node = record<DiagonalBackward0>(out, {&x})) {
    node->input = InputMeta::of(x);
    node->offset = offset;
    node->dim1 = d1;
    node->dim2 = d2;
  }
  return out;
}

// ---- unfold: the windows of `size` elements, `step` apart, along one dim, as a new last dim of a
// view. Windows overlap when step < size, so the gradient adds rather than copies: window offset j
// of every window is one strided slice of the input (size additions, not one per window).
struct UnfoldBackwardBackward0 final : Node {
  FG_NODE_MEMBERS(UnfoldBackwardBackward0)
  int64_t dim = 0, size = 0, step = 1;
};
GradList UnfoldBackwardBackward0::apply(GradList&& grads) { return {unfold(grads[0], dim, size, step)}; }

struct UnfoldBackward0 final : Node {
  FG_NODE_MEMBERS(UnfoldBackward0)
  InputMeta input;
  int64_t dim = 0, size = 0, step = 1;
};
GradList UnfoldBackward0::apply(GradList&& grads) {
  const Tensor& g = grads[0];
  Tensor out = zeros(input.sizes(), g->dtype);
  {
    GradModeGuard no_grad(false);
    Tensor target = out->dim() == 0 ? reshape(out, {1}) : out;  // a 0-d input unfolds as one element
    int64_t windows = out->dim() == 0 ? 1 : g->shape[dim];
    for (int64_t j = 0; j < size && windows > 0; ++j) {
      Tensor at_offset = slice(target, dim, j, j + (windows - 1) * step + 1, step);
      copy_values(at_offset, add(at_offset, select(g, -1, j)));
    }
  }
  if (auto* node = record<UnfoldBackwardBackward0>(out, {&g})) {
    node->dim = dim;
    node->size = size;
    node->step = step;
  }
  return {out};
}

Tensor unfold(const Tensor& x, int64_t dimension, int64_t size, int64_t step) {
  int64_t d = wrap_dim(dimension, x->dim());
  int64_t length = x->dim() == 0 ? 1 : x->shape[d];
  if (size > length)
    throw RuntimeError(cat("maximum size for tensor at dimension ", d, " is ", length, " but size is ", size));
  if (size < 0) throw RuntimeError(cat("size is ", size, " but must be >= 0"));
  if (step <= 0) throw RuntimeError(cat("step is ", step, " but must be > 0"));
  Shape shape = x->shape, strides = x->strides;
  if (x->dim() > 0) {
    shape[d] = (length - size) / step + 1;
    strides[d] = wrap_mul(x->strides[d], step);
  }
  shape.push_back(size);
  strides.push_back(x->dim() == 0 ? 1 : x->strides[d]);
  Tensor out = make_differentiable_view(x, shape, strides, x->offset);
  if (auto* node = record<UnfoldBackward0>(out, {&x})) {
    node->input = InputMeta::of(x);
    node->dim = d;
    node->size = size;
    node->step = step;
  }
  return out;
}

Tensor alias_view(const Tensor& x) {
  Tensor out = make_differentiable_view(x, x->shape, x->strides, x->offset);
  record<IdentityBackward>(out, {&x}, "AliasBackward0");
  return out;
}

// ---- as_strided (internal): the regenerated history of a view after an in-place write
struct AsStridedNode : Node {
  Shape shape, strides;
  int64_t offset = 0;
};
// The gradient of as_strided, an op of its own (recorded under create_graph); linear in the
// gradient, so its own gradient is the view again.
FG_NODE_FROM(AsStridedBackwardBackward0, AsStridedNode);
GradList AsStridedBackwardBackward0::apply(GradList&& grads) {
  return {as_strided(contiguous(grads[0]), shape, strides, offset)};
}

struct AsStridedBackward0 final : AsStridedNode {
  FG_NODE_MEMBERS(AsStridedBackward0)
  InputMeta input;
};
// Each gradient element is added at the memory position its view element reads: the view may be
// an expanded one, whose elements share memory, and then their gradients sum.
GradList AsStridedBackward0::apply(GradList&& grads) {
  const Tensor& g = grads[0];
  Tensor full = zeros(input.sizes(), g->dtype);
  dispatch_floating(g->dtype, [&](auto tag) {
    using T = decltype(tag);
    T* dst = full->data_as<T>() + offset;
    const T* src = g->data_as<T>();
    for_each_offset<2>(g->shape, {strides.data(), g->strides.data()},
                       [&](int64_t, const std::array<int64_t, 2>& o) { dst[o[0]] += src[o[1]]; });
  });
  if (auto* node = record<AsStridedBackwardBackward0>(full, {&g})) {
    node->shape = shape;
    node->strides = strides;
    node->offset = offset;
  }
  return {full};
}

Tensor as_strided(const Tensor& x, const Shape& shape, const Shape& strides, int64_t offset) {
  // The geometry is relative to x's own layout, which is only meaningful when x is dense.
  if (!x->is_contiguous()) throw RuntimeError("as_strided expects a contiguous tensor");
  Tensor out = make_differentiable_view(x, shape, strides, x->offset + offset);
  if (auto* node = record<AsStridedBackward0>(out, {&x})) {
    node->input = InputMeta::of(x);
    for (int64_t v : shape) node->shape.push_back(v);
    for (int64_t v : strides) node->strides.push_back(v);
    node->offset = offset;
  }
  return out;
}

// ---- cat / stack: new tensors; the gradient is cut back into one piece per input.
struct JoinNode : Node {
  int64_t dim = 0;
  std::vector<InputMeta> inputs;
};

FG_NODE_FROM(CatBackward0, JoinNode);
GradList CatBackward0::apply(GradList&& grads) {
  GradList out;
  int64_t at = 0;
  for (const InputMeta& in : inputs) {
    if (in.shape.size() == 1 && in.shape[0] == 0) {  // a skipped legacy empty input
      out.push_back(zeros(in.sizes(), in.dtype));
      continue;
    }
    int64_t len = in.shape[dim];
    out.push_back(to_dtype(slice(grads[0], dim, at, at + len, 1), in.dtype));
    at += len;
  }
  return out;
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  if (tensors.empty()) throw ValueError("torch.cat(): expected a non-empty list of Tensors");
  // PyTorch still accepts (and skips) 1-D empty tensors next to tensors of any rank.
  auto skipped = [](const Tensor& t) { return t->dim() == 1 && t->shape[0] == 0; };
  const Tensor* ref = &tensors[0];
  for (const Tensor& t : tensors)
    if (!skipped(t)) {
      ref = &t;
      break;
    }
  if ((*ref)->dim() == 0) throw RuntimeError("zero-dimensional tensor (at position 0) cannot be concatenated");
  int64_t d = wrap_dim(dim, (*ref)->dim());
  DType dtype = tensors[0]->dtype;
  Shape shape = (*ref)->shape;
  shape[d] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    dtype = promote(dtype, t->dtype);
    if (skipped(t)) continue;
    if (t->dim() != (*ref)->dim())
      throw RuntimeError(cat("Tensors must have same number of dimensions: got ", (*ref)->dim(), " and ", t->dim()));
    for (int64_t k = 0; k < t->dim(); ++k)
      if (k != d && t->shape[k] != (*ref)->shape[k])
        throw RuntimeError(cat("Sizes of tensors must match except in dimension ", d, ". Expected size ",
                               (*ref)->shape[k], " but got size ", t->shape[k], " for tensor number ", i,
                               " in the list."));
    shape[d] += t->shape[d];
  }
  Tensor out = empty(shape, dtype);
  int64_t at = 0;
  for (const Tensor& t : tensors) {
    if (skipped(t)) continue;
    GradModeGuard no_grad(false);
    copy_values(slice(out, d, at, at + t->shape[d], 1), t);
    at += t->shape[d];
  }
  if (auto* node = record_many<CatBackward0>(out, tensors)) {
    node->dim = d;
    for (const Tensor& t : tensors) node->inputs.push_back(InputMeta::of(t));
  }
  return out;
}

FG_NODE_FROM(StackBackward0, JoinNode);
GradList StackBackward0::apply(GradList&& grads) {
  GradList out;
  for (size_t i = 0; i < inputs.size(); ++i)
    out.push_back(to_dtype(select(grads[0], dim, static_cast<int64_t>(i)), inputs[i].dtype));
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  if (tensors.empty()) throw RuntimeError("stack expects a non-empty TensorList");
  int64_t d = wrap_dim(dim, tensors[0]->dim() + 1);  // before the sizes, as PyTorch checks
  for (size_t i = 1; i < tensors.size(); ++i)
    if (tensors[i]->shape != tensors[0]->shape)
      throw RuntimeError(cat("stack expects each tensor to be equal size, but got ", shape_str(tensors[0]->shape),
                             " at entry 0 and ", shape_str(tensors[i]->shape), " at entry ", i));
  Tensor out;
  {
    GradModeGuard no_grad(false);
    std::vector<Tensor> parts;
    for (const Tensor& t : tensors) parts.push_back(unsqueeze(t, d));
    out = cat(parts, d);
  }
  if (auto* node = record_many<StackBackward0>(out, tensors)) {
    node->dim = d;
    for (const Tensor& t : tensors) node->inputs.push_back(InputMeta::of(t));
  }
  return out;
}

// ---- in-place shape ops (t_, transpose_, squeeze_, unsqueeze_): self takes the geometry of its
// out-of-place view and that view's node as its history, shown under PyTorch's name for the in-place
// op. The values are unchanged, so, as PyTorch, no CopySlices: a view's base keeps its history, and
// only the shared version moves on (the other views of the base get their history remade).
namespace {
template <class ViewOf>
Tensor restride_(const Tensor& self, const char* node_name, ViewOf view_of) {
  check_inplace(self);
  Tensor view = view_of(self);
  self->shape = view->shape;
  self->strides = view->strides;
  self->bump_version();
  if (view->grad_fn) {
    view->grad_fn->rename(node_name);
    // Not set_history: as PyTorch, a retain_grad() stays with the old node (self.grad is then the
    // gradient of the values before the op, in their old shape).
    self->grad_fn = view->grad_fn;
    self->output_nr = 0;
  }
  if (self->view_base) self->view_version = self->version();  // its history describes the new geometry
  return self;
}
}  // namespace

Tensor t_(const Tensor& self) {
  return restride_(self, "TBackward1", [](const Tensor& s) {
    if (s->dim() > 2)
      throw RuntimeError(cat("t_() expects a tensor with <= 2 dimensions, but self is ", s->dim(), "D"));
    return t(s);
  });
}
Tensor transpose_(const Tensor& self, int64_t dim0, int64_t dim1) {
  return restride_(self, "TransposeBackward1", [&](const Tensor& s) { return transpose(s, dim0, dim1); });
}
Tensor squeeze_(const Tensor& self, std::optional<std::vector<int64_t>> dims, bool dim_sequence) {
  const char* name = !dims ? "SqueezeBackward3" : dim_sequence ? "SqueezeBackward5" : "SqueezeBackward4";
  return restride_(self, name, [&](const Tensor& s) { return squeeze(s, dims, dim_sequence); });
}
Tensor unsqueeze_(const Tensor& self, int64_t dim) {
  return restride_(self, "UnsqueezeBackward1", [&](const Tensor& s) { return unsqueeze(s, dim); });
}

}  // namespace fg
