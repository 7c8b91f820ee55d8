// The reverse pass. Every node reachable from the roots is collected without recursion, then run
// once in decreasing tape position: a node is created after the nodes of its inputs, so by the
// time it runs, every gradient flowing into it has arrived and been summed.
#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "autograd/anomaly_mode.h"
#include "autograd/long_work.h"
#include "autograd/node.h"
#include "core/error.h"
#include "ops/ops.h"

namespace fg {

void* (*begin_long_work)(int64_t elements) = nullptr;
void (*end_long_work)(void* token) = nullptr;

namespace {

// The nodes reachable from the roots, latest recorded first, each told its index (topo_slot). A
// custom Function's backward may run a backward of its own, over nodes this pass is also using
// (a parameter's AccumulateGrad), so each node's previous slot is put back when the pass ends.
class Tape {
 public:
  explicit Tape(const std::vector<Node*>& roots) {
    std::vector<Node*> stack(roots.begin(), roots.end());
    while (!stack.empty()) {
      Node* node = stack.back();
      stack.pop_back();
      if (node->topo_slot == kVisited) continue;
      entries_.emplace_back(node, node->topo_slot);
      node->topo_slot = kVisited;
      for (const Edge& e : node->next_edges)
        if (e.fn && e.fn->topo_slot != kVisited) stack.push_back(e.fn.get());
    }
    std::sort(entries_.begin(), entries_.end(),
              [](const auto& a, const auto& b) { return a.first->sequence_nr > b.first->sequence_nr; });
    move_sinks_up();
    for (size_t i = 0; i < entries_.size(); ++i) entries_[i].first->topo_slot = static_cast<int64_t>(i);
  }
  ~Tape() {
    for (auto& [node, outer_slot] : entries_) node->topo_slot = outer_slot;
  }
  Tape(const Tape&) = delete;
  Tape& operator=(const Tape&) = delete;

  size_t size() const { return entries_.size(); }
  Node* operator[](size_t i) const { return entries_[i].first; }
  // The index of `node` in this tape, or -1 (its topo_slot may belong to an enclosing pass).
  int64_t slot_of(const Node* node) const {
    int64_t slot = node->topo_slot;
    return slot >= 0 && static_cast<size_t>(slot) < size() && entries_[slot].first == node ? slot : -1;
  }

 private:
  // The sinks (AccumulateGrad, tape position 0) sort last. PyTorch runs one as soon as its last
  // gradient has arrived, and the order shows: a leaf's hooks, and the .grad that a post-accumulate
  // hook sees, come right after the last node that feeds the leaf. So each sink moves up to just after
  // that node (those it completes in the order of its edges), or to the front if it is a root.
  void move_sinks_up() {
    size_t first_sink = entries_.size();
    while (first_sink > 0 && entries_[first_sink - 1].first->sequence_nr == 0) --first_sink;
    if (first_sink == entries_.size()) return;
    constexpr int64_t kPlaced = -2;
    std::vector<int64_t> last_feeder(entries_.size() - first_sink, -1);  // per sink, the last node feeding it
    for (size_t s = first_sink; s < entries_.size(); ++s) entries_[s].first->topo_slot = static_cast<int64_t>(s);
    for (size_t i = 0; i < first_sink; ++i)
      for (const Edge& e : entries_[i].first->next_edges)
        if (e.fn && e.fn->sequence_nr == 0) last_feeder[e.fn->topo_slot - first_sink] = static_cast<int64_t>(i);
    std::vector<std::pair<Node*, int64_t>> order;
    order.reserve(entries_.size());
    for (size_t s = first_sink; s < entries_.size(); ++s)
      if (last_feeder[s - first_sink] == -1) order.push_back(entries_[s]);
    for (size_t i = 0; i < first_sink; ++i) {
      order.push_back(entries_[i]);
      for (const Edge& e : entries_[i].first->next_edges) {
        if (!e.fn || e.fn->sequence_nr != 0) continue;
        int64_t& feeder = last_feeder[e.fn->topo_slot - first_sink];
        if (feeder != static_cast<int64_t>(i)) continue;
        order.push_back(entries_[e.fn->topo_slot]);
        feeder = kPlaced;
      }
    }
    entries_ = std::move(order);
  }

