// _C.module_attribute(module, name): getattr(module, name) for the nn layers' reads of their own
// parameters (self.weight in Linear.forward), exactly as Python reads it, without what Python 3.11
// spends on the way to nn.Module.__getattr__. A parameter lives in module._parameters, not in the
// instance's __dict__, so the normal lookup fails first; 3.11 raises (and formats) an AttributeError
// for that failure before calling __getattr__: about 0.55 us per read, a dozen reads per layer call
// of a small model's step. 3.12 makes that failure silent, so there this is getattr itself.
#include <vector>

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

// getattr(self, name), the same object or error.
PyObject* get_attribute(PyObject* self, PyObject* name) {
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

PyObject* module_attribute(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "module_attribute(module, name) takes 2 arguments");
    return nullptr;
  }
  return get_attribute(args[0], args[1]);
}

// ---- nn.Module.__call__ without hooks: forward(*args, **kwargs) with the checks of the Python
// __call__ (python/fastgrad/nn/module.py) made in C. Each is a read of an attribute of a Module,
// which 3.11 cannot specialize (the class has __getattr__): ~60 ns apiece in bytecode, with the
// frame and the repacking of *args/**kwargs about 0.55 us a call, 19 calls in a small model's
// token. Read here in the same order, each as getattr (get_attribute above).

// The Python __call__'s names and the global hook dicts it tests (set by _register_module_call).
PyObject* compiled_call_name = nullptr;
PyObject* forward_name = nullptr;
PyObject* call_impl_name = nullptr;
PyObject* instance_hook_names[4] = {};
std::vector<PyObject*> global_hook_dicts;

// self.<name>(*args, **kwargs) for a vectorcall's arguments (args without self).
PyObject* call_attribute(PyObject* self, PyObject* name, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  PyObject* method = get_attribute(self, name);
  if (!method) return nullptr;
  PyObject* result = PyObject_Vectorcall(method, args, nargsf, kwnames);
  Py_DECREF(method);
  return result;
}

// Truth of self.<name> (-1: an error).
int attribute_is_true(PyObject* self, PyObject* name) {
  PyObject* value = get_attribute(self, name);
  if (!value) return -1;
  const int truth = PyObject_IsTrue(value);
  Py_DECREF(value);
  return truth;
}

// ---- a layer whose forward is its one primitive over its own members: Linear.forward is
// F.linear(input, self.weight, self.bias), which is _C.linear of the same arguments; LayerNorm's
// likewise; Embedding's F.embedding is _C.embedding_layer's usual case (it returns NotImplemented for
// the others, max_norm's renormalization among them, and forward runs). Called with one positional
// argument and no hooks, such a layer's primitive is called here with the members its forward reads,
// in its order: two Python frames fewer, 0.1-0.4 us a layer call (14 a small model's token). When a
// member is of a type the layer does not keep itself (LayerNorm's F function refuses a
// normalized_shape that is not a tuple or list, the primitive would take any sequence), or the
// primitive fails, forward runs as before: its checks, PyTorch's messages.

struct LayerPrimitive {
  PyObject* forward;               // the layer class's forward function
  PyObject* primitive;             // the core function that forward's F function returns the result of
  std::vector<PyObject*> members;  // the names of the primitive's arguments after the input
};
std::vector<LayerPrimitive> layer_primitives;  // set by _register_layer_primitive
constexpr size_t max_members = 6;

// The values layers keep as members (a Python subclass of float, int or tuple goes through forward).
bool kept_member(PyObject* value) {
  return value == Py_None || tensor_of(value) || PyTuple_CheckExact(value) || PyFloat_CheckExact(value) ||
         PyLong_CheckExact(value) || PyBool_Check(value);
}

