// Updates over lists of tensors for the optimizers (optimizer.step(), zero_grad()): one call into
// the core for the whole parameter list instead of several Python-level ops per parameter. They
// record no graph (the optimizers run them under no_grad).
#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/shape.h"
#include "kernels/loops.h"
#include "ops/ops.h"

namespace fg {

namespace {

void check_same_length(const char* name, size_t a, size_t b) {
  if (a != b) throw RuntimeError(cat(name, "(): expected lists of the same length, got ", a, " and ", b));
}

// self += alpha * other, rounded as the optimizers' reference arithmetic: PyTorch's CPU kernel for
// add_(other, alpha=) is a fused multiply-add; here the product of two floats is exact in double
// and the double sum is rounded to float, which gives the fused result (up to rare double-rounding
// ties). alpha is first rounded to the tensor's type, as PyTorch converts a scalar argument.
// float64 rounds twice (a last-bit difference from PyTorch's fma).
template <class T>
void add_scaled(const Tensor& self, const Tensor& other, double alpha) {
  T* s = self->data_as<T>();
  const T* o = other->data_as<T>();
  const double a = static_cast<T>(alpha);
  if (self->is_contiguous() && other->is_contiguous()) {  // the usual case, in a loop the compiler vectorizes
    for (int64_t i = 0, n = self->numel(); i < n; ++i)
      s[i] = static_cast<T>(static_cast<double>(o[i]) * a + static_cast<double>(s[i]));
    return;
  }
  for_each_offset<2>(self->shape, {self->strides.data(), other->strides.data()},
                     [&](int64_t, const std::array<int64_t, 2>& off) {
                       s[off[0]] = static_cast<T>(static_cast<double>(o[off[1]]) * a + static_cast<double>(s[off[0]]));
                     });
}

}  // namespace

void foreach_add_(const std::vector<Tensor>& selves, const std::vector<Tensor>& others, double alpha) {
  check_same_length("foreach_add_", selves.size(), others.size());
  // Every pair is checked before anything is written, so an error leaves all tensors unchanged.
  for (size_t i = 0; i < selves.size(); ++i) {
    const Tensor &self = selves[i], &other = others[i];
    check_inplace(self);
    if (grad_enabled() && (self->requires_grad() || other->requires_grad()))
      throw RuntimeError("foreach_add_() does not record gradients: call it under no_grad()");
    if (self->dtype != other->dtype || !is_floating(self->dtype) || self->shape != other->shape)
      throw RuntimeError(cat("foreach_add_(): expected floating tensors of one dtype and shape, got ",
                             scalar_type_name(self->dtype), shape_str(self->shape), " and ",
                             scalar_type_name(other->dtype), shape_str(other->shape)));
    assert_no_internal_overlap(self);
    assert_no_partial_overlap(self, other);
  }
  for (size_t i = 0; i < selves.size(); ++i) {
    if (selves[i]->dtype == DType::Float32) add_scaled<float>(selves[i], others[i], alpha);
    else add_scaled<double>(selves[i], others[i], alpha);
    selves[i]->bump_version();
  }
}

void foreach_zero_(const std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors) zero_(t);
}

}  // namespace fg
