#include "core/tensor.h"

#include <algorithm>
#include <limits>

#include "autograd/node.h"
#include "core/shape.h"

namespace fg {

// Defaulted here rather than in the class: a constructor defaulted at its declaration makes
// make_shared<TensorImpl>() zero the whole object (~280 bytes, a `rep stos` on every op's result)
// before the member initializers run.
TensorImpl::TensorImpl() = default;
TensorImpl::~TensorImpl() = default;

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

int64_t TensorImpl::numel() const { return numel_of(shape); }

bool TensorImpl::is_contiguous() const {
  if (numel() == 0) return true;  // no element to be out of place, as PyTorch says
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
  // Wrapping, as PyTorch's: a zero-element tensor's other dims may multiply past int64 (its strides
  // are never used to address memory).
  uint64_t s = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = static_cast<int64_t>(s);
    s *= shape[d] > 0 ? static_cast<uint64_t>(shape[d]) : 1;
  }
  return strides;
}

Tensor empty(const Shape& shape, DType dtype) {
  for (int64_t s : shape)
    if (s < 0) throw RuntimeError(cat("Trying to create tensor with negative dimension ", s, ": ", shape_str(shape)));
  int64_t n = 1;
  for (int64_t s : shape) {
    if (s != 0 && n > std::numeric_limits<int64_t>::max() / s / 8)  // 8: the widest dtype's bytes
      throw RuntimeError(cat("Storage size calculation overflowed with sizes=", shape_str(shape)));
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
  // A view allocates nothing, so only here can a shape whose element count overflows int64 arise
  // (x.expand(2**62, 3)); numel() would wrap and kernels would skip or overrun. PyTorch refuses it too.
  int64_t n = 1;
  for (int64_t s : shape)
    if (__builtin_mul_overflow(n, s, &n)) throw RuntimeError("numel: integer multiplication overflow");
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
  t->view_tracks_history = grad_enabled() && (!base->view_base || base->view_tracks_history);
  t->view_origin = grad_enabled() ? base->view_origin : ViewOrigin::Plain;
  t->view_version = t->version();
  return t;
}

Tensor alias(const Tensor& t) { return make_view(t, t->shape, t->strides, t->offset); }

Tensor untracked_alias(const Tensor& t) {
  Tensor out = alias(t);
  // A Storage over the same memory, keeping the original alive; its own version counter.
  auto* owner = new std::shared_ptr<Storage>(t->storage);
  out->storage = Storage::wrap(
      t->storage->data(), t->storage->nbytes(), [](void* ctx) { delete static_cast<std::shared_ptr<Storage>*>(ctx); },
      owner);
  out->storage->set_inference(t->storage->inference());
  return out;
}

bool is_non_overlapping_and_dense(const Tensor& t) {
  // The common case without the sort below (an empty tensor can be contiguous and still fail it).
  if (t->numel() > 0 && t->is_contiguous()) return true;
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < t->dim(); ++d)
    if (t->shape[d] != 1) dims.push_back(d);
  std::sort(dims.begin(), dims.end(), [&](int64_t a, int64_t b) { return t->strides[a] < t->strides[b]; });
  int64_t expected = 1;
  for (int64_t d : dims) {
    if (t->strides[d] != expected) return false;
    expected *= t->shape[d];
  }
  return true;
}

namespace {
enum class Overlap { No, Full, Partial, TooHard };

Overlap overlap_status(const Tensor& a, const Tensor& b) {
  if (a.get() == b.get()) return Overlap::Full;
  if (a->numel() == 0 || b->numel() == 0) return Overlap::No;
  if (!is_non_overlapping_and_dense(a) || !is_non_overlapping_and_dense(b)) return Overlap::TooHard;
  if (a->storage->data() != b->storage->data()) return Overlap::No;  // x.data has its own Storage over x's memory
  const char *a_begin = a->data(), *b_begin = b->data();
  const char* a_end = a_begin + a->numel() * static_cast<int64_t>(itemsize(a->dtype));
  const char* b_end = b_begin + b->numel() * static_cast<int64_t>(itemsize(b->dtype));
  // Same memory with other strides (even of size-1 dims) is a partial overlap, as PyTorch says.
  if (a_begin == b_begin && a_end == b_end) return a->strides == b->strides ? Overlap::Full : Overlap::Partial;
  return a_begin < b_end && b_begin < a_end ? Overlap::Partial : Overlap::No;
}

const char* kSharedMemory =
    "unsupported operation: some elements of the input tensor and the written-to tensor refer to a single memory "
    "location. Please clone() the tensor before performing the operation.";
}  // namespace

void assert_no_internal_overlap(const Tensor& out) {
  if (out->numel() == 0 || is_non_overlapping_and_dense(out)) return;  // nothing is written
  for (int64_t d = 0; d < out->dim(); ++d)
    if (out->shape[d] > 1 && out->strides[d] == 0)
      throw RuntimeError(
          "unsupported operation: more than one element of the written-to tensor refers to a single memory location. "
          "Please clone() the tensor before performing the operation.");
}

void assert_no_partial_overlap(const Tensor& out, const Tensor& in) {
  if (overlap_status(out, in) == Overlap::Partial) throw RuntimeError(kSharedMemory);
}

void assert_no_overlap(const Tensor& out, const Tensor& in) {
  Overlap o = overlap_status(out, in);
  if (o == Overlap::Partial || o == Overlap::Full) throw RuntimeError(kSharedMemory);
}

}  // namespace fg
