// Graph nodes. A node is the backward of one recorded op: it takes the gradients of the op's
// outputs and returns the gradients of its inputs, routed along `next_edges` (one per input, empty
// for inputs that need no gradient). Nodes come from the arena and are numbered in creation order;
// that number is the tape position the engine sorts by.
#pragma once
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

#include "autograd/arena.h"
#include "autograd/grad_mode.h"
#include "autograd/hooks.h"
#include "autograd/node_ref.h"
#include "core/small_vec.h"
#include "core/tensor.h"

namespace fg {

struct Edge {
  NodeRef fn;
  uint32_t input_nr = 0;
};

using GradList = SmallVec<Tensor, 2>;

// A tensor kept for backward, stamped with its storage version so that a later in-place change is
// detected instead of silently producing a wrong gradient. An op's own output is kept without its
// history (which is this very node) so that node and tensor do not keep each other alive; in grad
// mode (a backward with create_graph) unpacking by the owner gives it back, as PyTorch's
// SavedVariable does, so that the recorded gradient reaches through it.
class SavedTensor {
 public:
  // An output is saved after it has been given its grad_fn and output_nr.
  void save(const Tensor& t, bool is_output = false);
  // `owner_name`: the name of the node that saved it (named in the error for a modified output).
  Tensor unpack(const char* owner_name) const;
  Tensor unpack(const struct Node* owner) const;
  void reset() { data_.reset(); }
  // An in-place op computes its value into `result` and then writes it into `self`: a saved
  // `result` becomes `self` at its new version, as PyTorch's in-place node saves self itself, so
  // that a later in-place change of self is detected.
  void move_output(const Tensor& result, const Tensor& self);
  bool defined() const { return was_saved_; }

 private:
  Tensor data_;
  uint32_t version_ = 0;
  uint32_t output_nr_ = 0;
  bool was_saved_ = false;
  bool is_output_ = false;
};

// A node as PyTorch's messages name it (its Node::forward_op_name): "Exp" for ExpBackward0, "Squeeze1"
// for SqueezeBackward1, "MyFn" for MyFnBackward.
std::string producer_name(const char* node_name);

// PyTorch's error for using saved tensors that a backward without retain_graph has freed.
extern const char* const kBackwardTwiceMessage;

// Set by the binding that fills Node::metadata.
extern void (*release_node_metadata)(void* metadata);

// Allocates a node of type N shown under `name`: its type's own (N::kName), or for a type that
// PyTorch shows under several names (FG_NODE_UNNAMED), the one the recording op passes.
template <class N>
N* make_node(const char* name = N::kName);

struct Node {
  Node();
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // PyTorch's name for this node ("ExpBackward0"): grad_fn.name(), and the name in error messages.
  const char* name() const { return name_; }
  // An in-place shape op (t_) takes over the node its out-of-place view recorded, under its own name.
  void rename(const char* name) { name_ = name; }
  // Gradients w.r.t. the outputs in, gradients w.r.t. the inputs out (undefined = no gradient).
  virtual GradList apply(GradList&& grads) = 0;
  // Frees what backward needed; called after backward unless retain_graph. Extend in nodes that
  // keep more than `saved` (a custom Function's ctx).
  virtual void release_saved();
  virtual uint32_t num_outputs() const { return 1; }
  // A node that no gradient reached is skipped: the built-in formulas would return no gradient
  // (as PyTorch's do for undefined inputs). A custom Function still runs, on zeros, as in PyTorch.
  virtual bool runs_without_grads() const { return false; }

  bool needs_input_grad(size_t i) const { return i < next_edges.size() && next_edges[i].fn; }
  // Keeps `t` for backward as saved[saved.size()]; an op's own output with is_output. An undefined
  // `t` (an optional argument left out) keeps its place: saved[i].defined() is false.
  void save(const Tensor& t, bool is_output = false) {
    saved.push_back(SavedTensor());
    if (t) saved[saved.size() - 1].save(t, is_output);
  }
  Tensor unpack(size_t i) const { return saved[i].unpack(this); }

  static void* operator new(size_t nbytes) { return arena_allocate(nbytes); }
  static void operator delete(void* block, size_t nbytes) { arena_deallocate(block, nbytes); }

