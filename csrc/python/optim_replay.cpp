// optim_replay.h: Adam/AdamW's and SGD's step() and zero_grad() as a replay runs them. Each mirrors
// its Python method's fused path (python/fastgrad/optim/adam.py, sgd.py, optimizer.py) read for read
// and op for op: step counts go up with the same in-place add, step sizes and bias corrections are
// the same double arithmetic (Python's float ** is C's pow; this file is built with -ffp-contract=off
// so that no product and sum fuse), and the updates are the same adam_/sgd_ calls. Everything is
// read and checked before anything changes, so a false return leaves the Python method a clean slate.
#include "python/optim_replay.h"

#include <cmath>
#include <cstring>

#include "autograd/grad_mode.h"
#include "ops/ops.h"

namespace fg::capture {

namespace {

// group[key] (borrowed), null when group is not a dict or lacks the key.
PyObject* entry(PyObject* group, const char* key) {
  return PyDict_Check(group) ? PyDict_GetItemString(group, key) : nullptr;
}

// A Python float, or an int that a double holds exactly (Python's int-float arithmetic then gives
// the same doubles); false for anything else (a tensor learning rate, a bool, a big int).
bool number_of(PyObject* obj, double& out) {
  if (obj && PyFloat_CheckExact(obj)) {
    out = PyFloat_AS_DOUBLE(obj);
    return true;
  }
  if (!obj || !PyLong_CheckExact(obj)) return false;
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
  constexpr long long kExact = 1LL << 53;
  if (overflow || v > kExact || v < -kExact) return false;
  out = static_cast<double>(v);
  return true;
}

bool flag_of(PyObject* obj, bool& out) {
  if (!obj || !PyBool_Check(obj)) return false;
  out = obj == Py_True;
  return true;
}

bool tensor_into(PyObject* obj, Tensor& out) {
  const Tensor* t = obj ? tensor_of(obj) : nullptr;
  if (!t || !*t) return false;
  out = *t;
  return true;
}

// The state dict of `param` (borrowed), null when it has none yet (the Python step would make it).
PyObject* state_of(PyObject* states, PyObject* param) {
  PyObject* state = PyDict_Check(states) ? PyDict_GetItem(states, param) : nullptr;
  return state && PyDict_Check(state) && PyDict_Size(state) > 0 ? state : nullptr;
}

// The parameters of a group that have a gradient (Optimizer.step skips the others); false when one
// is not a float32/float64 tensor (the Python method updates those one by one) or the group is odd.
bool params_with_grad(PyObject* group, std::vector<Tensor>& params, std::vector<PyObject*>& objects) {
  PyObject* list = entry(group, "params");
  if (!list || !PyList_Check(list)) return false;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); ++i) {
    PyObject* obj = PyList_GET_ITEM(list, i);
    Tensor p;
    if (!tensor_into(obj, p)) return false;
    if (!p->grad) continue;
    if (p->dtype != DType::Float32 && p->dtype != DType::Float64) return false;
    params.push_back(p);
    objects.push_back(obj);
  }
  return true;
}

std::vector<Tensor> grads_of(const std::vector<Tensor>& params) {
  std::vector<Tensor> grads;
  for (const Tensor& p : params) grads.push_back(p->grad);
  return grads;
}

// Optimizer.step's hooks (hooked_step in optimizer.py): with any, the Python method runs them.
bool no_step_hooks(const FusedUpdate& u) {
  for (const char* name : {"_optimizer_step_pre_hooks", "_optimizer_step_post_hooks"}) {
    PyObject* hooks = PyObject_GetAttrString(u.optimizer.ptr(), name);
    if (!hooks) {
      PyErr_Clear();
      return false;
    }
    const Py_ssize_t size = PyObject_Length(hooks);
    Py_DECREF(hooks);
    if (size != 0) {
      if (size < 0) PyErr_Clear();
      return false;
    }
  }
  return PyObject_Length(u.global_pre.ptr()) == 0 && PyObject_Length(u.global_post.ptr()) == 0;
}

