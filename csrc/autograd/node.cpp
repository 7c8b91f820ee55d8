#include "autograd/node.h"

#include <mutex>
#include <vector>

#include "autograd/anomaly_mode.h"
#include "core/spin_lock.h"
#include "ops/ops.h"

namespace fg {

namespace {
std::atomic<uint64_t> next_sequence_nr{1};  // 0 is the sinks' position
thread_local bool grad_mode = true;

// A leaf's AccumulateGrad is made on first use and shared while some graph holds it. Forward ops
// running without the GIL ask for it from several threads at once, while another thread may drop
// the last graph holding it: finding, making and forgetting it take this lock, and a node whose
// count has already reached zero (its deletion under way) is replaced, never revived.
SpinLock accumulator_lock;
}  // namespace

bool grad_enabled() { return grad_mode; }
void set_grad_enabled(bool enabled) { grad_mode = enabled; }

std::atomic<bool> anomaly_mode{false};
std::atomic<bool> anomaly_check_nan{true};
void (*store_forward_traceback)(Node* node) = nullptr;
void (*report_failed_node)(const Node* node) = nullptr;

Node::Node() : sequence_nr(next_sequence_nr.fetch_add(1, std::memory_order_relaxed)) {
  if (anomaly_enabled()) store_forward_traceback(this);
}
void (*release_node_metadata)(void* metadata) = nullptr;

Node::~Node() {
  if (metadata) release_node_metadata(metadata);
}

void Node::release_saved() {
  for (SavedTensor& s : saved) s.reset();
}

void retain_node(Node* node) { node->refcount.fetch_add(1, std::memory_order_relaxed); }

// Deleting a node drops its edges, which may delete the next node, and so on down a chain of a
// million ops. Deletions requested while one is in progress are queued instead of recursing.
void release_node(Node* node) {
  if (node->refcount.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  thread_local std::vector<Node*> pending;
  thread_local bool draining = false;
  pending.push_back(node);
  if (draining) return;
  draining = true;
  while (!pending.empty()) {
    Node* next = pending.back();
    pending.pop_back();
    delete next;
  }
  draining = false;
}

const char* const kBackwardTwiceMessage =
    "Trying to backward through the graph a second time (or directly access saved tensors after they have already "
    "been freed). Saved intermediate values of the graph are freed when you call .backward() or autograd.grad(). "
    "Specify retain_graph=True if you need to backward through the graph a second time or if you need to access "
    "saved tensors after calling backward.";

void SavedTensor::save(const Tensor& t, bool is_output) {
  if (t->storage->inference())
    throw RuntimeError(
        "Inference tensors cannot be saved for backward. Please do not use Tensors created in inference mode in "
        "computation tracked by autograd. To work around this, you can make a clone to get a normal tensor and use it "
        "in autograd, or use `torch.no_grad()` instead of `torch.inference_mode()`.");
  data_ = is_output ? alias(t) : t;
  version_ = t->version();
  output_nr_ = t->output_nr;
  was_saved_ = true;
  is_output_ = is_output;
}

void SavedTensor::move_output(const Tensor& result, const Tensor& self) {
  if (!is_output_ || !data_ || data_->storage != result->storage) return;
  data_ = alias(self);
  version_ = self->version();
}

std::string producer_name(const char* node_name) {
  std::string name = node_name;
  size_t at = name.rfind("Backward");
  if (at == std::string::npos) return name;
  std::string number = name.substr(at + 8);
  for (char c : number)
    if (c < '0' || c > '9') return name;
  return name.substr(0, at) + (number == "0" ? "" : number);
}

Tensor SavedTensor::unpack(const Node* owner) const {
  Tensor t = unpack(owner->name());
  // An integer output (max's indices) has no history, as in PyTorch, where it is not differentiable.
  if (is_output_ && grad_enabled() && is_floating(t->dtype)) {
    // A temporary holding its owner: the owner itself still holds only the history-free alias.
    Tensor with_history = alias(t);
    with_history->grad_fn = NodeRef(const_cast<Node*>(owner));
    with_history->output_nr = output_nr_;
    t = std::move(with_history);
  }
  return t;
}

Tensor SavedTensor::unpack(const char* owner_name) const {
  if (!data_) throw RuntimeError(kBackwardTwiceMessage);
  if (data_->version() != version_) {
    std::string shape;
    for (size_t d = 0; d < data_->shape.size(); ++d) shape += (d ? ", " : "") + std::to_string(data_->shape[d]);
    std::string producer;
    if (is_output_) producer = cat(", which is output ", output_nr_, " of ", producer_name(owner_name), ",");
    else if (data_->grad_fn)
      producer = cat(", which is output ", data_->output_nr, " of ", producer_name(data_->grad_fn->name()), ",");
    throw RuntimeError(cat("one of the variables needed for gradient computation has been modified by an inplace "
                           "operation: [fastgrad.",
                           legacy_type_name(data_->dtype), " [", shape, "]]", producer, " is at version ",
                           data_->version(), "; expected version ", version_, " instead."));
  }
  return data_;
}

// A sink has nothing downstream, so it may run after everything else; tape position 0 says so even
// though it is created lazily, after some of the nodes that feed it.
AccumulateGrad::AccumulateGrad(Tensor leaf) : variable(std::move(leaf)) {
  sequence_nr = 0;
  name_ = "torch::autograd::AccumulateGrad";  // as PyTorch, whose C++-only nodes carry their namespace
}

AccumulateGrad::~AccumulateGrad() {
  std::lock_guard<SpinLock> lock(accumulator_lock);
  if (variable->grad_accumulator == this) variable->grad_accumulator = nullptr;
}

GradList AccumulateGrad::apply(GradList&& grads) {
  Tensor& incoming = grads[0];
  // A leaf that stopped requiring grad (requires_grad_(False) after the forward) keeps no gradient.
  if (!incoming || !variable->requires_grad()) return {};
  if (grad_enabled()) {
    // create_graph: .grad keeps the gradient's history, so it is a recorded copy (CopyBackwards, as
    // PyTorch's), and later gradients are added out of place, never into a tensor with history.
    variable->grad =
        variable->grad ? add(variable->grad, incoming) : copy_(empty(incoming->shape, incoming->dtype), incoming);
  } else if (!variable->grad) {
    // Keep the incoming buffer only when nothing else can see it; otherwise copy, so that .grad
    // never aliases another tensor (an expanded view, a user-supplied gradient). A gradient that is a
    // view (a linear layer's weight gradient comes out as t() of a product, a bias's as a reshape
    // of a sum) is kept too when its base is held by nothing but the view, as a plain tensor: the
    // base goes away with the view.
    const Tensor& base = incoming->view_base;
    const bool only_base = base && base.use_count() == 1 && base->storage == incoming->storage;
    const bool exclusive = incoming.use_count() == 1 && incoming->storage.use_count() == 1 + only_base &&
                           incoming->is_contiguous() && incoming->offset == 0 &&
                           incoming->numel() * static_cast<int64_t>(itemsize(incoming->dtype)) ==
                               static_cast<int64_t>(incoming->storage->nbytes());
    if (!exclusive) variable->grad = clone(incoming);
    else variable->grad = base ? make_view(incoming, incoming->shape, incoming->strides, 0) : incoming;
  } else {
    add_(variable->grad, incoming);
  }
  return {};
}

AccumulatorsHeld::AccumulatorsHeld() { accumulator_lock.lock(); }
AccumulatorsHeld::~AccumulatorsHeld() { accumulator_lock.unlock(); }

Edge gradient_edge(const Tensor& t) {
  refresh_view_history(t);
  if (!t->requires_grad()) return {};
  if (t->grad_fn) return {t->grad_fn, t->output_nr};
  if (!t->requires_grad_leaf) return {};  // a view made under no_grad: it requires grad only through its base
  // The leaf's accumulator if it is alive, with a count added for the caller (under the lock).
  auto living = [&t]() -> NodeRef {
    AccumulateGrad* existing = t->grad_accumulator;
    if (!existing) return {};
    int32_t count = existing->refcount.load(std::memory_order_relaxed);
    while (count > 0 && !existing->refcount.compare_exchange_weak(count, count + 1, std::memory_order_relaxed)) {
    }
    return count > 0 ? NodeRef::adopt(existing) : NodeRef();
  };
  {
    std::lock_guard<SpinLock> lock(accumulator_lock);
    if (NodeRef existing = living()) return {std::move(existing), 0};
  }
  // Made outside the lock: in anomaly mode a node's constructor calls Python, whose garbage
  // collector may delete another leaf's accumulator, and that destructor takes the lock.
  // If another thread's came first, `made` is deleted on return, after the lock is released (it
  // was declared first, so it is destroyed last).
  NodeRef made(new AccumulateGrad(t));
  std::lock_guard<SpinLock> lock(accumulator_lock);
  if (NodeRef existing = living()) return {std::move(existing), 0};
  t->grad_accumulator = static_cast<AccumulateGrad*>(made.get());
  return {std::move(made), 0};
}

namespace {
thread_local bool computing_in_place_result = false;
thread_local const Tensor* in_place_destination = nullptr;
}  // namespace

InPlaceResultGuard::InPlaceResultGuard(const Tensor* destination)
    : previous_(computing_in_place_result), previous_destination_(in_place_destination) {
  computing_in_place_result = true;
  in_place_destination = destination;
}
InPlaceResultGuard::~InPlaceResultGuard() {
  computing_in_place_result = previous_;
  in_place_destination = previous_destination_;
}

Tensor result_buffer(const Shape& shape, DType dtype) {
  const Tensor* destination = in_place_destination;
  if (destination && (*destination)->shape == shape && (*destination)->dtype == dtype) {
    in_place_destination = nullptr;  // taken: any later buffer of the op is its own
    return alias(*destination);
  }
  return empty(shape, dtype);
}

void check_differentiable_output(const Tensor& out) {
  if (!is_floating(out->dtype) && !computing_in_place_result)
    throw RuntimeError(cat("Autograd not support dtype: ", scalar_type_name(out->dtype)));
}

bool should_record(std::initializer_list<const Tensor*> inputs) {
  if (!grad_enabled()) return false;
  bool any = false;
  for (const Tensor* in : inputs) {
    if (!*in) continue;  // an absent optional input (no bias)
    refresh_view_history(*in);
    any = any || (*in)->requires_grad();
  }
  return any;
}

}  // namespace fg
