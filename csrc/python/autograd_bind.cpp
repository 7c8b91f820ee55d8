// The engine as Python calls it (Tensor.backward, fastgrad.autograd.backward and grad) and the node
// of a custom Function (fastgrad.autograd.Function), whose backward is a Python callable that the
// engine runs in tape order like any other node.
#include <algorithm>
#include <mutex>

#include "autograd/node.h"
#include "core/shape.h"
#include "python/bindings.h"
#include "python/capture.h"

namespace fg {

namespace {

// The tensors a custom Function saved with ctx.save_for_backward. Shared by its node, which frees
// them after backward (unless retain_graph), and its ctx, which reads them (ctx.saved_tensors);
// so the ctx needs no reference to the node, which holds the ctx: no cycle.
struct SavedTensors {
  std::vector<SavedTensor> items;  // one per saved value; a None is an item never saved
  std::string owner;               // the node's name, for the error about a modified output
  // The node while its backward runs (so certainly alive): a saved output unpacked then, in a
  // backward with create_graph, gets it back as its grad_fn.
  const Node* node = nullptr;
  bool released = false;

  py::tuple unpack() const {
    if (released) throw RuntimeError(kBackwardTwiceMessage);
    py::tuple out(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].defined()) {
        out[i] = py::none();
        continue;
      }
      out[i] = py::cast(node ? items[i].unpack(node) : items[i].unpack(owner.c_str()));
    }
    return out;
  }
};

// Can a tensor of `shape` be broadcast to `target`? (Then a gradient of shape `target` sums back.)
bool expandable_to(const Shape& shape, const Shape& target) {
  if (shape.size() > target.size()) return false;
  size_t lead = target.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != 1 && shape[i] != target[lead + i]) return false;
  return true;
}

// A custom Function's node. `backward` is the shared Python code (BackwardFunction._run_backward
// in fastgrad/autograd/function.py): given a gradient or None per output, it calls the user's
// backward, checks what comes back against the forward's arguments, and returns a gradient or None
// per tensor argument (per edge). Here, as PyTorch's engine does for every node, each gradient is
// summed to its input's shape if it broadcasts to it and converted to its dtype.
// A node of an op composed in Python (record_node) calls backward(grads, saved) instead: its saved
// tensors come from the node, not from what the Python code kept of an earlier call.
struct PyFunctionNode final : Node {
  PyFunctionNode(std::string name, py::object backward, uint32_t outputs, std::shared_ptr<SavedTensors> saved,
                 bool passes_saved)
      : name_text_(std::move(name)),
        backward_(std::move(backward)),
        num_outputs_(outputs),
        saved_(std::move(saved)),
        passes_saved_(passes_saved) {
    name_ = name_text_.c_str();
  }

  ~PyFunctionNode() override { release_python_object(backward_.release().ptr()); }

  uint32_t num_outputs() const override { return num_outputs_; }
  bool runs_without_grads() const override { return true; }

  void release_saved() override {
    Node::release_saved();
    for (SavedTensor& s : saved_->items) s.reset();
    saved_->released = true;
  }

  GradList apply(GradList&& grads) override {
    py::gil_scoped_acquire gil;
    struct Running {  // saved_->node is this node until the Python backward returns or raises
      SavedTensors& saved;
      ~Running() { saved.node = nullptr; }
    } running{*saved_};
    saved_->node = this;
    py::tuple args(grads.size());
    for (size_t i = 0; i < grads.size(); ++i) args[i] = grads[i] ? py::cast(grads[i]) : py::none();
    py::list result(passes_saved_ ? backward_(args, saved_) : backward_(args));  // a Python exception propagates
    GradList out;
    for (size_t k = 0; k < next_edges.size(); ++k) {
      py::handle g = result[k];
      if (g.is_none() || !next_edges[k].fn) {
        out.push_back(Tensor());
        continue;
      }
      Tensor grad = g.cast<Tensor>();
      Shape shape = inputs[k].sizes();
      if (grad->shape != shape) {
        if (!expandable_to(shape, grad->shape))
          throw RuntimeError(cat("Function ", name_text_, " returned an invalid gradient at index ", k, " - got ",
                                 shape_str(grad->shape), " but expected shape compatible with ", shape_str(shape)));
        grad = sum_to(grad, shape);
      }
      out.push_back(to_dtype(grad, inputs[k].dtype));
    }
    return out;
  }