// Whether the optimizer's class and its methods are those of the capture: Python gives a class a new
// version tag whenever an attribute of it or of a base is set (Optimizer._fused_replay's choice may
// have changed).
unsigned int version_of(PyTypeObject* type) {
#ifdef Py_TPFLAGS_VALID_VERSION_TAG  // Python < 3.12; later ones set an invalid tag to 0
  if (!(type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)) return 0;
#endif
  return type->tp_version_tag;
}

bool same_class(const FusedUpdate& u) {
  PyTypeObject* type = Py_TYPE(u.optimizer.ptr());
  return reinterpret_cast<PyObject*>(type) == u.type.ptr() && version_of(type) != 0 &&
         version_of(type) == u.type_version;
}

// optimizer.param_groups and optimizer.state (new references), or false.
bool groups_and_states(const FusedUpdate& u, py::object& groups, py::object& states) {
  groups = py::reinterpret_steal<py::object>(PyObject_GetAttrString(u.optimizer.ptr(), "param_groups"));
  // After the lookup, which gives the class a version tag again if a change of it (or of a base) took it.
  if (!same_class(u)) return false;
  states = py::reinterpret_steal<py::object>(PyObject_GetAttrString(u.optimizer.ptr(), "state"));
  if (!groups || !states || !PyList_Check(groups.ptr())) {
    PyErr_Clear();
    return false;
  }
  return true;
}

// Adam._update_group for one group, read.
struct AdamGroup {
  std::vector<Tensor> params, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps;
  double lr, beta1, beta2, eps, weight_decay;
  bool amsgrad, maximize, decoupled;
};

bool read_adam_group(PyObject* group, PyObject* states, AdamGroup& g) {
  std::vector<PyObject*> objects;
  PyObject* betas = entry(group, "betas");
  if (!params_with_grad(group, g.params, objects) || !number_of(entry(group, "lr"), g.lr) ||
      !number_of(entry(group, "eps"), g.eps) || !number_of(entry(group, "weight_decay"), g.weight_decay) ||
      !flag_of(entry(group, "amsgrad"), g.amsgrad) || !flag_of(entry(group, "maximize"), g.maximize) ||
      !flag_of(entry(group, "decoupled_weight_decay"), g.decoupled) || !betas || !PyTuple_Check(betas) ||
      PyTuple_GET_SIZE(betas) != 2 || !PyFloat_CheckExact(PyTuple_GET_ITEM(betas, 0)) ||
      !PyFloat_CheckExact(PyTuple_GET_ITEM(betas, 1)))
    return false;
  g.beta1 = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(betas, 0));
  g.beta2 = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(betas, 1));
  for (PyObject* param : objects) {
    PyObject* state = state_of(states, param);
    Tensor step, exp_avg, exp_avg_sq, max_exp_avg_sq;
    if (!state || !tensor_into(PyDict_GetItemString(state, "step"), step) || step->numel() != 1 ||
        !tensor_into(PyDict_GetItemString(state, "exp_avg"), exp_avg) ||
        !tensor_into(PyDict_GetItemString(state, "exp_avg_sq"), exp_avg_sq) ||
        (g.amsgrad && !tensor_into(PyDict_GetItemString(state, "max_exp_avg_sq"), max_exp_avg_sq)))
      return false;
    g.steps.push_back(step);
    g.exp_avgs.push_back(exp_avg);
    g.exp_avg_sqs.push_back(exp_avg_sq);
    if (g.amsgrad) g.max_exp_avg_sqs.push_back(max_exp_avg_sq);
  }
  return true;
}

// Adam._update_group's arithmetic and its adam_ call.
void adam_update(const AdamGroup& g) {
  std::vector<double> step_sizes, bias_correction2_sqrts;
  for (const Tensor& step : g.steps) {
    add_(step, Scalar::from_int(1));  // state["step"] += 1
    const double n = item(step).value;
    step_sizes.push_back(g.lr / (1 - std::pow(g.beta1, n)));
    bias_correction2_sqrts.push_back(std::pow(1 - std::pow(g.beta2, n), 0.5));
  }
  const bool decoupled = g.decoupled && g.weight_decay != 0;
  const AdamOptions options{1 - g.beta1,
                            g.beta2,
                            1 - g.beta2,
                            g.eps,
                            g.decoupled ? 0.0 : g.weight_decay,
                            decoupled ? 1 - g.lr * g.weight_decay : 1.0,
                            g.maximize};
  adam_(g.params, grads_of(g.params), g.exp_avgs, g.exp_avg_sqs, g.max_exp_avg_sqs, step_sizes, bias_correction2_sqrts,
        options);
}

