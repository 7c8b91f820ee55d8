// Updates over lists of tensors for the optimizers (optimizer.step(), zero_grad()): one call into
// the core for the whole parameter list instead of several Python-level ops per parameter. They
// record no graph (the optimizers run them under no_grad).
#include <optional>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/shape.h"
#include "kernels/kernel_table.h"
#include "kernels/loops.h"
#include "kernels/thread_pool.h"
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

// A tensor the kernel reads or writes as row-major memory: t itself, or a dense copy whose values
// are copied back into t afterwards (finish()).
struct DenseOperand {
  Tensor original, dense;
  explicit DenseOperand(const Tensor& t) : original(t), dense(fg::dense(t)) {}
  template <class T>
  T* data() const {
    return dense->data_as<T>();
  }
  void finish() const {
    if (dense.get() != original.get()) copy_values(original, dense);
    original->bump_version();
  }
};

template <class T>
void adam_one(const AdamOptions& o, double step_size, double bias_correction2_sqrt, const Tensor& param,
              const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq) {
  AdamStep<T> step{};
  step.weight_decay = static_cast<T>(o.weight_decay);
  step.l2 = o.weight_decay != 0;
  step.decay = static_cast<T>(o.decay);
  step.lerp_weight = static_cast<T>(o.lerp_weight);
  step.beta2 = static_cast<T>(o.beta2);
  step.one_minus_beta2 = static_cast<T>(o.one_minus_beta2);
  step.bias_correction2_sqrt = static_cast<T>(bias_correction2_sqrt);
  step.eps = static_cast<T>(o.eps);
  step.neg_step_size = static_cast<T>(-step_size);
  step.maximize = o.maximize;
  step.amsgrad = static_cast<bool>(max_exp_avg_sq);
  const DenseOperand p(param), g(grad), m(exp_avg), v(exp_avg_sq);
  std::optional<DenseOperand> mv;
  if (step.amsgrad) mv.emplace(max_exp_avg_sq);
  T* const mv_data = mv ? mv->data<T>() : nullptr;
  const AdamKernel<T> kernel = kernels().of<T>().adam;
  // Elements are independent: any split gives the same values.
  parallel_for(0, param->numel(), kParallelElements, [&](int64_t lo, int64_t hi) {
    kernel(step, p.data<T>() + lo, g.data<T>() + lo, m.data<T>() + lo, v.data<T>() + lo,
           mv_data ? mv_data + lo : nullptr, hi - lo);
  });
  for (const DenseOperand* written : {&p, &m, &v}) written->finish();
  if (mv) mv->finish();
}

}  // namespace

void adam_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& exp_avgs,
           const std::vector<Tensor>& exp_avg_sqs, const std::vector<Tensor>& max_exp_avg_sqs,
           const std::vector<double>& step_sizes, const std::vector<double>& bias_correction2_sqrts,
           const AdamOptions& options) {
  const size_t n = params.size();
  for (size_t length :
       {grads.size(), exp_avgs.size(), exp_avg_sqs.size(), step_sizes.size(), bias_correction2_sqrts.size()})
    check_same_length("adam_", n, length);
  if (!max_exp_avg_sqs.empty()) check_same_length("adam_", n, max_exp_avg_sqs.size());
  // Everything is checked before anything is written, so an error leaves all tensors unchanged.
  for (size_t i = 0; i < n; ++i) {
    const Tensor& param = params[i];
    std::vector<Tensor> operands = {param, grads[i], exp_avgs[i], exp_avg_sqs[i]};
    if (!max_exp_avg_sqs.empty()) operands.push_back(max_exp_avg_sqs[i]);
    for (const Tensor& t : operands) {
      if (grad_enabled() && t->requires_grad())
        throw RuntimeError("adam_() does not record gradients: call it under no_grad()");
      if (t->dtype != param->dtype || t->shape != param->shape ||
          (param->dtype != DType::Float32 && param->dtype != DType::Float64))
        throw RuntimeError(cat("adam_(): expected float32 or float64 tensors of one dtype and shape, got ",
                               scalar_type_name(param->dtype), shape_str(param->shape), " and ",
                               scalar_type_name(t->dtype), shape_str(t->shape)));
    }
    for (const Tensor& t : operands) {
      if (t.get() == grads[i].get()) continue;  // read only
      check_inplace(t);
      assert_no_internal_overlap(t);
      for (const Tensor& other : operands)
        if (other.get() != t.get()) assert_no_partial_overlap(t, other);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const Tensor& max_exp_avg_sq = max_exp_avg_sqs.empty() ? Tensor() : max_exp_avg_sqs[i];
    if (params[i]->dtype == DType::Float32)
      adam_one<float>(options, step_sizes[i], bias_correction2_sqrts[i], params[i], grads[i], exp_avgs[i],
                      exp_avg_sqs[i], max_exp_avg_sq);
    else
      adam_one<double>(options, step_sizes[i], bias_correction2_sqrts[i], params[i], grads[i], exp_avgs[i],
                       exp_avg_sqs[i], max_exp_avg_sq);
  }
}

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
