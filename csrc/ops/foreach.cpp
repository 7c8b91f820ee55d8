// Updates over lists of tensors for the optimizers (optimizer.step(), zero_grad()): one call into
// the core for the whole parameter list instead of several Python-level ops per parameter. They
// record no graph (the optimizers run them under no_grad).
//
// The optimizers' steps are fused passes (kernels/optim_impl.h) over each parameter's operands:
// the parameter, its gradient (read only) and its state tensors, of one dtype and shape. Each
// parameter's per-step scalars come from Python, computed there in double as PyTorch's optimizers
// compute them.
#include <array>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/shape.h"
#include "kernels/kernel_table.h"
#include "kernels/thread_pool.h"
#include "ops/ops.h"

namespace fg {

namespace {

constexpr size_t kMaxOperands = 5;  // Adam with amsgrad: param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq

void check_same_length(const char* name, size_t a, size_t b) {
  if (a != b) throw RuntimeError(cat(name, "(): expected lists of the same length, got ", a, " and ", b));
}

// The operands of parameter i: params[i], grads[i], then each state list's i-th tensor (an empty
// state list is left out: an option that is off).
std::vector<Tensor> operands_of(size_t i, const std::vector<const std::vector<Tensor>*>& lists) {
  std::vector<Tensor> operands;
  operands.reserve(lists.size());
  for (const std::vector<Tensor>* list : lists)
    if (!list->empty()) operands.push_back((*list)[i]);
  return operands;
}

// PyTorch's checks before writing, for every parameter before any is written (so an error leaves
// all tensors unchanged). lists: params, grads, the state lists; lengths: of the per-parameter
// scalar lists.
void check_update(const char* name, const std::vector<const std::vector<Tensor>*>& lists,
                  const std::vector<size_t>& lengths) {
  const size_t n = lists[0]->size();
  for (const std::vector<Tensor>* list : lists)
    if (list == lists[1] || !list->empty()) check_same_length(name, n, list->size());
  for (size_t length : lengths) check_same_length(name, n, length);
  for (size_t i = 0; i < n; ++i) {
    const std::vector<Tensor> operands = operands_of(i, lists);
    const Tensor& param = operands[0];
    for (const Tensor& t : operands) {
      if (grad_enabled() && t->requires_grad())
        throw RuntimeError(cat(name, "() does not record gradients: call it under no_grad()"));
      if (t->dtype != param->dtype || t->shape != param->shape ||
          (param->dtype != DType::Float32 && param->dtype != DType::Float64))
        throw RuntimeError(cat(name, "(): expected float32 or float64 tensors of one dtype and shape, got ",
                               scalar_type_name(param->dtype), shape_str(param->shape), " and ",
                               scalar_type_name(t->dtype), shape_str(t->shape)));
    }
    for (size_t k = 0; k < operands.size(); ++k) {
      if (k == 1) continue;  // the gradient, read only
      check_inplace(operands[k]);
      assert_no_internal_overlap(operands[k]);
      for (size_t other = 0; other < operands.size(); ++other)
        if (other != k) assert_no_partial_overlap(operands[k], operands[other]);
    }
  }
}

// A tensor the kernel reads or writes as row-major memory: t itself, or a dense copy whose values
// are copied back into t afterwards (finish()).
struct DenseOperand {
  Tensor original, dense;
  explicit DenseOperand(const Tensor& t) : original(t), dense(fg::dense(t)) {}
  void finish() const {
    if (dense.get() != original.get()) copy_values(original, dense);
    original->bump_version();
  }
};

// update(data, n) over chunks of the operands' elements, split across threads (elements are
// independent: any split gives the same values); data[k] points at operand k's chunk, nullptr past
// the operands. Every operand but the gradient (operand 1) is written.
template <class T, class Update>
void update_in_chunks(const std::vector<Tensor>& operands, Update update) {
  std::vector<DenseOperand> dense;
  for (const Tensor& t : operands) dense.emplace_back(t);
  parallel_for(0, operands[0]->numel(), kParallelElements, [&](int64_t lo, int64_t hi) {
    std::array<T*, kMaxOperands> data{};
    for (size_t k = 0; k < dense.size(); ++k) data[k] = dense[k].dense->template data_as<T>() + lo;
    update(data, hi - lo);
  });
  for (size_t k = 0; k < dense.size(); ++k)
    if (k != 1) dense[k].finish();
}

// f(T{}) for the parameter's dtype (float32 or float64, checked).
template <class F>
void by_dtype(DType dtype, F f) {
  if (dtype == DType::Float32) f(float{});
  else f(double{});
}

}  // namespace

void adam_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& exp_avgs,
           const std::vector<Tensor>& exp_avg_sqs, const std::vector<Tensor>& max_exp_avg_sqs,
           const std::vector<double>& step_sizes, const std::vector<double>& bias_correction2_sqrts,
           const AdamOptions& o) {
  const std::vector<const std::vector<Tensor>*> lists = {&params, &grads, &exp_avgs, &exp_avg_sqs, &max_exp_avg_sqs};
  if (exp_avgs.empty() || exp_avg_sqs.empty()) check_same_length("adam_", params.size(), 0);
  check_update("adam_", lists, {step_sizes.size(), bias_correction2_sqrts.size()});
  for (size_t i = 0; i < params.size(); ++i) {
    by_dtype(params[i]->dtype, [&](auto zero) {
      using T = decltype(zero);
      AdamStep<T> step{};
      step.weight_decay = static_cast<T>(o.weight_decay);
      step.l2 = o.weight_decay != 0;
      step.decay = static_cast<T>(o.decay);
      step.lerp_weight = static_cast<T>(o.lerp_weight);
      step.beta2 = static_cast<T>(o.beta2);
      step.one_minus_beta2 = static_cast<T>(o.one_minus_beta2);
      step.bias_correction2_sqrt = static_cast<T>(bias_correction2_sqrts[i]);
      step.eps = static_cast<T>(o.eps);
      step.neg_step_size = static_cast<T>(-step_sizes[i]);
      step.maximize = o.maximize;
      step.amsgrad = !max_exp_avg_sqs.empty();
      const AdamKernel<T> kernel = kernels().of<T>().adam;
      update_in_chunks<T>(operands_of(i, lists), [&](const std::array<T*, kMaxOperands>& d, int64_t n) {
        kernel(step, d[0], d[1], d[2], d[3], d[4], n);
      });
    });
  }
}

