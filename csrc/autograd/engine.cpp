// The reverse pass. Every node reachable from the roots is collected without recursion, then run
// once in decreasing tape position: a node is created after the nodes of its inputs, so by the
// time it runs, every gradient flowing into it has arrived and been summed.
#include <algorithm>

#include "autograd/node.h"
#include "ops/ops.h"

namespace fg {

namespace {

std::vector<Node*> reachable_nodes(const std::vector<Node*>& roots) {
  std::vector<Node*> found;
  std::vector<Node*> stack(roots.begin(), roots.end());
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    if (node->topo_slot != -1) continue;
    node->topo_slot = 0;  // visited; the real slot is set after sorting
    found.push_back(node);
    for (const Edge& e : node->next_edges)
      if (e.fn && e.fn->topo_slot == -1) stack.push_back(e.fn.get());
  }
  std::sort(found.begin(), found.end(), [](Node* a, Node* b) { return a->sequence_nr > b->sequence_nr; });
  for (size_t i = 0; i < found.size(); ++i) found[i]->topo_slot = static_cast<int64_t>(i);
  return found;
}

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

}  // namespace

void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots, bool retain_graph) {
  GradModeGuard no_grad(false);
  std::vector<Edge> root_edges;
  std::vector<Node*> root_nodes;
  for (const Tensor& root : roots) {
    root_edges.push_back(gradient_edge(root));
    root_nodes.push_back(root_edges.back().fn.get());
  }
  std::vector<Node*> order = reachable_nodes(root_nodes);
  std::vector<GradList> inbox(order.size());
  for (size_t i = 0; i < roots.size(); ++i) {
    Edge& e = root_edges[i];
    GradList& slot = inbox[e.fn->topo_slot];
    slot.resize(e.fn->num_outputs());
    accumulate(slot[e.input_nr], grad_roots[i]);
  }
  // Nodes must get their scratch slot back even when a backward formula throws.
  struct ResetSlots {
    std::vector<Node*>& nodes;
    ~ResetSlots() { for (Node* n : nodes) n->topo_slot = -1; }
  } reset{order};

  for (size_t i = 0; i < order.size(); ++i) {
    Node* node = order[i];
    GradList grads = std::move(inbox[i]);
    bool any = false;
    for (const Tensor& g : grads) any = any || g;
    if (!any) continue;
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
}

}  // namespace fg
