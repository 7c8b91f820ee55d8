// The reverse pass. Every node reachable from the roots is collected without recursion, then run
// once in decreasing tape position: a node is created after the nodes of its inputs, so by the
// time it runs, every gradient flowing into it has arrived and been summed.
#include <algorithm>
#include <optional>
#include <utility>

#include "autograd/node.h"
#include "ops/ops.h"

namespace fg {

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
    else add_(out->grad, grads[i]);
  }
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
                                 bool retain_graph, const std::vector<Edge>* inputs) {
  GradModeGuard no_grad(false);
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
    if (captures) {
      for (; next_capture < captures->at.size() && captures->at[next_capture].first == static_cast<int64_t>(i);
           ++next_capture) {
        size_t k = captures->at[next_capture].second;
        captured[k] = grads[(*inputs)[k].input_nr];
      }
      if (!captures->runs[i]) continue;
    }
    bool any = false;
    for (const Tensor& g : grads) any = any || g;
    if (!any && !node->runs_without_grads()) continue;
    if (!node->retained_outputs.empty()) fill_retained_grads(node, grads);
    GradList input_grads = node->apply(std::move(grads));
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
