// Wrong arguments raise PyTorch's TypeError, for every binding of the module, from one place.
//
// Left to itself pybind11 reports a call whose arguments do not fit as "f(): incompatible function
// arguments. The following argument types are supported: 1. (arg0: fastgrad._C.Tensor, ...)
// Invoked with: <reprs>", and a failed py::cast inside a binding as a RuntimeError "Unable to cast
// Python instance of type <class 'int'> to C++ type '?'". PyTorch raises a TypeError naming the
// function and the argument types: "prod() received an invalid combination of arguments - got
// (Tensor, tuple, bool), but expected ...". At import, each pybind11 function of the module
// (functions, methods, property getters and setters) gets its entry point (the PyMethodDef's
// ml_meth, pybind11's dispatcher) wrapped by `checked_dispatch`, which rewrites those two errors
// after the fact. A call that succeeds pays one more direct call and a null check.
#include <string>
#include <unordered_map>
#include <vector>

#include "python/bindings.h"

namespace fg {

namespace {

using FastCall = PyObject* (*)(PyObject*, PyObject* const*, Py_ssize_t, PyObject*);
FastCall pybind11_dispatcher = nullptr;  // the same static function for every pybind11 function

// Raised (by the module's exception translator) for a py::cast_error, so that checked_dispatch
// recognises it by type; never seen outside this file.
PyObject* cast_failure = nullptr;

// pybind11 leaves the functions of a property nameless; their messages use the property's name.
std::unordered_map<const py::detail::function_record*, std::string> property_names;

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

// pybind11's signature "(self: fastgrad._C.Tensor, dim: typing.SupportsInt | typing.SupportsIndex
// | None = None) -> ..." written as PyTorch writes parameters: "(int | None dim = None)" (self,
// unless `with_self`, and pybind11's placeholder names arg0, arg1, ... left out).
std::string expected_parameters(const py::detail::function_record& rec, bool with_self) {
  std::string sig = rec.signature ? rec.signature : "";
  size_t open = sig.find('(');
  if (open == std::string::npos) return "()";
  std::vector<std::string> params;
  std::string current;
  int depth = 0;
  for (size_t i = open + 1; i < sig.size(); ++i) {
    char c = sig[i];
    if ((c == ']' || c == ')') && depth-- == 0) break;  // the closing parenthesis
    if (c == '[' || c == '(') ++depth;
    if (c == ',' && depth == 0) {
      params.push_back(current);
      current.clear();
      if (i + 1 < sig.size() && sig[i + 1] == ' ') ++i;
      continue;
    }
    current += c;
  }
  if (!current.empty()) params.push_back(current);
  std::string out;
  for (size_t k = rec.is_method && !with_self ? 1 : 0; k < params.size(); ++k) {
    std::string name, type = params[k], default_value;
    size_t colon = type.find(": ");
    if (colon != std::string::npos) {
      name = type.substr(0, colon);
      type = type.substr(colon + 2);
    }
    size_t eq = type.find(" = ");
    if (eq != std::string::npos) {
      default_value = type.substr(eq);
      type = type.substr(0, eq);
    }
    replace_all(type, "collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex]", "tuple of ints");
    replace_all(type, "collections.abc.Sequence[typing.SupportsFloat | typing.SupportsIndex]", "tuple of floats");
    replace_all(type, "collections.abc.Sequence[float]", "tuple of floats");
    replace_all(type, "typing.SupportsInt | typing.SupportsIndex", "int");
    replace_all(type, "typing.SupportsFloat | typing.SupportsIndex", "float");
    replace_all(type, "fastgrad._C.", "");
    bool placeholder = name.size() > 3 && name.compare(0, 3, "arg") == 0 &&
                       name.find_first_not_of("0123456789", 3) == std::string::npos;
    out += (out.empty() ? "" : ", ") + type + (name.empty() || placeholder ? "" : " " + name) + default_value;
  }
  return "(" + out + ")";
}

// "(Tensor, tuple, keepdim=bool)": the types of what the call passed (self left out unless `with_self`).
std::string given_types(const py::detail::function_record& rec, PyObject* const* args, Py_ssize_t nargs,
                        PyObject* kwnames, bool with_self) {
  std::string out;
  for (Py_ssize_t i = rec.is_method && !with_self ? 1 : 0; i < nargs; ++i)
    out += (out.empty() ? "" : ", ") + type_name(args[i]);
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t i = 0; i < nkw; ++i)
    out += (out.empty() ? "" : ", ") + std::string(py::str(PyTuple_GET_ITEM(kwnames, i))) + "=" +
           type_name(args[nargs + i]);
  return "(" + out + ")";
}

// Whether the pending error is pybind11's report of arguments that fit no signature of `rec`.
bool is_signature_mismatch(const py::detail::function_record& rec) {
  if (PyErr_ExceptionMatches(cast_failure)) return true;
  if (!PyErr_ExceptionMatches(PyExc_TypeError)) return false;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  bool mismatch = false;
  if (PyObject* text = value ? PyObject_Str(value) : nullptr) {
    const char* message = PyUnicode_AsUTF8(text);
    std::string prefix = std::string(rec.name) + "(): incompatible function arguments.";
    mismatch = message && std::string(message).compare(0, prefix.size(), prefix) == 0;
    Py_DECREF(text);
  }
  PyErr_Clear();
  PyErr_Restore(type, value, traceback);
  return mismatch;
}

PyObject* checked_dispatch(PyObject* self, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  PyObject* result = pybind11_dispatcher(self, args, nargsf, kwnames);
  if (result) return result;
  const py::detail::function_record* rec = py::detail::function_record_ptr_from_PyObject(self);
  if (!rec || !is_signature_mismatch(*rec)) return nullptr;
  PyErr_Clear();
  Py_ssize_t nargs = PyVectorcall_NARGS(static_cast<size_t>(nargsf));
  // A method speaks of its arguments after self, unless self is the wrong thing (Tensor.dim(3)).
  bool with_self = rec->is_method && (nargs == 0 || PyObject_IsInstance(args[0], rec->scope.ptr()) != 1);
  PyErr_Clear();
  try {
    auto property = property_names.find(rec);
    std::string message;
    if (property != property_names.end() && rec->is_setter && !with_self && nargs == 2) {  // x.grad = 3
      std::string type = expected_parameters(*rec, false);
      message = cat(property->second, " must be ", type.substr(1, type.size() - 2), ", not ", type_name(args[1]));
    } else {
      std::string name = property != property_names.end() ? property->second : rec->name;
      message = cat(name, "() received an invalid combination of arguments - got ",
                    given_types(*rec, args, nargs, kwnames, with_self), ", but expected ",
                    expected_parameters(*rec, with_self));
    }
    PyErr_SetString(PyExc_TypeError, message.c_str());
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_TypeError, e.what());
  }
  return nullptr;
}