void sgd_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
          const std::vector<Tensor>& momentum_buffers, const std::vector<bool>& first_steps, const SgdOptions& o) {
  const std::vector<const std::vector<Tensor>*> lists = {&params, &grads, &momentum_buffers};
  check_update("sgd_", lists, momentum_buffers.empty() ? std::vector<size_t>{} : std::vector{first_steps.size()});
  for (size_t i = 0; i < params.size(); ++i) {
    by_dtype(params[i]->dtype, [&](auto zero) {
      using T = decltype(zero);
      SgdStep<T> step{};
      step.weight_decay = static_cast<T>(o.weight_decay);
      step.l2 = o.weight_decay != 0;
      step.momentum = static_cast<T>(o.momentum);
      step.one_minus_dampening = static_cast<T>(o.one_minus_dampening);
      step.neg_lr = static_cast<T>(-o.lr);
      step.with_momentum = !momentum_buffers.empty();
      step.first_step = step.with_momentum && first_steps[i];
      step.nesterov = o.nesterov;
      step.maximize = o.maximize;
      const SgdKernel<T> kernel = kernels().of<T>().sgd;
      update_in_chunks<T>(operands_of(i, lists),
                          [&](const std::array<T*, kMaxOperands>& d, int64_t n) { kernel(step, d[0], d[1], d[2], n); });
    });
  }
}

void adagrad_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& sums,
              const std::vector<double>& learning_rates, const AdagradOptions& o) {
  const std::vector<const std::vector<Tensor>*> lists = {&params, &grads, &sums};
  if (sums.empty()) check_same_length("adagrad_", params.size(), 0);
  check_update("adagrad_", lists, {learning_rates.size()});
  for (size_t i = 0; i < params.size(); ++i) {
    by_dtype(params[i]->dtype, [&](auto zero) {
      using T = decltype(zero);
      AdagradStep<T> step{};
      step.weight_decay = static_cast<T>(o.weight_decay);
      step.l2 = o.weight_decay != 0;
      step.eps = static_cast<T>(o.eps);
      step.neg_lr = static_cast<T>(-learning_rates[i]);
      step.maximize = o.maximize;
      const AdagradKernel<T> kernel = kernels().of<T>().adagrad;
      update_in_chunks<T>(operands_of(i, lists),
                          [&](const std::array<T*, kMaxOperands>& d, int64_t n) { kernel(step, d[0], d[1], d[2], n); });
    });
  }
}

void foreach_zero_(const std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors) zero_(t);
}

}  // namespace fg