  static constexpr int64_t kVisited = -2;  // only while collecting, which runs no user code
  std::vector<std::pair<Node*, int64_t>> entries_;  // node, slot it had before this pass
};

void accumulate(Tensor& slot, Tensor grad) {
  if (!slot) slot = std::move(grad);
  else slot = add(slot, grad);
}

// Stores the gradient of each output that asked for it with retain_grad().
void fill_retained_grads(Node* node, const GradList& grads) {
  for (size_t i = 0; i < node->retained_outputs.size() && i < grads.size(); ++i) {
    Tensor out = node->retained_outputs[i].lock();
    if (!out || !grads[i]) continue;
    if (!out->grad) out->grad = clone(grads[i]);
    else out->grad = add(out->grad, grads[i]);  // out of place, as PyTorch's retains_grad hook
  }
}

bool any_defined(const GradList& grads) {
  for (const Tensor& g : grads)
    if (g) return true;
  return false;
}

// Hooks (autograd/hooks.h). Those of an AccumulateGrad's tensor are its leaf's; AccumulateGrad is
// the only node at tape position 0.
LeafHooks* leaf_hooks(Node* node) {
  return node->sequence_nr == 0 ? static_cast<AccumulateGrad*>(node)->variable->hooks.get() : nullptr;
}

bool has_hooks(Node* node) { return node->hooks || leaf_hooks(node); }

// The hooks of the tensors whose gradients `grads` are: the node's outputs, or its leaf. Those of the
// outputs that have hooks now: a hook may register hooks on another output of this node (which grows
// the list under our feet, hence the index).
void run_tensor_hooks(Node* node, GradList& grads) {
  auto replacing = [](Tensor& grad) {
    return [&grad](TensorHook& hook) {
      if (Tensor replacement = hook.call(grad)) grad = std::move(replacement);
    };
  };
  if (LeafHooks* leaf = leaf_hooks(node)) leaf->pre.run(replacing(grads[0]));
  size_t hooked_outputs = node->hooks ? node->hooks->outputs.size() : 0;
  for (size_t k = 0; k < hooked_outputs; ++k) {
    auto& [output_nr, hooks] = node->hooks->outputs[k];
    if (output_nr < grads.size()) hooks.run(replacing(grads[output_nr]));
  }
}

// node->apply between the node's pre-hooks and post-hooks. A node that no gradient reached (it runs
// for its hooks) or whose pre-hook took every gradient away gives none: built-in formulas expect some.
GradList apply_hooked(Node* node, GradList&& grads) {
  if (node->hooks) node->hooks->pre.run([&](NodePreHook& hook) { hook.call(grads); });
  bool post_hooks = node->hooks && !node->hooks->post.items().empty();
  GradList grad_outputs = post_hooks ? grads : GradList();
  GradList input_grads = any_defined(grads) || node->runs_without_grads() ? node->apply(std::move(grads)) : GradList();
  // Whenever an AccumulateGrad runs, with a gradient or not, as PyTorch's.
  if (LeafHooks* leaf = leaf_hooks(node)) {
    const Tensor& variable = static_cast<AccumulateGrad*>(node)->variable;
    leaf->post_accumulate.run([&](PostAccumulateGradHook& hook) { hook.call(variable); });
  }
  if (!post_hooks) return input_grads;
  input_grads.resize(node->next_edges.size());
  node->hooks->post.run([&](NodePostHook& hook) { hook.call(input_grads, grad_outputs); });
  return input_grads;
}

GradList run_node(Node* node, GradList&& grads, bool hooked) {
  return hooked ? apply_hooked(node, std::move(grads)) : node->apply(std::move(grads));
}

template <class T>
bool any_nan(const Tensor& t) {
  const T* values = t->data_as<T>();
  return std::any_of(values, values + t->numel(), [](T v) { return std::isnan(v); });
}

bool has_nan(const Tensor& t) {
  if (t->dtype != DType::Float32 && t->dtype != DType::Float64) return false;
  GradModeGuard no_grad(false);  // the check is no part of a create_graph backward's graph
  Tensor dense = contiguous(t);
  return t->dtype == DType::Float32 ? any_nan<float>(dense) : any_nan<double>(dense);
}

// run_node in anomaly mode: a gradient with a NaN is an error naming the node (PyTorch's words),
// and whatever fails in the node is reported with the traceback of its forward call.
GradList run_node_checked(Node* node, GradList&& grads, bool hooked) {
  try {
    GradList input_grads = run_node(node, std::move(grads), hooked);
    if (anomaly_check_nan.load(std::memory_order_relaxed))
      for (size_t k = 0; k < input_grads.size(); ++k)
        if (input_grads[k] && has_nan(input_grads[k]))
          throw RuntimeError(cat("Function '", node->name(), "' returned nan values in its ", k, "th output."));
    return input_grads;
  } catch (...) {
    report_failed_node(node);
    throw;
  }
}

// A node's work, for LongWork: the elements of its incoming gradients. AccumulateGrad counts none:
// it writes its leaf's .grad, which other threads may be reading (with the GIL, in Python).
int64_t work_of(const Node* node, const GradList& grads) {
  int64_t elements = 0;
  if (node->sequence_nr != 0)
    for (const Tensor& g : grads) elements += g ? g->numel() : 0;
  return elements;
}

GradList run_long_or_short(Node* node, GradList&& grads, bool hooked) {
  LongWork scope(work_of(node, grads));
  return anomaly_enabled() ? run_node_checked(node, std::move(grads), hooked)
                           : run_node(node, std::move(grads), hooked);
}

// autograd.grad: where each input's gradient is picked up, and which nodes must run to produce them
// (those with an edge into an input's node or into a node that must run; the rest are skipped, and
// AccumulateGrad, which leads nowhere, never runs).
struct Captures {
  std::vector<std::pair<int64_t, size_t>> at;  // (tape slot, input index), by slot
  std::vector<char> runs;                       // per tape slot

