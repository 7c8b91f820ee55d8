// grad_fn objects. One Python object per live node is cached on the node, so that
// `y.grad_fn is y.grad_fn` and next_functions compare by identity, as in PyTorch.
#include "autograd/anomaly_mode.h"
#include "autograd/node.h"
#include "python/bindings.h"

namespace fg {

namespace {

// Owns a reference to the node while Python holds the object.
struct PyNode {
  explicit PyNode(NodeRef n) : node(std::move(n)) {}
  PyNode(const PyNode&) = delete;
  PyNode& operator=(const PyNode&) = delete;
  ~PyNode() { node->python_object = nullptr; }
  NodeRef node;
};

py::tuple next_functions(const PyNode& self) {
  const auto& edges = self.node->next_edges;
  py::tuple out(edges.size());
  for (size_t i = 0; i < edges.size(); ++i)
    out[i] = py::make_tuple(edges[i].fn ? node_to_py(edges[i].fn) : py::none(), edges[i].input_nr);
  return out;
}

// grad_fn.metadata: a dict made on first use, kept by the node.
py::dict metadata_of(Node& node) {
  if (!node.metadata) node.metadata = py::dict().release().ptr();
  return py::reinterpret_borrow<py::dict>(static_cast<PyObject*>(node.metadata));
}

// Anomaly mode's Python side (fastgrad/_anomaly.py). The forward traceback is kept where PyTorch
// keeps it, under metadata["traceback_"]. A node may be made by an op running without the GIL.
void store_traceback(Node* node) {
  py::gil_scoped_acquire gil;
  py::object traceback = py::module_::import("fastgrad._anomaly").attr("forward_traceback")();
  metadata_of(*node)["traceback_"] = traceback;
}

void report_failure(const Node* node) {
  py::gil_scoped_acquire gil;
  py::object traceback = py::none();
  if (node->metadata) {
    py::dict metadata = py::reinterpret_borrow<py::dict>(static_cast<PyObject*>(node->metadata));
    if (metadata.contains("traceback_")) traceback = metadata["traceback_"];
  }
  py::module_::import("fastgrad._anomaly").attr("warn_failed_node")(node->name(), traceback);
}

}  // namespace

py::object node_to_py(const NodeRef& node) {
  if (!node) return py::none();
  if (node->python_object) return py::reinterpret_borrow<py::object>(static_cast<PyObject*>(node->python_object));
  py::object obj = py::cast(new PyNode(node), py::return_value_policy::take_ownership);
  node->python_object = obj.ptr();
  return obj;
}

const NodeRef& node_of(py::handle obj) { return obj.cast<const PyNode&>().node; }

void bind_node(py::module_& m) {
  // A node may die in a backward running without the GIL, or after the interpreter has gone.
  release_node_metadata = [](void* metadata) { release_python_object(static_cast<PyObject*>(metadata)); };
  store_forward_traceback = &store_traceback;
  report_failed_node = &report_failure;
  m.def("is_anomaly_enabled", &anomaly_enabled);
  m.def("is_anomaly_check_nan_enabled", [] { return anomaly_check_nan.load(std::memory_order_relaxed); });
  m.def(
      "set_anomaly_enabled",
      [](py::handle enabled, py::handle check_nan) {
        // PyTorch's switch takes bools only (no 1, no None).
        auto flag = [](py::handle value, const char* name, int position) {
          if (!PyBool_Check(value.ptr()))
            throw TypeError(cat("set_anomaly_enabled(): argument '", name, "' (position ", position,
                                ") must be bool, not ", type_name(value)));
          return value.ptr() == Py_True;
        };
        set_anomaly_enabled(flag(enabled, "enabled", 1), flag(check_nan, "check_nan", 2));
      },
      py::arg("enabled"), py::arg("check_nan") = true);
  py::class_<PyNode>(m, "Node", py::dynamic_attr())
      .def("name", [](const PyNode& self) { return self.node->name(); })
      .def_property_readonly("next_functions", &next_functions)
      .def_property_readonly("variable",
                             [](const PyNode& self) -> py::object {
                               auto* acc = dynamic_cast<AccumulateGrad*>(self.node.get());
                               if (!acc)
                                 throw py::attribute_error(
                                     cat("'", self.node->name(), "' object has no attribute 'variable'"));
                               return py::cast(acc->variable);
                             })
      .def_property_readonly("metadata", [](const PyNode& self) { return metadata_of(*self.node.get()); })
      .def("__repr__", [](const PyNode& self) {
        std::string name = self.node->name();  // without the namespace of PyTorch's C++-only nodes
        return cat("<", name.substr(name.rfind(':') + 1), " object at ", static_cast<const void*>(self.node.get()),
                   ">");
      });
}

}  // namespace fg
