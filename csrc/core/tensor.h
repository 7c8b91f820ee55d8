// TensorImpl: a typed, strided view (shape, strides, offset) of a Storage, plus the autograd
// metadata PyTorch keeps on a variable. `Tensor` is the shared handle used everywhere; an empty
// handle stands for "no tensor" (an undefined gradient, a missing grad).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "autograd/node_ref.h"
#include "core/dims.h"
#include "core/dtype.h"
#include "core/storage.h"

namespace fg {

using Shape = Dims;
enum class ViewOrigin : uint8_t { Plain, CustomFunction, MultiOutputNode };

struct TensorImpl;
using Tensor = std::shared_ptr<TensorImpl>;
struct AccumulateGrad;
struct LeafHooks;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;  // in elements
  int64_t offset = 0;  // in elements
  DType dtype = DType::Float32;

  // Autograd metadata. A tensor is a leaf iff it has no grad_fn.
  bool requires_grad_leaf = false;  // the user's flag; only meaningful on leaves
  NodeRef grad_fn;
  uint32_t output_nr = 0;  // which output of grad_fn this tensor is
  Tensor grad;
  bool retains_grad = false;
  AccumulateGrad* grad_accumulator = nullptr;  // not owning: the node clears it when it dies
  // For differentiable views: the tensor that owns the memory (never itself a view). In-place
  // writes through the view must update that tensor's history too.
  Tensor view_base;
  // The storage version a view's grad_fn describes. Once the storage is written in place (through
  // the base or any view of it), the history of a view made in grad mode is remade from the base's,
  // as PyTorch does (refresh_view_history in autograd/node.h). A view made under no_grad, or from
  // such a view (PyTorch's CreationMeta NO_GRAD_MODE), has no history to remake: writing it, or
  // using it after such a write, is an error where gradients are involved.
  bool view_tracks_history = false;
  // Why a view made in grad mode has no history to remake, for its errors to say: it was returned by
  // a custom Function's forward, or is one of the parts of an op that returns several views (split,
  // unbind), or a view of such a view (PyTorch's CreationMeta IN_CUSTOM_FUNCTION, MULTI_OUTPUT_NODE).
  ViewOrigin view_origin = ViewOrigin::Plain;
  uint32_t view_version = 0;
  std::unique_ptr<LeafHooks> hooks;  // a leaf's gradient hooks (autograd/hooks.h); null while it has none
  // The capture this tensor was made during (0: none). fastgrad.compile replays a tensor made during
  // its capture only if a recorded op made it (python/capture.cpp).
  uint32_t capture_birth = capture_in_progress();

  TensorImpl();  // tensor.cpp
  TensorImpl(const TensorImpl&) = delete;
  TensorImpl& operator=(const TensorImpl&) = delete;
  ~TensorImpl();

  // As PyTorch, a view requires grad when its base does, even one made under no_grad (which has no
  // grad_fn and is a leaf without a gradient of its own: no gradient reaches it or its base).
  bool requires_grad() const { return grad_fn || requires_grad_leaf || (view_base && view_base->requires_grad()); }
  // (A view without history whose memory was written stays a leaf here; its Python is_leaf raises.)
  bool is_leaf() const { return !grad_fn && !(view_tracks_history && history_stale()); }
  // A view whose grad_fn predates an in-place write to its storage, in a graph: the grad_fn must be
  // remade before it is used (or, for a view without history, the use refused).
  bool history_stale() const {
    return view_base && view_version != version() && (grad_fn || view_base->requires_grad());
  }
  int64_t dim() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const;
  bool is_contiguous() const;
  char* data() const { return static_cast<char*>(storage->data()) + offset * static_cast<int64_t>(itemsize(dtype)); }
  template <class T> T* data_as() const { return reinterpret_cast<T*>(data()); }
  uint32_t version() const { return storage->version(); }
  void bump_version() { storage->bump_version(); }
};

int64_t numel_of(const Shape& shape);
Shape contiguous_strides(const Shape& shape);

// A new contiguous, uninitialized tensor.
Tensor empty(const Shape& shape, DType dtype);
// A new tensor viewing `base`'s storage with other geometry; no autograd history.
Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset);
// make_view for the differentiable view ops: remembers the base whose memory it shows.
Tensor make_differentiable_view(const Tensor& base, Shape shape, Shape strides, int64_t offset);
// Same data and geometry, no autograd history (detach()).
Tensor alias(const Tensor& t);
// alias() with a version counter of its own (x.data): PyTorch's in-place writes through .data are
// invisible to autograd, so they do not invalidate tensors saved for backward.
Tensor untracked_alias(const Tensor& t);

// PyTorch's memory-overlap checks for ops that write into a tensor they may also read. "Dense"
// tensors (every element in its own slot, no gaps) are compared exactly; others are too hard to
// judge and pass, as in PyTorch.
bool is_non_overlapping_and_dense(const Tensor& t);
// Writing into `out` would write some memory twice (an expanded, stride-0 dim).
void assert_no_internal_overlap(const Tensor& out);
// `in` shares some but not all of `out`'s memory (elementwise in-place ops and copies).
void assert_no_partial_overlap(const Tensor& out, const Tensor& in);
// `in` shares any of `out`'s memory (index_put_).
void assert_no_overlap(const Tensor& out, const Tensor& in);

}  // namespace fg
