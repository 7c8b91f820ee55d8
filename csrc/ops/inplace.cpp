// In-place ops. Arithmetic ones run their out-of-place op (which records the usual node) and write
// the result back, so self's new grad_fn is that node; ops that replace the values outright (fill_,
// zero_, copy_) record a node that cuts the gradient to the old values. Every write bumps the
// storage's version, which is how a stale saved tensor is detected in backward.
#include "autograd/node.h"
#include "core/shape.h"
#include "ops/ops.h"

namespace fg {

void retain_output(const Tensor& t) {
  auto& slots = t->grad_fn->retained_outputs;
  if (slots.size() <= t->output_nr) slots.resize(t->output_nr + 1);
  slots[t->output_nr] = t;
}

void set_history(const Tensor& t, NodeRef fn, uint32_t output_nr) {
  if (t->retains_grad && t->grad_fn) {
    auto& slots = t->grad_fn->retained_outputs;
    if (t->output_nr < slots.size()) slots[t->output_nr].reset();
  }
  t->grad_fn = std::move(fn);
  t->output_nr = output_nr;
  if (t->retains_grad) retain_output(t);
}

namespace {
// PyTorch's error for a view without history (made under no_grad, or a view of one: then it names
// the view's grad_fn; or returned by a custom Function; or a part of split/unbind) that `what` ("is
// being" / "its base or another view of its base has been") modified in place.
std::string view_without_history_error(const Tensor& view, const char* what) {
  if (view->view_origin == ViewOrigin::MultiOutputNode)
    return cat(view->grad_fn
                   ? cat("Output ", view->output_nr, " of ", producer_name(view->grad_fn->name()), " is a view and ",
                         what, " modified inplace.")
                   : cat("A view was created in no_grad mode and ", what, " modified inplace with grad mode enabled."),
               " This view is the output of a function that returns multiple views. Such functions do not allow the "
               "output views to be modified inplace. You should replace the inplace operation by an out-of-place one.");
  if (view->view_origin == ViewOrigin::CustomFunction && view->grad_fn)
    return cat("Output ", view->output_nr, " of ", producer_name(view->grad_fn->name()), " is a view and ", what,
               " modified inplace. This view was created inside a custom Function (or because an input was returned "
               "as-is) and the autograd logic to handle view+inplace would override the custom backward associated "
               "with the custom Function, leading to incorrect gradients. This behavior is forbidden. You can fix "
               "this by cloning the output of the custom Function.");
  std::string subject = "A view was created in";
  if (view->grad_fn)
    subject = cat("Output ", view->output_nr, " of ", producer_name(view->grad_fn->name()),
                  " is a view of a view which was created in");
  return cat(subject, " no_grad mode and ", what,
             " modified inplace with grad mode enabled. Given that this use case is ambiguous and error-prone, it is "
             "forbidden. You can clarify your code by moving both the view and the inplace either both inside the "
             "no_grad block (if you don't want the inplace to be tracked) or both outside (if you want the inplace to "
             "be tracked).");
}
}  // namespace

void refresh_view_history(const Tensor& self) {
  if (!self->history_stale()) return;
  if (!self->view_tracks_history)
    throw RuntimeError(view_without_history_error(self, "its base or another view of its base has been"));
  Tensor fresh;
  {
    GradModeGuard enable(true);
    fresh = as_strided(self->view_base, self->shape, self->strides, self->offset - self->view_base->offset);
  }
  set_history(self, fresh->grad_fn, 0);
  self->view_version = self->version();
}

// The checks autograd makes before an in-place write (leaves, views made under no_grad).
static void check_inplace_autograd(const Tensor& self, const Tensor* source) {
  // A view made under no_grad kept no history to write through: as PyTorch, no guessing whether the
  // write should reach its base's gradient.
  if (self->view_base && !self->view_tracks_history &&
      (self->requires_grad() || (source && (*source)->requires_grad())))
    throw RuntimeError(view_without_history_error(self, "is being"));
  refresh_view_history(self);
  if (self->is_leaf() && self->requires_grad_leaf)
    throw RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.");
  const Tensor& base = self->view_base;
  if (base && base->is_leaf() && base->requires_grad_leaf)
    throw RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.");
}

void check_inplace(const Tensor& self, const Tensor* source) {
  if (grad_enabled()) check_inplace_autograd(self, source);
  if (self->storage->inference() && !inference_mode_enabled())
    throw RuntimeError(
        "Inplace update to inference tensor outside InferenceMode is not allowed.You can make a clone to get a normal "
        "tensor before doing inplace update.See https://github.com/pytorch/rfcs/pull/17 for more details.");
}

// The base's new value is its old value with the view's region replaced by the in-place result:
// the old value gets the gradient outside the region, the result node the gradient inside it.
struct ViewRegionNode : Node {
  InputMeta base;
  Shape shape, strides;
  int64_t offset = 0;
  // A view, recorded in a backward with create_graph: zeroing it in place then records too.
  Tensor region(const Tensor& full) const { return as_strided(full, shape, strides, offset); }
};
FG_NODE_NAMED(CopySlices, ViewRegionNode, "torch::autograd::CopySlices");
GradList CopySlices::apply(GradList&& grads) {
  const Tensor& g = grads[0];
  GradList out(2);
  if (needs_input_grad(0)) {
    out[0] = clone(g);
    Tensor r = region(out[0]);
    // As PyTorch's CopySlices, which copies into this region: an expanded view (written in place
    // by fill_, zero_ or index_put_, which allow it) cannot take its base's gradient.
    assert_no_internal_overlap(r);
    zero_(r);
  }
  if (needs_input_grad(1)) out[1] = clone(region(contiguous(g)));
  return out;
}

void rebase_history(const Tensor& self, Edge new_value) {
  const Tensor base = self->view_base;
  if (!base) {
    set_history(self, std::move(new_value.fn), new_value.input_nr);
    return;
  }
  if (!base->is_contiguous())
    throw RuntimeError("fastgrad: an in-place operation that needs gradients through a view of a non-contiguous tensor "
                       "is not supported; call .contiguous() on the base tensor first");
  auto* node = make_node<CopySlices>();
  node->next_edges.push_back(gradient_edge(base));
  node->next_edges.push_back(std::move(new_value));
  node->base = InputMeta::of(base);
  for (int64_t v : self->shape) node->shape.push_back(v);
  for (int64_t v : self->strides) node->strides.push_back(v);
  node->offset = self->offset - base->offset;
  set_history(base, NodeRef(node), 0);
  // The view now shows part of the base's new value.
  Tensor fresh = as_strided(base, self->shape, self->strides, node->offset);
  set_history(self, fresh->grad_fn, 0);
  self->view_version = self->version();
}

namespace {

// A copy of self's values carrying self's history, for ops whose backward reads the old self.
Tensor snapshot(const Tensor& self) {
  Tensor copy = empty(self->shape, self->dtype);
  copy_values(copy, self);
  copy->grad_fn = self->grad_fn;
  copy->output_nr = self->output_nr;
  copy->requires_grad_leaf = self->requires_grad_leaf;
  return copy;
}

// An in-place result must fit self's dtype: an integer may land in a float tensor, not the reverse.
void check_castable(DType result, const Tensor& self) {
  if (category(result) > category(self->dtype))
    throw RuntimeError(cat("result type ", scalar_type_name(result), " can't be cast to the desired output type ",
                           scalar_type_name(self->dtype)));
}

// In place, the broadcast shape of self and `other` must be self's. As PyTorch's TensorIterator, this
// is checked after the overlaps and before the result's dtype and the kernel's own checks.
void check_broadcast_fits(const Tensor& self, const Tensor& other) {
  Shape shape = broadcast_shapes(self->shape, other->shape);
  if (shape != self->shape)
    throw RuntimeError(
        cat("output with shape ", shape_str(self->shape), " doesn't match the broadcast shape ", shape_str(shape)));
}

// self = op(self) for an out-of-place op; `reads_self` says whether op's backward needs self's
// old values (then op runs on a snapshot so that overwriting self does not invalidate them).
// `one_map`: op's result is one elementwise map of self (and other), which may write it straight
// over a contiguous self (result_buffer) when no node is recorded: one pass, no copy.
template <class F>
Tensor apply_inplace(const Tensor& self, const Tensor* other, bool reads_self, F op, bool one_map = false) {
  check_inplace(self, other);
  assert_no_internal_overlap(self);
  if (other) {
    assert_no_partial_overlap(self, *other);
    check_broadcast_fits(self, *other);
  }
  bool recording = other ? should_record({&self, other}) : should_record({&self});
  Tensor result;
  {
    InPlaceResultGuard in_place(one_map && !recording && self->is_contiguous() ? &self : nullptr);
    result = op(recording && reads_self ? snapshot(self) : self);
  }
  check_castable(result->dtype, self);
  if (result->storage != self->storage || result->offset != self->offset) copy_values(self, result);
  self->bump_version();
  // An op without a derivative (bitwise ops of integer tensors that require grad after an eq_) records
  // no node: self keeps its history.
  if (recording && result->grad_fn) {
    for (SavedTensor& saved : result->grad_fn->saved) saved.move_output(result, self);
    rebase_history(self, {result->grad_fn, result->output_nr});
  }
  return self;
}

}  // namespace

// In-place forms of ops composed in Python (_methods). inplace_input makes PyTorch's checks before
// the write and gives a copy of self carrying self's history: the op runs on it, so that its node's
// edge is self's old history and what it saves of self keeps the old values (as PyTorch's in-place
// nodes save a clone of self). write_result_ then gives self the result's values and history.
Tensor inplace_input(const Tensor& self, const std::vector<Tensor>& sources, bool elementwise) {
  const Tensor* source_with_grad = nullptr;
  for (const Tensor& s : sources)
    if (s->requires_grad()) {
      source_with_grad = &s;
      break;
    }
  check_inplace(self, source_with_grad);
  assert_no_internal_overlap(self);
  for (const Tensor& s : sources) {
    assert_no_partial_overlap(self, s);
    if (elementwise) check_broadcast_fits(self, s);
  }
  return snapshot(self);
}

Tensor write_result_(const Tensor& self, const Tensor& result) {
  check_castable(result->dtype, self);
  copy_values(self, result);
  self->bump_version();
  if (result->grad_fn) {
    for (SavedTensor& saved : result->grad_fn->saved) saved.move_output(result, self);
    rebase_history(self, {result->grad_fn, result->output_nr});
  }
  return self;
}

Tensor add_(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  return apply_inplace(self, &other, false, [&](const Tensor& s) { return add(s, other, alpha); }, true);
}
Tensor sub_(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  return apply_inplace(self, &other, false, [&](const Tensor& s) { return sub(s, other, alpha); }, true);
}
// mul and div read self's old values only for other's gradient (see mul, div): no snapshot otherwise.
Tensor mul_(const Tensor& self, const Tensor& other) {
  return apply_inplace(self, &other, other->requires_grad(), [&](const Tensor& s) { return mul(s, other); }, true);
}
Tensor div_(const Tensor& self, const Tensor& other) {
  return apply_inplace(self, &other, other->requires_grad(), [&](const Tensor& s) { return div(s, other); }, true);
}
Tensor add_(const Tensor& self, const Scalar& other, const Scalar& alpha) {
  return apply_inplace(self, nullptr, false, [&](const Tensor& s) { return add(s, other, alpha); }, true);
}
Tensor sub_(const Tensor& self, const Scalar& other, const Scalar& alpha) {
  return apply_inplace(self, nullptr, false, [&](const Tensor& s) { return sub(s, other, alpha); }, true);
}
// By a number, mul_ and div_ take no snapshot: the gradient (g * s, g / s) reads neither operand.
Tensor mul_(const Tensor& self, const Scalar& other) {
  return apply_inplace(self, nullptr, false, [&](const Tensor& s) { return mul(s, other); }, true);
}
Tensor div_(const Tensor& self, const Scalar& other) {
  return apply_inplace(self, nullptr, false, [&](const Tensor& s) { return div(s, other); }, true);
}
Tensor pow_(const Tensor& self, const Tensor& exponent) {
  return apply_inplace(self, &exponent, true, [&](const Tensor& s) { return pow(s, exponent); });
}
Tensor pow_(const Tensor& self, const Scalar& exponent) {
  return apply_inplace(self, nullptr, true, [&](const Tensor& s) { return pow(s, exponent); });
}
Tensor floor_divide_(const Tensor& self, const Tensor& other) {
  return apply_inplace(self, &other, false,
                       [&](const Tensor& s) { return floor_divide(s, other, "aten::floor_divide_"); });
}
Tensor floor_divide_(const Tensor& self, const Scalar& other) {
  return apply_inplace(self, nullptr, false,
                       [&](const Tensor& s) { return floor_divide(s, other, "aten::floor_divide_"); });
}
Tensor remainder_(const Tensor& self, const Tensor& other) {
  return apply_inplace(self, &other, true, [&](const Tensor& s) { return remainder(s, other); });
}
Tensor remainder_(const Tensor& self, const Scalar& other) {
  return apply_inplace(self, nullptr, false, [&](const Tensor& s) { return remainder(s, other); });
}
Tensor fmod_(const Tensor& self, const Tensor& other) {
  return apply_inplace(self, &other, true, [&](const Tensor& s) { return fmod(s, other); });
}
Tensor fmod_(const Tensor& self, const Scalar& other) {
  return apply_inplace(self, nullptr, false, [&](const Tensor& s) { return fmod(s, other); });
}
// As PyTorch, whether the result fits self is checked before the kernel refuses a float type.
Tensor bitwise_(const Tensor& self, const Tensor& other, BitwiseOp op) {
  check_broadcast_fits(self, other);
  check_castable(result_type(self, other), self);
  return apply_inplace(self, &other, false, [&](const Tensor& s) { return bitwise(s, other, op); });
}
Tensor bitwise_(const Tensor& self, const Scalar& other, BitwiseOp op) {
  check_castable(result_type(self, other), self);
  return apply_inplace(self, nullptr, false, [&](const Tensor& s) { return bitwise(s, other, op); });
}
Tensor bitwise_not_(const Tensor& self) {
  return apply_inplace(self, nullptr, false, [](const Tensor& s) { return bitwise_not(s); });
}
Tensor clamp_(const Tensor& self, std::optional<Scalar> min, std::optional<Scalar> max) {
  return apply_inplace(self, nullptr, true, [&](const Tensor& s) { return clamp(s, min, max); });
}
Tensor leaky_relu_(const Tensor& self, double slope) {
  return apply_inplace(self, nullptr, false, [&](const Tensor& s) { return leaky_relu_for_inplace(s, slope); });
}
Tensor hardtanh_(const Tensor& self, double min, double max) {
  // PyTorch's node saves the old values (a later write to self is no error), not the result as leaky_relu_'s
  return apply_inplace(self, nullptr, true, [&](const Tensor& s) { return hardtanh(s, min, max); });
}
Tensor unary_(const Tensor& self, Tensor (*op)(const Tensor&), bool reads_self) {
  return apply_inplace(self, nullptr, reads_self, op);
}
Tensor round_(const Tensor& self, int64_t decimals) {
  return apply_inplace(self, nullptr, false, [&](const Tensor& s) { return round(s, decimals); });
}
Tensor nan_to_num_(const Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                   std::optional<double> neginf) {
  return apply_inplace(self, nullptr, true, [&](const Tensor& s) { return nan_to_num(s, nan, posinf, neginf); });
}
namespace {
// The scan in self's own dtype (a bool self is refused by the kernel, as PyTorch's cumsum_out).
void check_scan_dtype(const Tensor& self, std::optional<DType> dtype) {
  if (dtype && *dtype != self->dtype)
    throw RuntimeError(cat("Bad in-place call: input tensor dtype ", c_type_name(self->dtype),
                           " and output tensor dtype ", c_type_name(*dtype), " should match"));
}
}  // namespace
Tensor cumsum_(const Tensor& self, int64_t dim, std::optional<DType> dtype) {
  check_scan_dtype(self, dtype);
  return apply_inplace(self, nullptr, false, [&](const Tensor& s) { return cumsum(s, dim, self->dtype); });
}
Tensor cumprod_(const Tensor& self, int64_t dim, std::optional<DType> dtype) {
  check_scan_dtype(self, dtype);
  return apply_inplace(self, nullptr, true, [&](const Tensor& s) { return cumprod(s, dim, self->dtype); });
}

// ---- ops that replace self's values (FillBackward2/3, ZeroBackward0, CopyBackwards): the old values
// get no gradient; a tensor source gets the gradient of the positions it filled.
struct ReplaceNode : Node {
  InputMeta source;
};
FG_NODE_UNNAMED(ReplaceBackward, ReplaceNode);
GradList ReplaceBackward::apply(GradList&& grads) {
  const Tensor& g = grads[0];
  GradList out(2);
  if (needs_input_grad(0)) out[0] = zeros_like(g);
  if (needs_input_grad(1)) out[1] = to_dtype(sum_to(g, source.sizes()), source.dtype);
  return out;
}

namespace {
// `checked`: the memory-overlap checks PyTorch's copy_ makes (fill_ and zero_ make none).
Tensor replace_values(const Tensor& self, const Tensor& source, bool checked, const char* node_name) {
  check_inplace(self, &source);
  if (checked) {
    assert_no_internal_overlap(self);
    assert_no_partial_overlap(self, source);
  }
  Edge self_edge = gradient_edge(self), source_edge = gradient_edge(source);
  bool recording = should_record({&self, &source}) && is_floating(self->dtype);  // int self: no gradient
  {
    GradModeGuard no_grad(false);
    Tensor expanded = expand(source, self->shape);
    copy_values(self, expanded->storage->data() == self->storage->data() ? clone(expanded) : expanded);
  }
  self->bump_version();
  if (recording) {
    auto* node = make_inplace_node<ReplaceBackward>(std::move(self_edge), std::move(source_edge), node_name);
    node->source = InputMeta::of(source);
    rebase_history(self, {NodeRef(node), 0});
  }
  return self;
}
}  // namespace

Tensor fill_(const Tensor& self, const Scalar& value) {
  return replace_values(self, full({}, value, self->dtype), false, "FillBackward2");
}
Tensor fill_(const Tensor& self, const Tensor& value) {
  if (value->dim() != 0)
    throw RuntimeError(
        cat("fill_ only supports 0-dimension value tensor but got tensor with ", value->dim(), " dimensions."));
  return replace_values(self, value, false, "FillBackward3");
}
Tensor zero_(const Tensor& self) { return replace_values(self, zeros({}, self->dtype), false, "ZeroBackward0"); }
Tensor copy_(const Tensor& self, const Tensor& src) {
  return replace_values(self, src, true, "torch::autograd::CopyBackwards");  // C++-only in PyTorch: namespaced
}

}  // namespace fg
