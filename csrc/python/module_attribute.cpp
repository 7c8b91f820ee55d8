// _C.module_attribute(module, name): getattr(module, name) for the nn layers' reads of their own
// parameters (self.weight in Linear.forward), exactly as Python reads it, without what Python 3.11
// spends on the way to nn.Module.__getattr__. A parameter lives in module._parameters, not in the
// instance's __dict__, so the normal lookup fails first; 3.11 raises (and formats) an AttributeError
// for that failure before calling __getattr__: about 0.55 us per read, a dozen reads per layer call
// of a small model's step. 3.12 makes that failure silent, so there this is getattr itself.
#include "python/bindings.h"

namespace fg {

namespace {

#if PY_VERSION_HEX < 0x030C0000
// Set by _register_module_getattr (strong references, kept for the life of the process).
PyObject* module_getattr = nullptr;       // nn.Module.__getattr__
PyObject* object_getattribute = nullptr;  // object.__getattribute__'s slot wrapper
PyObject* getattr_name = nullptr;
PyObject* getattribute_name = nullptr;
// The registries nn.Module.__getattr__ reads, in its order.
PyObject* registry_names[3] = {};

// True when reading an attribute of a `type` object is object's generic lookup and then, if that
// fails with AttributeError, nn.Module.__getattr__ itself (no override in a subclass): what
// module_attribute replays. Both lookups hit the type's method cache.
bool reads_as_module(PyTypeObject* type) {
  return module_getattr && _PyType_Lookup(type, getattr_name) == module_getattr &&
         _PyType_Lookup(type, getattribute_name) == object_getattribute;
}

// nn.Module.__getattr__'s lookup in the instance's registries, when they are plain dicts: a new
// reference, or nullptr without an error for "not found or not plain" (Python's own path decides).
PyObject* registered_member(PyObject* self, PyObject* name) {
  PyObject** dict = _PyObject_GetDictPtr(self);
  if (!dict || !*dict || !PyDict_CheckExact(*dict)) return nullptr;
  for (PyObject* registry_name : registry_names) {
    PyObject* registry = PyDict_GetItemWithError(*dict, registry_name);  // borrowed
    if (!registry || !PyDict_CheckExact(registry)) return nullptr;
    if (PyObject* member = PyDict_GetItemWithError(registry, name)) return Py_NewRef(member);
    if (PyErr_Occurred()) return nullptr;
  }
  return nullptr;
}
#endif

PyObject* module_attribute(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "module_attribute(module, name) takes 2 arguments");
    return nullptr;
  }
  PyObject *self = args[0], *name = args[1];
#if PY_VERSION_HEX < 0x030C0000
  if (PyUnicode_CheckExact(name) && reads_as_module(Py_TYPE(self))) {
    // the normal lookup (data descriptors, the instance's __dict__, class attributes), its
    // AttributeError suppressed as 3.12 does before calling __getattr__
    if (PyObject* found = _PyObject_GenericGetAttrWithDict(self, name, nullptr, 1)) return found;
    if (PyErr_Occurred()) return nullptr;  // an error other than AttributeError: Python raises it too
    if (PyObject* member = registered_member(self, name)) return member;
    PyErr_Clear();  // nothing found (or a registry that is not a plain dict): Python's path below
  }
#endif
  return PyObject_GetAttr(self, name);  // the general case, and every error message
}

PyMethodDef module_attribute_def = {
    "module_attribute", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(module_attribute)), METH_FASTCALL,
    "getattr(module, name) for nn.Module's members: the same object or error, faster on Python 3.11."};

}  // namespace

void bind_module_attribute(py::module_& m) {
  // a METH_FASTCALL function, not a pybind11 one: its dispatcher would cost what this saves
  m.add_object("module_attribute", py::reinterpret_steal<py::object>(PyCFunction_New(&module_attribute_def, nullptr)));
  m.def(
      "_register_module_getattr",
      [](py::handle function) {
#if PY_VERSION_HEX < 0x030C0000
        getattr_name = PyUnicode_InternFromString("__getattr__");
        getattribute_name = PyUnicode_InternFromString("__getattribute__");
        const char* registries[3] = {"_parameters", "_buffers", "_modules"};
        for (int i = 0; i < 3; ++i) registry_names[i] = PyUnicode_InternFromString(registries[i]);
        object_getattribute = Py_NewRef(_PyType_Lookup(&PyBaseObject_Type, getattribute_name));
        module_getattr = Py_NewRef(function.ptr());
#else
        (void)function;
#endif
      },
      "Registers nn.Module.__getattr__, the function module_attribute stands for.");
}

}  // namespace fg