// SGD._update_group for one group, read: with momentum, every buffer must exist (the first step
// makes them, in Python).
struct SgdGroup {
  std::vector<Tensor> params, buffers;
  double lr, momentum, dampening, weight_decay;
  bool nesterov, maximize;
};

bool read_sgd_group(PyObject* group, PyObject* states, SgdGroup& g) {
  std::vector<PyObject*> objects;
  if (!params_with_grad(group, g.params, objects) || !number_of(entry(group, "lr"), g.lr) ||
      !number_of(entry(group, "momentum"), g.momentum) || !number_of(entry(group, "dampening"), g.dampening) ||
      !number_of(entry(group, "weight_decay"), g.weight_decay) || !flag_of(entry(group, "nesterov"), g.nesterov) ||
      !flag_of(entry(group, "maximize"), g.maximize))
    return false;
  if (g.momentum == 0) return true;
  for (PyObject* param : objects) {
    PyObject* state = state_of(states, param);
    Tensor buffer;
    if (!state || !tensor_into(PyDict_GetItemString(state, "momentum_buffer"), buffer)) return false;
    g.buffers.push_back(buffer);
  }
  return true;
}

void sgd_update(const SgdGroup& g) {
  const SgdOptions options{g.lr, g.momentum, 1 - g.dampening, g.weight_decay, g.nesterov, g.maximize};
  sgd_(g.params, grads_of(g.params), g.buffers, std::vector<bool>(g.buffers.size(), false), options);
}

// Optimizer.step for the fused optimizers: read every group, then update them in order without the GIL.
template <class Group, class Read, class Update>
bool replay_step(const FusedUpdate& u, Read read, Update update) {
  py::object groups, states;
  if (!no_step_hooks(u) || !groups_and_states(u, groups, states)) return false;
  std::vector<Group> read_groups(PyList_GET_SIZE(groups.ptr()));
  for (size_t i = 0; i < read_groups.size(); ++i)
    if (!read(PyList_GET_ITEM(groups.ptr(), i), states.ptr(), read_groups[i])) return false;
  py::gil_scoped_release no_gil;
  GradModeGuard no_grad(false);
  for (const Group& g : read_groups)
    if (!g.params.empty()) update(g);
  return true;
}

// Optimizer.zero_grad(set_to_none=True).
bool replay_zero_grad(const FusedUpdate& u) {
  py::object groups, states;
  if (!groups_and_states(u, groups, states)) return false;
  std::vector<Tensor> params;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(groups.ptr()); ++i) {
    PyObject* list = entry(PyList_GET_ITEM(groups.ptr(), i), "params");
    if (!list || !PyList_Check(list)) return false;
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(list); ++j) {
      Tensor p;
      if (!tensor_into(PyList_GET_ITEM(list, j), p)) return false;
      params.push_back(p);
    }
  }
  for (const Tensor& p : params) p->grad.reset();
  return true;
}

}  // namespace

FusedUpdate fused_update_of(py::handle description) {
  auto parts = description.cast<py::tuple>();
  const auto name = parts[0].cast<std::string>();
  PyTypeObject* type = Py_TYPE(parts[1].ptr());
  FusedUpdate u{name == "adam"  ? FusedUpdate::AdamStep
                : name == "sgd" ? FusedUpdate::SgdStep
                                : FusedUpdate::ZeroGrad,
                parts[1],
                py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(type)),
                version_of(type),
                parts[2],
                parts[3]};
  if (name != "adam" && name != "sgd" && name != "zero_grad")
    throw ValueError(cat("_capture_host_call: unknown fused update '", name, "'"));
  return u;
}

bool replay_fused_update(const FusedUpdate& u) {
  switch (u.kind) {
    case FusedUpdate::AdamStep: return replay_step<AdamGroup>(u, read_adam_group, adam_update);
    case FusedUpdate::SgdStep: return replay_step<SgdGroup>(u, read_sgd_group, sgd_update);
    case FusedUpdate::ZeroGrad: return replay_zero_grad(u);
  }
  return false;
}

}  // namespace fg::capture
