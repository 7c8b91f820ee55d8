// Gradient hooks over Python functions (the core's side: autograd/hooks.h). The shared Python layer
// (fastgrad/_hooks.py) checks what the user's function returns and wraps these primitives in
// Tensor.register_hook, register_post_accumulate_grad_hook and the grad_fn methods; each primitive
// registers a function and returns another that removes it.
#include "autograd/node.h"
#include "python/bindings.h"

namespace fg {

namespace {

// What a Python hook holds, for the cycle collector (see tensor_traverse).
struct PythonFunction {
  py::object fn;  // None once removed
};

// The engine may run without the GIL: calls and the final release take it. remove() comes from
// Python (the GIL held) and drops the function at once, so that its closure is freed.
template <class Base>
struct PyHook : Base, PythonFunction {
  explicit PyHook(py::object f) { fn = std::move(f); }
  ~PyHook() override { release_python_object(fn.release().ptr()); }
  void remove() override {
    Base::remove();
    fn = py::object();
  }
  // The function, with a reference of its own (a hook may remove itself while it runs); null once
  // removed. The GIL must be held.
  py::object function() const { return fn; }
};

py::tuple grads_to_py(const GradList& grads) {
  py::tuple out(grads.size());
  for (size_t i = 0; i < grads.size(); ++i) out[i] = grads[i] ? py::cast(grads[i]) : py::none();
  return out;
}

// A hook's replacement tuple, already checked by the Python layer (length, None only where None was).
void grads_from_py(py::handle replacement, GradList& grads) {
  py::tuple items = py::reinterpret_borrow<py::tuple>(replacement);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = items[i].is_none() ? Tensor() : items[i].cast<Tensor>();
}

struct PyTensorHook final : PyHook<TensorHook> {
  using PyHook::PyHook;
  Tensor call(const Tensor& grad) override {
    py::gil_scoped_acquire gil;
    py::object f = function();
    if (!f) return Tensor();
    py::object result = f(grad ? py::cast(grad) : py::none());  // a Python exception propagates as itself
    return result.is_none() ? Tensor() : result.cast<Tensor>();
  }
};

struct PyPostAccumulateGradHook final : PyHook<PostAccumulateGradHook> {
  using PyHook::PyHook;
  void call(const Tensor& leaf) override {
    py::gil_scoped_acquire gil;
    if (py::object f = function()) f(leaf);
  }
};

struct PyNodePreHook final : PyHook<NodePreHook> {
  using PyHook::PyHook;
  void call(GradList& grad_outputs) override {
    py::gil_scoped_acquire gil;
    py::object f = function();
    if (!f) return;
    py::object result = f(grads_to_py(grad_outputs));
    if (!result.is_none()) grads_from_py(result, grad_outputs);
  }
};

struct PyNodePostHook final : PyHook<NodePostHook> {
  using PyHook::PyHook;
  void call(GradList& grad_inputs, const GradList& grad_outputs) override {
    py::gil_scoped_acquire gil;
    py::object f = function();
    if (!f) return;
    py::object result = f(grads_to_py(grad_inputs), grads_to_py(grad_outputs));
    if (!result.is_none()) grads_from_py(result, grad_inputs);
  }
};

NodeHooks& hooks_of(Node* node) {
  if (!node->hooks) node->hooks = std::make_unique<NodeHooks>();
  return *node->hooks;
}

LeafHooks& hooks_of(TensorImpl* leaf) {
  if (!leaf->hooks) leaf->hooks = std::make_unique<LeafHooks>();
  return *leaf->hooks;
}

// Adds `hook` to `list` and returns the function that removes it. Lists change under the engine lock,
// as a backward running in another thread may be reading them, and with the GIL, as the cycle
// collector may be (tensor_traverse).
template <class H, class Hooked>
py::cpp_function add(HookList<H>& list, std::shared_ptr<Hooked> hook) {
  list.add(hook);
  return py::cpp_function([registered = std::weak_ptr<Hook>(hook)] {
    if (std::shared_ptr<Hook> h = registered.lock()) h->remove();
  });
}

// A non-leaf's hooks live on its grad_fn, by output_nr, as PyTorch keeps them: after an in-place
// change of the tensor, they still see the gradient w.r.t. its former value.
py::cpp_function add_tensor_hook(const Tensor& t, py::function fn) {
  auto lock = lock_engine();
  refresh_view_history(t);
  auto hook = std::make_shared<PyTensorHook>(std::move(fn));
  if (t->grad_fn) return add(hooks_of(t->grad_fn.get()).of_output(t->output_nr), hook);
  return add(hooks_of(t.get()).pre, hook);
}

py::cpp_function add_post_accumulate_grad_hook(const Tensor& leaf, py::function fn) {
  auto lock = lock_engine();
  return add(hooks_of(leaf.get()).post_accumulate, std::make_shared<PyPostAccumulateGradHook>(std::move(fn)));
}

py::cpp_function add_node_prehook(py::handle node, py::function fn) {
  auto lock = lock_engine();
  return add(hooks_of(node_of(node).get()).pre, std::make_shared<PyNodePreHook>(std::move(fn)));
}

py::cpp_function add_node_hook(py::handle node, py::function fn) {
  auto lock = lock_engine();
  return add(hooks_of(node_of(node).get()).post, std::make_shared<PyNodePostHook>(std::move(fn)));
}

// ---- the cycle collector
// A hook that refers to its own tensor (or grad_fn object) makes a cycle through C++: Python object
// -> tensor -> hook -> function -> Python object. The collector finds it only if the object reports
// the hooks' functions among what it refers to. It does while it is their only owner: the sole owner
// of the tensor, itself the sole owner of its grad_fn, as PyTorch's tensors do. (Otherwise the hooks
// live on through someone else, and reporting them would let the collector free what they use.)

template <class H>
int visit_hooks(const HookList<H>& list, visitproc visit, void* arg) {
  for (const auto& hook : list.items())
    if (auto* held = dynamic_cast<const PythonFunction*>(hook.get()); held && held->fn) Py_VISIT(held->fn.ptr());
  return 0;
}

int visit_hooks(const NodeHooks& hooks, visitproc visit, void* arg) {
  for (const auto& entry : hooks.outputs)
    if (int r = visit_hooks(entry.second, visit, arg)) return r;
  if (int r = visit_hooks(hooks.pre, visit, arg)) return r;
  return visit_hooks(hooks.post, visit, arg);
}

bool owns_node(const NodeRef& node) { return node && node->refcount.load() == 1; }

// What a node holds of Python: its hooks' functions, and a custom Function's backward, through
// which its ctx (ctx.out = out keeps an output: a cycle PyTorch's collector breaks too).
int visit_node(const Node& node, visitproc visit, void* arg) {
  if (node.hooks)
    if (int r = visit_hooks(*node.hooks, visit, arg)) return r;
  Py_VISIT(function_backward(&node));
  return 0;
}

void clear_node(Node& node) {
  node.hooks.reset();
  clear_function_backward(&node);
}

traverseproc pybind_tensor_traverse = nullptr;
inquiry pybind_tensor_clear = nullptr;
traverseproc pybind_node_traverse = nullptr;
inquiry pybind_node_clear = nullptr;

int tensor_traverse(PyObject* self, visitproc visit, void* arg) {
  if (int r = pybind_tensor_traverse(self, visit, arg)) return r;
  const Tensor* t = tensor_of(self);
  if (!t || t->use_count() != 1) return 0;
  if (const LeafHooks* leaf = (*t)->hooks.get()) {
    if (int r = visit_hooks(leaf->pre, visit, arg)) return r;
    if (int r = visit_hooks(leaf->post_accumulate, visit, arg)) return r;
  }
  const NodeRef& grad_fn = (*t)->grad_fn;
  return owns_node(grad_fn) ? visit_node(*grad_fn.get(), visit, arg) : 0;
}

int tensor_clear(PyObject* self) {
  const Tensor* t = tensor_of(self);
  if (t && t->use_count() == 1) {
    (*t)->hooks.reset();
    if (owns_node((*t)->grad_fn)) clear_node(*(*t)->grad_fn.get());
  }
  return pybind_tensor_clear(self);
}

// The node of a grad_fn object if the object is its only owner, else null (the collector's callbacks
// must not throw).
Node* owned_node(PyObject* self) noexcept {
  try {
    const NodeRef& node = node_of(self);
    return owns_node(node) ? node.get() : nullptr;
  } catch (...) {
    return nullptr;
  }
}

int node_traverse(PyObject* self, visitproc visit, void* arg) {
  if (int r = pybind_node_traverse(self, visit, arg)) return r;
  Node* node = owned_node(self);
  return node ? visit_node(*node, visit, arg) : 0;
}

int node_clear(PyObject* self) {
  if (Node* node = owned_node(self)) clear_node(*node);
  return pybind_node_clear(self);
}

}  // namespace

void bind_hooks(py::module_& m) {
  m.def("add_tensor_hook", &add_tensor_hook);
  m.def("add_post_accumulate_grad_hook", &add_post_accumulate_grad_hook);
  m.def("add_node_prehook", &add_node_prehook);
  m.def("add_node_hook", &add_node_hook);
  auto* tensor_type = reinterpret_cast<PyTypeObject*>(m.attr("Tensor").ptr());
  pybind_tensor_traverse = std::exchange(tensor_type->tp_traverse, &tensor_traverse);
  pybind_tensor_clear = std::exchange(tensor_type->tp_clear, &tensor_clear);
  auto* node_type = reinterpret_cast<PyTypeObject*>(m.attr("Node").ptr());
  pybind_node_traverse = std::exchange(node_type->tp_traverse, &node_traverse);
  pybind_node_clear = std::exchange(node_type->tp_clear, &node_clear);
}

}  // namespace fg
