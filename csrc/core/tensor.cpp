#include "core/tensor.h"

#include <limits>

#include "autograd/node.h"

namespace fg {

TensorImpl::~TensorImpl() = default;

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

int64_t TensorImpl::numel() const { return numel_of(shape); }

bool TensorImpl::is_contiguous() const {
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (shape[d] == 1) continue;  // the stride of a size-1 dim never matters
    if (strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = s;
    s *= shape[d] > 0 ? shape[d] : 1;
  }
  return strides;
}

Tensor empty(const Shape& shape, DType dtype) {
  int64_t n = 1;
  for (int64_t s : shape) {
    if (s < 0) throw RuntimeError(cat("Trying to create tensor with negative dimension ", s));
    if (s != 0 && n > std::numeric_limits<int64_t>::max() / s / 8) throw std::bad_alloc();
    n *= s;
  }
  auto t = std::make_shared<TensorImpl>();
  t->storage = Storage::allocate(static_cast<size_t>(n) * itemsize(dtype));
  t->shape = shape;
  t->strides = contiguous_strides(shape);
  t->dtype = dtype;
  return t;
}

Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset) {
  auto t = std::make_shared<TensorImpl>();
  t->storage = base->storage;
  t->shape = std::move(shape);
  t->strides = std::move(strides);
  t->offset = offset;
  t->dtype = base->dtype;
  return t;
}

Tensor make_differentiable_view(const Tensor& base, Shape shape, Shape strides, int64_t offset) {
  Tensor t = make_view(base, std::move(shape), std::move(strides), offset);
  t->view_base = base->view_base ? base->view_base : base;
  return t;
}

Tensor alias(const Tensor& t) { return make_view(t, t->shape, t->strides, t->offset); }

}  // namespace fg