  std::vector<InputMeta> inputs;  // one per edge

  // An in-place form composed in Python wrote `result` into `self`: a saved result becomes self.
  void move_saved_output(const Tensor& result, const Tensor& self) {
    for (SavedTensor& s : saved_->items) s.move_output(result, self);
  }

 private:
  friend PyObject* fg::function_backward(const Node* node);
  friend void fg::clear_function_backward(Node* node);
  std::string name_text_;  // what name() shows
  py::object backward_;
  uint32_t num_outputs_;
  std::shared_ptr<SavedTensors> saved_;
  bool passes_saved_;
};

// Makes the node of one custom Function call: an edge per tensor argument (`inputs`), and the
// grad_fn of each differentiable output (`outputs`: the forward's results in order, undefined for
// those that are not differentiable tensors; a position is an output_nr). Saves `to_save`
// (undefined: None), an output without its history. Returns what ctx.saved_tensors reads.
std::shared_ptr<SavedTensors> make_function_node(py::object backward, std::string name,
                                                 const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                                                 const std::vector<Tensor>& to_save, bool passes_saved) {
  // The edges first: making one may give a stale view a fresh history, which must come earlier
  // on the tape than this node.
  std::vector<Edge> edges;
  for (const Tensor& in : inputs) edges.push_back(gradient_edge(in));
  auto saved = std::make_shared<SavedTensors>();
  saved->owner = name;
  auto* node = new PyFunctionNode(std::move(name), std::move(backward), static_cast<uint32_t>(outputs.size()), saved,
                                  passes_saved);
  NodeRef owner(node);  // frees the node on return if no output takes it
  for (size_t i = 0; i < inputs.size(); ++i) {
    node->next_edges.push_back(std::move(edges[i]));
    node->inputs.push_back(InputMeta::of(inputs[i]));
  }
  std::vector<Tensor> outs;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i]) continue;
    const Tensor& out = outputs[i];
    out->grad_fn = owner;
    out->output_nr = static_cast<uint32_t>(i);
    // A view made in forward: its history is the Function's node, which writes through it would
    // bypass, as PyTorch refuses.
    if (out->view_base) {
      out->view_tracks_history = false;
      out->view_origin = ViewOrigin::CustomFunction;
    }
    outs.push_back(out);
  }
  for (const Tensor& t : to_save) {
    SavedTensor& slot = saved->items.emplace_back();
    if (t) slot.save(t, std::find(outs.begin(), outs.end(), t) != outs.end());
  }
  return saved;
}

}  // namespace

PyObject* function_backward(const Node* node) {
  auto* fn = dynamic_cast<const PyFunctionNode*>(node);
  return fn && fn->backward_ ? fn->backward_.ptr() : nullptr;
}

void clear_function_backward(Node* node) {
  if (auto* fn = dynamic_cast<PyFunctionNode*>(node)) fn->backward_ = py::object();
}

// One backward pass at a time in the process: passes keep per-node scratch (Node::topo_slot), and a
// custom Function's Python backward lets other threads run. The same thread may nest passes (a
// backward that runs a backward), which the engine allows for. A thread that must wait does so
// without the GIL, so that the running pass can take it back.
std::recursive_mutex engine_mutex;

std::unique_lock<std::recursive_mutex> lock_engine() {
  std::unique_lock<std::recursive_mutex> lock(engine_mutex, std::try_to_lock);
  if (!lock.owns_lock()) {
    py::gil_scoped_release no_gil;
    lock.lock();
  }
  return lock;
}

