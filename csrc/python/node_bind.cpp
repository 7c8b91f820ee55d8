// grad_fn objects. One Python object per live node is cached on the node, so that
// `y.grad_fn is y.grad_fn` and next_functions compare by identity, as in PyTorch.
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
  release_node_metadata = [](void* metadata) {
    if (!Py_IsInitialized()) return;
    py::gil_scoped_acquire gil;
    Py_DECREF(static_cast<PyObject*>(metadata));
  };
  py::class_<PyNode>(m, "Node", py::dynamic_attr())
      .def("name", [](const PyNode& self) { return self.node->name(); })
      .def_property_readonly("next_functions", &next_functions)
      .def_property_readonly("variable",
                             [](const PyNode& self) -> py::object {
                               auto* acc = dynamic_cast<AccumulateGrad*>(self.node.get());
                               if (!acc) throw py::attribute_error(cat("'", self.node->name(), "' object has no attribute 'variable'"));
                               return py::cast(acc->variable);
                             })
      .def_property_readonly("metadata", [](const PyNode& self) {
        Node& node = *self.node.get();
        if (!node.metadata) node.metadata = py::dict().release().ptr();
        return py::reinterpret_borrow<py::dict>(static_cast<PyObject*>(node.metadata));
      })
      .def("__repr__", [](const PyNode& self) {
        std::string name = self.node->name();  // without the namespace of PyTorch's C++-only nodes
        return cat("<", name.substr(name.rfind(':') + 1), " object at ", static_cast<const void*>(self.node.get()), ">");
      });
}

}  // namespace fg