void guard_function(py::handle fn, const char* property = nullptr) {
  fn = py::detail::get_function(fn);  // unwraps the instancemethod of a method
  if (!fn || !PyCFunction_Check(fn.ptr())) return;
  PyObject* self = PyCFunction_GET_SELF(fn.ptr());
  py::detail::function_record* rec = self ? py::detail::function_record_ptr_from_PyObject(self) : nullptr;
  // Overloads (none so far) would need every signature listed: they keep pybind11's message.
  if (!rec || rec->next || !rec->def || !(rec->def->ml_flags & METH_FASTCALL)) return;
  if (property) property_names.emplace(rec, property);
  auto meth = reinterpret_cast<FastCall>(reinterpret_cast<void (*)()>(rec->def->ml_meth));
  if (meth == &checked_dispatch) return;  // reached twice
  if (!pybind11_dispatcher) pybind11_dispatcher = meth;
  if (meth != pybind11_dispatcher) return;
  rec->def->ml_meth = reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&checked_dispatch));
}

void guard_scope(py::handle scope, const py::object& module_name) {
  py::dict members = scope.attr("__dict__");
  for (auto item : members) {
    py::handle value = item.second;
    if (PyObject_TypeCheck(value.ptr(), &PyProperty_Type)) {  // pybind11's static property subclasses it
      std::string name = py::str(item.first);
      guard_function(value.attr("fget"), name.c_str());
      guard_function(value.attr("fset"), name.c_str());
    } else if (PyType_Check(value.ptr())) {  // a class bound by this module
      if (value.ptr() != scope.ptr() && py::hasattr(value, "__module__") && module_name.equal(value.attr("__module__")))
        guard_scope(value, module_name);
    } else if (PyObject_TypeCheck(value.ptr(), &PyStaticMethod_Type)) {
      guard_function(value.attr("__func__"));
    } else {
      guard_function(value);
    }
  }
}

}  // namespace

void set_cast_failure(const char* message) { PyErr_SetString(cast_failure, message); }

void guard_argument_errors(py::module_& m) {
  cast_failure = PyErr_NewException("fastgrad._C._CastFailure", PyExc_TypeError, nullptr);
  if (!cast_failure) throw py::error_already_set();
  guard_scope(m, m.attr("__name__"));
}

}  // namespace fg