// The primitive of forward's layer over input and the layer's members: a new reference, or nullptr
// without an error when forward is no registered layer's or the primitive did not return a result
// (an error, or NotImplemented: members it leaves to forward).
PyObject* call_layer_primitive(PyObject* self, PyObject* forward, PyObject* input) {
  if (!PyMethod_Check(forward) || PyMethod_GET_SELF(forward) != self) return nullptr;
  for (const LayerPrimitive& layer : layer_primitives) {
    if (layer.forward != PyMethod_GET_FUNCTION(forward)) continue;
    PyObject* arguments[1 + max_members] = {input};
    size_t count = 1;
    bool kept = true;
    for (PyObject* name : layer.members) {
      PyObject* value = get_attribute(self, name);
      if (!value) break;
      arguments[count++] = value;
      if (!(kept = kept_member(value))) break;
    }
    PyObject* result = nullptr;
    if (kept && count == 1 + layer.members.size())
      result = PyObject_Vectorcall(layer.primitive, arguments, count, nullptr);
    for (size_t i = 1; i < count; ++i) Py_DECREF(arguments[i]);
    if (!result) PyErr_Clear();  // forward repeats the failure with its own message
    if (result == Py_NotImplemented) Py_CLEAR(result);
    return result;
  }
  return nullptr;
}

// Module.__call__(self, *args, **kwargs): a method descriptor's function (args[0] is self).
PyObject* module_call(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  const size_t rest = static_cast<size_t>(nargs);
  PyObject* compiled = get_attribute(self, compiled_call_name);
  if (!compiled) return nullptr;
  if (compiled != Py_None) {
    PyObject* result = PyObject_Vectorcall(compiled, args, rest, kwnames);
    Py_DECREF(compiled);
    return result;
  }
  Py_DECREF(compiled);
  bool hooked = false;
  for (PyObject* name : instance_hook_names) {
    const int truth = attribute_is_true(self, name);
    if (truth < 0) return nullptr;
    if (truth) {
      hooked = true;
      break;
    }
  }
  for (size_t i = 0; !hooked && i < global_hook_dicts.size(); ++i) {
    const int truth = PyObject_IsTrue(global_hook_dicts[i]);
    if (truth < 0) return nullptr;
    hooked = truth;
  }
  if (hooked) return call_attribute(self, call_impl_name, args, rest, kwnames);
  PyObject* forward = get_attribute(self, forward_name);
  if (!forward) return nullptr;
  PyObject* result = nargs == 1 && !kwnames ? call_layer_primitive(self, forward, args[0]) : nullptr;
  if (!result) result = PyObject_Vectorcall(forward, args, rest, kwnames);
  Py_DECREF(forward);
  return result;
}

PyMethodDef module_call_def = {
    "__call__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(module_call)), METH_FASTCALL | METH_KEYWORDS,
    "forward(*args, **kwargs) between the module's hooks (see _call_impl); a compiled module's replay."};

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
  m.def(
      "_module_call",
      [](py::handle module_type, py::list instance_hooks, py::list global_hooks) {
        // instance_hooks: the names of the per-instance hook dicts, in the Python __call__'s order
        if (!PyType_Check(module_type.ptr()) || instance_hooks.size() != 4)
          throw TypeError("_module_call(Module, 4 hook dict names, global hook dicts)");
        compiled_call_name = PyUnicode_InternFromString("_compiled_call_impl");
        forward_name = PyUnicode_InternFromString("forward");
        call_impl_name = PyUnicode_InternFromString("_call_impl");
        for (int i = 0; i < 4; ++i) instance_hook_names[i] = Py_NewRef(instance_hooks[i].ptr());
        for (py::handle d : global_hooks) global_hook_dicts.push_back(Py_NewRef(d.ptr()));
        return py::reinterpret_steal<py::object>(
            PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(module_type.ptr()), &module_call_def));
      },
      "Module.__call__ as a method descriptor over the C function above, for the class Module "
      "(module.py installs it).");
  m.def(
      "_register_layer_primitive",
      [](py::handle forward, py::handle primitive, py::tuple members) {
        if (!PyFunction_Check(forward.ptr()) || !PyCallable_Check(primitive.ptr()) || members.size() > max_members)
          throw TypeError("_register_layer_primitive(forward function, primitive, member names)");
        LayerPrimitive layer{Py_NewRef(forward.ptr()), Py_NewRef(primitive.ptr()), {}};
        for (py::handle name : members) {
          if (!PyUnicode_CheckExact(name.ptr())) throw TypeError("_register_layer_primitive: member names are str");
          PyObject* interned = Py_NewRef(name.ptr());
          PyUnicode_InternInPlace(&interned);
          layer.members.push_back(interned);
        }
        layer_primitives.push_back(std::move(layer));
      },
      "Registers a layer class's forward as its primitive over the named members (layers.py: Linear, "
      "LayerNorm, Embedding), for Module.__call__ to call directly.");
}

}  // namespace fg