  Captures(const Tape& tape, const std::vector<Edge>& inputs) : runs(tape.size(), 0) {
    std::vector<char> is_input(tape.size(), 0);
    for (size_t k = 0; k < inputs.size(); ++k) {
      int64_t slot = inputs[k].fn ? tape.slot_of(inputs[k].fn.get()) : -1;
      if (slot < 0) continue;  // not reached from the outputs: unused
      at.emplace_back(slot, k);
      is_input[slot] = 1;
    }
    std::sort(at.begin(), at.end());
    // Edges lead to later slots, so walking backwards sees a node's successors first.
    for (size_t i = tape.size(); i-- > 0;)
      for (const Edge& e : tape[i]->next_edges)
        if (e.fn && (is_input[e.fn->topo_slot] || runs[e.fn->topo_slot])) {
          runs[i] = 1;
          break;
        }
  }
};

}  // namespace

std::vector<Tensor> run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots,
                                 bool retain_graph, const std::vector<Edge>* inputs, bool create_graph) {
  GradModeGuard grad_mode(create_graph);
  std::vector<Edge> root_edges;
  std::vector<Node*> root_nodes;
  for (const Tensor& root : roots) {
    root_edges.push_back(gradient_edge(root));
    root_nodes.push_back(root_edges.back().fn.get());
  }
  Tape tape(root_nodes);
  std::vector<GradList> inbox(tape.size());
  for (size_t i = 0; i < roots.size(); ++i) {
    Edge& e = root_edges[i];
    GradList& slot = inbox[e.fn->topo_slot];
    slot.resize(e.fn->num_outputs());
    accumulate(slot[e.input_nr], grad_roots[i]);
  }
  std::vector<Tensor> captured(inputs ? inputs->size() : 0);
  std::optional<Captures> captures;
  if (inputs) captures.emplace(tape, *inputs);
  size_t next_capture = 0;

  for (size_t i = 0; i < tape.size(); ++i) {
    Node* node = tape[i];
    GradList grads = std::move(inbox[i]);
    grads.resize(node->num_outputs());
    bool hooked = has_hooks(node);
    if (captures) {
      // As PyTorch: a node that only hands gradients to autograd.grad runs its tensors' hooks before
      // they are taken; one that runs, only when it runs (below), after.
      bool captured_here =
          next_capture < captures->at.size() && captures->at[next_capture].first == static_cast<int64_t>(i);
      if (hooked && captured_here && !captures->runs[i]) run_tensor_hooks(node, grads);
      for (; next_capture < captures->at.size() && captures->at[next_capture].first == static_cast<int64_t>(i);
           ++next_capture) {
        size_t k = captures->at[next_capture].second;
        captured[k] = grads[(*inputs)[k].input_nr];
      }
      if (!captures->runs[i]) continue;
    }
    bool any = false;
    for (const Tensor& g : grads) any = any || g;
    // As PyTorch runs every node, a node with hooks runs them even when no gradient reached it.
    if (!any && !node->runs_without_grads() && !hooked) continue;
    if (hooked) run_tensor_hooks(node, grads);
    if (!node->retained_outputs.empty()) fill_retained_grads(node, grads);
    GradList input_grads = run_long_or_short(node, std::move(grads), hooked);
    if (!retain_graph) node->release_saved();
    for (size_t k = 0; k < node->next_edges.size() && k < input_grads.size(); ++k) {
      const Edge& e = node->next_edges[k];
      if (!e.fn || !input_grads[k]) continue;
      GradList& slot = inbox[e.fn->topo_slot];
      slot.resize(e.fn->num_outputs());
      accumulate(slot[e.input_nr], std::move(input_grads[k]));
    }
  }
  return captured;
}

}  // namespace fg