  std::atomic<int32_t> refcount{0};
  uint64_t sequence_nr;
  SmallVec<Edge, 2> next_edges;
  SmallVec<SavedTensor, 2> saved;  // in the order the op saved them (save()); inline up to two
  std::vector<std::weak_ptr<TensorImpl>> retained_outputs;  // outputs that called retain_grad()
  int64_t topo_slot = -1;  // engine scratch: index of this node in the running backward (restored after it)
  void* python_object = nullptr;  // the binding's cached grad_fn object, if one is alive (borrowed)
  // grad_fn.metadata: made by the binding on first use and kept as long as the node (the grad_fn
  // object comes and goes); opaque here, freed through release_node_metadata.
  void* metadata = nullptr;
  std::unique_ptr<NodeHooks> hooks;  // null while it has none (autograd/hooks.h)

 protected:
  const char* name_ = "";  // set when the node is made (make_node, or a subclass's constructor)

 private:
  template <class N>
  friend N* make_node(const char* name);
};

// The sink of every edge that reaches a leaf: adds the incoming gradient into `variable.grad`.
struct AccumulateGrad final : Node {
  explicit AccumulateGrad(Tensor leaf);
  ~AccumulateGrad() override;
  GradList apply(GradList&& grads) override;
  Tensor variable;
};

// What a backward needs to know about an input it does not save: its shape (to undo broadcasting)
// and dtype (to return a gradient of the input's own type). Inline, so a node needs no heap.
struct InputMeta {
  Shape shape;
  DType dtype = DType::Float32;
  static InputMeta of(const Tensor& t) { return {t->shape, t->dtype}; }
  const Shape& sizes() const { return shape; }
};

// A node type per backward formula, declared next to its forward op, where its apply() is defined:
//   FG_NODE(ExpBackward0);                         shown as "ExpBackward0"
//   FG_NODE_FROM(AddBackward0, BinaryNode);        with a base that keeps what backward reads
//   FG_NODE_NAMED(CopySlices, ViewRegionNode, "torch::autograd::CopySlices");   under another name
//   FG_NODE_UNNAMED(SumBackward, ReduceNode);      one formula that PyTorch shows under several names
//                                                  (SumBackward0, SumBackward1): no kName, so each op
//                                                  must pass the name when it records the node
// A node with members of its own is a struct written out, with FG_NODE_MEMBERS(Type) in it.
#define FG_NODE_MEMBERS(Type)                 \
  static constexpr const char* kName = #Type; \
  GradList apply(GradList&& grads) override;
#define FG_NODE_NAMED(Type, Base, Name)        \
  struct Type final : Base {                   \
    static constexpr const char* kName = Name; \
    GradList apply(GradList&& grads) override; \
  }
#define FG_NODE_FROM(Type, Base) FG_NODE_NAMED(Type, Base, #Type)
#define FG_NODE(Type) FG_NODE_FROM(Type, Node)
#define FG_NODE_UNNAMED(Type, Base)            \
  struct Type final : Base {                   \
    GradList apply(GradList&& grads) override; \
  }

template <class N>
N* make_node(const char* name) {
  N* node = new N();
  node->name_ = name;
  return node;
}

// The edge along which a gradient for `t` must travel (empty if t needs none).
Edge gradient_edge(const Tensor& t);

// While alive, leaves' grad_accumulator pointers can be read: the accumulator they point to, if any,
// is not deleted meanwhile (it clears the pointer under the same lock when it dies).
class AccumulatorsHeld {
 public:
  AccumulatorsHeld();
  ~AccumulatorsHeld();
  AccumulatorsHeld(const AccumulatorsHeld&) = delete;
  AccumulatorsHeld& operator=(const AccumulatorsHeld&) = delete;
};

// If `t` is a view whose history is stale (Tensor::history_stale), gives it a fresh grad_fn: its
// region of the base's current value (AsStridedBackward0, as PyTorch). Defined with the in-place
// machinery (ops/inplace.cpp). Must run before a node that takes `t` as input is allocated, so that
// the fresh node comes earlier on the tape: should_record() calls it on every input.
void refresh_view_history(const Tensor& t);

// Makes output `output_nr` of `fn` the history of `t`, whose values an in-place write (or a refresh
// of a view) replaced. As PyTorch (since 2.0), a retain_grad() moves along to the new grad_fn, so
// t.grad is the gradient of t's current value.
void set_history(const Tensor& t, NodeRef fn, uint32_t output_nr);

// Registers `t` (a non-leaf) to receive its gradient in t.grad (retain_grad()).
void retain_output(const Tensor& t);

// Does any input require grad while grad mode is on? Then ops record a node. Refreshes stale views.
bool should_record(std::initializer_list<const Tensor*> inputs);

// PyTorch's check when an op gives its output a node: the output is of a floating dtype. An integer
// tensor has a history only after an in-place comparison into it (eq_) with an operand that requires
// grad; as PyTorch, out-of-place ops on it then raise, while in-place ones write through it
// (InPlaceResultGuard: PyTorch's rebase_history makes no such check).
void check_differentiable_output(const Tensor& out);

// While alive, the ops on this thread compute the result of an in-place write (apply_inplace), which
// check_differentiable_output lets through. With a `destination` (self, when the op's result may
// be written over it: see apply_inplace), the op's result buffer is self's memory (result_buffer).
class InPlaceResultGuard {
 public:
  explicit InPlaceResultGuard(const Tensor* destination = nullptr);
  ~InPlaceResultGuard();
  InPlaceResultGuard(const InPlaceResultGuard&) = delete;
  InPlaceResultGuard& operator=(const InPlaceResultGuard&) = delete;

