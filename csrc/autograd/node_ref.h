// Intrusive owning pointer to a graph node. Nodes live in the node arena and carry their own
// refcount, so a tensor's grad_fn and a node's edges are one pointer each.
#pragma once
#include <utility>

namespace fg {

struct Node;
void retain_node(Node* node);
void release_node(Node* node);

class NodeRef {
 public:
  NodeRef() = default;
  explicit NodeRef(Node* node) : node_(node) {
    if (node_) retain_node(node_);
  }
  NodeRef(const NodeRef& other) : NodeRef(other.node_) {}
  NodeRef(NodeRef&& other) noexcept : node_(std::exchange(other.node_, nullptr)) {}
  // Takes over a count its caller has already added to `node`.
  static NodeRef adopt(Node* node) {
    NodeRef ref;
    ref.node_ = node;
    return ref;
  }
  NodeRef& operator=(NodeRef other) noexcept {
    std::swap(node_, other.node_);
    return *this;
  }
  ~NodeRef() {
    if (node_) release_node(node_);
  }

  Node* get() const { return node_; }
  Node* operator->() const { return node_; }
  explicit operator bool() const { return node_ != nullptr; }
  bool operator==(const NodeRef& other) const { return node_ == other.node_; }

 private:
  Node* node_ = nullptr;
};

}  // namespace fg
