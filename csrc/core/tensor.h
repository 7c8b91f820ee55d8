// TensorImpl: a typed, strided view (shape, strides, offset) of a Storage, plus the autograd
// metadata PyTorch keeps on a variable. `Tensor` is the shared handle used everywhere; an empty
// handle stands for "no tensor" (an undefined gradient, a missing grad).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "autograd/node_ref.h"
#include "core/dtype.h"
#include "core/storage.h"

namespace fg {

using Shape = std::vector<int64_t>;
struct TensorImpl;
using Tensor = std::shared_ptr<TensorImpl>;
struct AccumulateGrad;

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

  TensorImpl() = default;
  TensorImpl(const TensorImpl&) = delete;
  TensorImpl& operator=(const TensorImpl&) = delete;
  ~TensorImpl();

  bool requires_grad() const { return grad_fn ? true : requires_grad_leaf; }
  bool is_leaf() const { return !grad_fn; }
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

}  // namespace fg