 private:
  bool previous_;
  const Tensor* previous_destination_;
};

// A buffer for an op's result: a new tensor, or, once, an alias of the waiting in-place destination
// (InPlaceResultGuard) when it has this shape and dtype. The elementwise maps take theirs here, so
// that x += y is one pass over x instead of a result and a copy.
Tensor result_buffer(const Shape& shape, DType dtype);

// Makes `node` (freshly allocated) the grad_fn of `out`, with one edge per input. An absent optional
// input (an empty Tensor: no bias) gets an empty edge, as PyTorch's next_functions shows it: (None, 0).
template <class N>
N* attach(N* node, const Tensor& out, std::initializer_list<const Tensor*> inputs) {
  check_differentiable_output(out);
  for (const Tensor* in : inputs) node->next_edges.push_back(*in ? gradient_edge(*in) : Edge{});
  out->grad_fn = NodeRef(node);
  out->output_nr = 0;
  return node;
}

// Records node type N, shown as `name`, for `out` = op(inputs) if needed; returns it so the op can
// save what its backward needs, or nullptr when nothing is recorded.
template <class N>
N* record(const Tensor& out, std::initializer_list<const Tensor*> inputs, const char* name = N::kName) {
  if (!should_record(inputs)) return nullptr;
  return attach(make_node<N>(name), out, inputs);
}

// record() for ops over a list of tensors (cat, stack).
template <class N>
N* record_many(const Tensor& out, const std::vector<Tensor>& inputs, const char* name = N::kName) {
  if (!grad_enabled()) return nullptr;
  bool any = false;
  for (const Tensor& in : inputs) any = should_record({&in}) || any;
  if (!any) return nullptr;
  check_differentiable_output(out);
  N* node = make_node<N>(name);
  for (const Tensor& in : inputs) node->next_edges.push_back(gradient_edge(in));
  out->grad_fn = NodeRef(node);
  out->output_nr = 0;
  return node;
}

// For in-place ops that overwrite `self` with something computed from its old value and `other`:
// a node N with edges to self's previous history and to `other` (see rebase_history in ops.h).
// Both edges are taken before the write: `other` may be a view of self, and taking its edge after
// the write would give it a fresh history (refresh_view_history) that is later on the tape than N.
template <class N>
N* make_inplace_node(Edge self_edge, Edge other_edge, const char* name = N::kName) {
  N* node = make_node<N>(name);
  node->next_edges.push_back(std::move(self_edge));
  node->next_edges.push_back(std::move(other_edge));
  return node;
}

// Runs backward from `roots` seeded with `grad_roots` (same length; defined tensors of the roots'
// dtypes and shapes). Gradients reaching leaves accumulate into their .grad. With `inputs` (the
// autograd.grad form), .grad is left alone: only the nodes that lead to an input edge run, and the
// gradient flowing along each input edge is returned (undefined where none arrives).
// With `create_graph`, the backward runs in grad mode: the gradients are recorded ops, with a
// history of their own (higher-order gradients).
std::vector<Tensor> run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots,
                                 bool retain_graph, const std::vector<Edge>* inputs = nullptr,
                                 bool create_graph = false);

}  // namespace fg