namespace {

// PyTorch's warning (once per process) for a backward into .grad with create_graph: a leaf's
// gradient then holds a graph that holds the leaf.
void warn_gradient_cycle() {
  static bool warned = false;
  if (warned) return;
  warned = true;
  if (PyErr_WarnEx(PyExc_UserWarning,
                   "Using backward() with create_graph=True will create a reference cycle between the parameter and "
                   "its gradient which can cause a memory leak. We recommend using autograd.grad when creating the "
                   "graph to avoid this. If you have to use this function, make sure to reset the .grad fields of "
                   "your parameters to None after use to break the cycle and avoid the leak.",
                   1) != 0)
    throw py::error_already_set();
}

// torch.autograd.backward's check of an output given no gradient (ones then stand for it).
void check_implicit_gradient(const Tensor& root) {
  if (root->requires_grad() && root->numel() != 1)
    throw RuntimeError("grad can be implicitly created only for scalar outputs");
}

void check_gradient_edge(const Tensor& root, size_t i) {
  if (!gradient_edge(root).fn)  // a view made under no_grad requires grad but has no gradient edge
    throw RuntimeError(cat("element ", i, " of tensors does not require grad and does not have a grad_fn"));
}

// root.backward() without a gradient, with no Python object involved: a compiled program replays it.
void backward_of_root(const Tensor& root, bool retain_graph, bool create_graph) {
  check_implicit_gradient(root);
  check_gradient_edge(root, 0);
  if (create_graph) warn_gradient_cycle();
  auto lock = lock_engine();
  run_backward({root}, {ones_like(root)}, retain_graph, nullptr, create_graph);
}

// torch.autograd.backward's checks of the outputs and of the gradient given for each (a tensor, or
// None: ones for a single-element output), in its order, then the engine. With `inputs` (a list of
// tensors), returns their gradients (None where none arrives) and leaves .grad alone.
py::object run_backward_checked(py::sequence tensors, py::sequence grad_tensors, bool retain_graph, py::handle inputs,
                                bool create_graph) {
  std::vector<Tensor> roots, grads;
  for (size_t i = 0; i < tensors.size(); ++i) {
    Tensor root = tensors[i].cast<Tensor>();
    py::handle g = grad_tensors[i];
    if (g.is_none()) {
      check_implicit_gradient(root);
      grads.push_back(Tensor());
    } else if (!py::isinstance<TensorImpl>(g)) {
      throw TypeError(cat("gradients can be either Tensors or None, but got ", type_name(g)));
    } else {
      Tensor grad = g.cast<Tensor>();
      if (grad->shape != root->shape)
        throw RuntimeError(cat("Mismatch in shape: grad_output[", i, "] has a shape of ",
                               std::string(py::str(size_to_py(grad->shape))), " and output[", i, "] has a shape of ",
                               std::string(py::str(size_to_py(root->shape))), "."));
      grads.push_back(to_dtype(grad, root->dtype));
    }
    roots.push_back(root);
  }
  for (size_t i = 0; i < roots.size(); ++i) {
    check_gradient_edge(roots[i], i);
    if (!grads[i]) grads[i] = ones_like(roots[i]);
  }
  // The pass runs with the GIL, released around each node whose incoming gradients are long
  // (autograd/long_work.h): a short pass never pays for giving the GIL away.
  if (inputs.is_none()) {
    if (create_graph) warn_gradient_cycle();
    auto lock = lock_engine();
    run_backward(roots, grads, retain_graph, nullptr, create_graph);
    return py::none();
  }
  std::vector<Edge> edges;
  for (py::handle h : inputs) {
    if (!py::isinstance<TensorImpl>(h))
      throw RuntimeError(cat("all inputs have to be Tensors or GradientEdges, but got ", type_name(h)));
    Tensor t = h.cast<Tensor>();
    if (!t->requires_grad()) throw RuntimeError("One of the differentiated Tensors does not require grad");
    edges.push_back(gradient_edge(t));  // none for a view made under no_grad: no gradient arrives, as in PyTorch
  }
  auto lock = lock_engine();
  std::vector<Tensor> captured = run_backward(roots, grads, retain_graph, &edges, create_graph);
  py::list out;
  for (const Tensor& g : captured) out.append(g ? py::cast(g) : py::none());
  return out;
}

}  // namespace

