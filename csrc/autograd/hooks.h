// Gradient hooks: callables the user registers (Tensor.register_hook and
// register_post_accumulate_grad_hook, grad_fn.register_prehook and register_hook) and the engine runs
// around a node, in PyTorch's order: the hooks of the node's output tensors (for an AccumulateGrad,
// of its leaf), retain_grad, the node's pre-hooks, the node (for an AccumulateGrad, then its leaf's
// post-accumulate hooks), and the node's post-hooks. The core knows them through the interfaces
// below; the Python layer implements them over Python functions (csrc/python/hooks_bind.cpp). A
// tensor or node without hooks carries a null pointer, and the engine tests nothing else.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/small_vec.h"
#include "core/tensor.h"

namespace fg {

using GradList = SmallVec<Tensor, 2>;  // (node.h, which includes this file, says the same)

struct Hook {
  virtual ~Hook() = default;
  // The handle's remove(): the hook is never called again, even by a pass that is running now.
  virtual void remove() { removed = true; }
  std::atomic<bool> removed{false};
};

// Given the gradient w.r.t. a tensor (undefined for none), returns its replacement, of the same
// shape and dtype, or an undefined tensor to keep it.
struct TensorHook : Hook {
  virtual Tensor call(const Tensor& grad) = 0;
};
// Given a leaf once its gradient has been added into its .grad.
struct PostAccumulateGradHook : Hook {
  virtual void call(const Tensor& leaf) = 0;
};
// Given the gradients w.r.t. a node's outputs before it runs; may replace them.
struct NodePreHook : Hook {
  virtual void call(GradList& grad_outputs) = 0;
};
// Given the gradients the node computed for its inputs (one per edge) and those it was given; may
// replace the former.
struct NodePostHook : Hook {
  virtual void call(GradList& grad_inputs, const GradList& grad_outputs) = 0;
};

// Hooks of one kind, in registration order. Registering and removing happen while the engine may be
// running this very list (a hook that removes another, or registers one): the engine runs a copy,
// skipping the hooks removed meanwhile; a removed hook leaves the list at the next registration.
template <class H>
class HookList {
 public:
  void add(std::shared_ptr<H> hook) {
    hooks_.erase(std::remove_if(hooks_.begin(), hooks_.end(), [](const auto& h) { return h->removed.load(); }),
                 hooks_.end());
    hooks_.push_back(std::move(hook));
  }
  template <class F>
  void run(F&& call) const {
    if (hooks_.empty()) return;
    std::vector<std::shared_ptr<H>> snapshot = hooks_;
    for (const auto& h : snapshot)
      if (!h->removed) call(*h);
  }
  const std::vector<std::shared_ptr<H>>& items() const { return hooks_; }

 private:
  std::vector<std::shared_ptr<H>> hooks_;
};

// A leaf's hooks, on its TensorImpl: before its gradient is accumulated, and after.
struct LeafHooks {
  HookList<TensorHook> pre;
  HookList<PostAccumulateGradHook> post_accumulate;
};

// A node's hooks: those of its output tensors (by output_nr; the outputs in the order of their first
// registration, as PyTorch keeps them), and the node's own.
struct NodeHooks {
  std::vector<std::pair<uint32_t, HookList<TensorHook>>> outputs;
  HookList<NodePreHook> pre;
  HookList<NodePostHook> post;

  HookList<TensorHook>& of_output(uint32_t output_nr) {
    for (auto& [nr, hooks] : outputs)
      if (nr == output_nr) return hooks;
    return outputs.emplace_back(output_nr, HookList<TensorHook>()).second;
  }
};

}  // namespace fg