void tensor_backward(const Tensor& self, py::handle gradient, py::handle retain_graph, bool create_graph) {
  bool retain = retain_graph.is_none() ? create_graph : retain_graph.cast<bool>();
  if (!gradient.is_none()) {  // not recorded: a compiled function that passes a gradient runs eagerly
    run_backward_checked(py::make_tuple(self), py::make_tuple(gradient), retain, py::none(), create_graph);
    return;
  }
  // loss.backward(), a step of a compiled function's program: C++ only, run with the GIL as eagerly (the
  // pass writes the leaves' .grad; it releases the GIL around its long nodes).
  call_op(false,
          capture::tagged<capture::ScalarForm::Backward>(
              with_gil([](const Tensor& root, bool retain, bool create) { backward_of_root(root, retain, create); })),
          self, retain, create_graph);
}

void bind_autograd(py::module_& m) {
  py::class_<SavedTensors, std::shared_ptr<SavedTensors>>(m, "SavedTensors").def("unpack", &SavedTensors::unpack);
  // A custom Function's node (autograd/function.py), whose backward runs the user's Python code with what
  // its ctx kept of this call. While a compiled function captures, a call whose ctx holds no tensor
  // attribute records a node by record_node instead: one that holds one cannot be replayed.
  m.def("record_function", [](py::object backward, std::string name, const std::vector<Tensor>& inputs,
                              py::handle outputs, py::handle to_save) {
    if (capture_in_progress())
      capture::cannot_replay(
          "a custom autograd Function whose ctx keeps a tensor as an attribute (ctx.save_for_backward would save it)");
    return make_function_node(std::move(backward), std::move(name), inputs, optional_tensor_list(outputs),
                              optional_tensor_list(to_save), false);
  });
  // The node of an op composed in Python (_methods._recorded): backward(grads, saved) reads the saved
  // tensors from its node, so the node is a step of a compiled function's program, made again by a
  // replay for its own outputs (the Python callable, which holds no tensor of the capturing call, kept).
  m.def("record_node", [](py::object backward, std::string name, const std::vector<Tensor>& inputs, py::handle outputs,
                          py::handle to_save) {
    auto make = [](const py::object& backward, const std::string& name, const std::vector<Tensor>& inputs,
                   const std::vector<Tensor>& outputs, const std::vector<Tensor>& to_save) {
      make_function_node(backward, name, inputs, outputs, to_save, true);
    };
    call_op(false, with_gil(make), backward, name, inputs, optional_tensor_list(outputs),
            optional_tensor_list(to_save));
  });
  // The in-place forms composed in Python (_methods._in_place): both halves are steps of a compiled
  // function's program, so that it replays them (the write with the GIL: the node it moves a saved
  // output of may be a Python-made one).
  m.def(
      "inplace_input",
      [](const Tensor& self, const std::vector<Tensor>& sources, bool elementwise) {
        return call_op(false, fg::inplace_input, self, sources, elementwise);
      },
      py::arg("self"), py::arg("sources"), py::arg("elementwise") = true);
  m.def("write_result_", [](const Tensor& self, const Tensor& result) {
    auto write = [](const Tensor& self, const Tensor& result) {
      NodeRef node = result->grad_fn;
      write_result_(self, result);
      if (auto* fn = dynamic_cast<PyFunctionNode*>(node.get())) fn->move_saved_output(result, self);
      return self;
    };
    return call_op(false, with_gil(write), self, result);
  });
  m.def("run_backward", &run_backward_checked, py::arg("tensors"), py::arg("grad_tensors"), py::arg("retain_graph"),
        py::arg("inputs"), py::arg("create_graph") = false);
}

}  // namespace fg
