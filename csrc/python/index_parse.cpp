// Python's x[key] -> IndexSpec. Integers select, slices slice, None inserts a dim, Ellipsis skips
// dims, and tensors, lists and arrays become advanced indices over the dims left after the views.
#include <cstring>

#include "python/capture.h"

namespace fg {

namespace {

bool is_tensor(py::handle obj) { return py::isinstance<TensorImpl>(obj); }

// A flat list of Python ints (x[:, [-1]] in a sampling loop) as an int64 tensor, without numpy's
// asarray; an empty tensor for any other list (bools, nested lists, int subclasses, ints beyond int64).
Tensor int_list_index(py::handle obj) {
  PyObject* list = obj.ptr();
  const Py_ssize_t n = PyList_GET_SIZE(list);
  std::vector<uint8_t> bytes(n * sizeof(int64_t));
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PyList_GET_ITEM(list, i);
    if (!PyLong_CheckExact(item)) return Tensor();
    int overflow = 0;
    const int64_t value = PyLong_AsLongLongAndOverflow(item, &overflow);
    if (overflow) return Tensor();
    std::memcpy(bytes.data() + i * sizeof(int64_t), &value, sizeof(int64_t));
  }
  return tensor_of_bytes(std::move(bytes), {static_cast<int64_t>(n)}, DType::Int64);
}

// An advanced index as an int64 or bool tensor.
Tensor index_tensor(py::handle obj) {
  Tensor t;
  if (is_tensor(obj)) t = obj.cast<Tensor>();
  else if (py::len(obj) == 0) t = tensor_of_bytes({}, {0}, DType::Int64);  // x[[]]: numpy would make it float64
  else {
    if (PyList_CheckExact(obj.ptr())) t = int_list_index(obj);
    if (!t) {
      py::array array = py::module_::import("numpy").attr("asarray")(obj);
      t = py::isinstance<py::array>(obj) ? tensor_from_numpy(array, false) : tensor_of_python_data(array);
    }
  }
  if (t->dtype == DType::Float32 || t->dtype == DType::Float64)
    throw IndexError("tensors used as indices must be long, int, byte or bool tensors");
  return t;
}

// x[t] of a 0-d bool tensor t: its value read on the host, which a compiled function cannot replay.
bool item_true(const Tensor& t) {
  if (capture_in_progress()) capture::cannot_replay("indexing with a 0-d bool tensor (a host read of its value)");
  return item(t).value != 0;
}

// x[i] for an int (or anything with __index__). One that int64 cannot hold is a ValueError, as PyTorch.
int64_t index_value(py::handle obj) {
  py::object number = py::reinterpret_steal<py::object>(PyNumber_Index(obj.ptr()));
  if (!number) throw py::error_already_set();
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(number.ptr(), &overflow);
  if (overflow) throw ValueError("Overflow when unpacking long long");
  return v;
}

// A slice bound, as Python reads it: an int, clamped to the int64 range (x[2**70:] is empty), or
// anything with __index__.
int64_t slice_bound(py::handle obj) {
  if (!PyIndex_Check(obj.ptr())) throw TypeError("slice indices must be integers or None or have an __index__ method");
  Py_ssize_t v = PyNumber_AsSsize_t(obj.ptr(), nullptr);  // clamps instead of raising
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  return v;
}

bool is_advanced(py::handle item) {
  return is_tensor(item) || py::isinstance<py::list>(item) || py::isinstance<py::array>(item) ||
         (py::isinstance<py::tuple>(item));
}

// How many dims of x an index item consumes.
int64_t dims_consumed(py::handle item) {
  if (item.is_none() || item.ptr() == Py_Ellipsis || PyBool_Check(item.ptr())) return 0;  // a bool adds a dim
  if (is_tensor(item)) {
    Tensor t = item.cast<Tensor>();
    return t->dtype == DType::Bool ? t->dim() : 1;  // a 0-d mask adds a dim instead
  }
  return 1;
}

}  // namespace

IndexSpec parse_index(const Tensor& x, py::handle key) {
  py::tuple items = py::isinstance<py::tuple>(key) ? py::reinterpret_borrow<py::tuple>(key) : py::make_tuple(key);
  int64_t consumed = 0;
  bool seen_ellipsis = false;
  for (py::handle item : items) {
    if (item.ptr() == Py_Ellipsis) {
      if (seen_ellipsis) throw IndexError("an index can only have a single ellipsis ('...')");
      seen_ellipsis = true;
    }
    consumed += dims_consumed(item);
  }
  if (consumed > x->dim()) throw IndexError(cat("too many indices for tensor of dimension ", x->dim()));

  IndexSpec spec;
  int64_t dim = 0;       // the dim of the partially indexed view that the next item applies to
  int64_t x_dim = 0;     // the dim of x it corresponds to (for error messages)
  bool any_advanced = false;
  auto keep_dim = [&] {
    spec.advanced.push_back(Tensor());
    ++dim;
  };
  // x[True] / x[False] (a Python bool or a 0-d bool tensor): a new dim of size 1, then all (or none)
  // of it through an advanced index, as PyTorch.
  auto bool_index = [&](IndexStep& step, bool value) {
    step.kind = IndexStep::Unsqueeze;
    spec.steps.push_back(step);
    spec.advanced.push_back(value ? tensor_of_bytes(std::vector<uint8_t>(sizeof(int64_t)), {1}, DType::Int64)
                                  : tensor_of_bytes({}, {0}, DType::Int64));
    ++dim;
    any_advanced = true;
  };
  for (py::handle item : items) {
    IndexStep step;
    step.dim = dim;
    if (item.is_none()) {
      step.kind = IndexStep::Unsqueeze;
      spec.steps.push_back(step);
      keep_dim();
    } else if (item.ptr() == Py_Ellipsis) {
      for (int64_t k = 0; k < x->dim() - consumed; ++k) keep_dim();
      x_dim += x->dim() - consumed;
    } else if (PyBool_Check(item.ptr())) {
      bool_index(step, item.ptr() == Py_True);
    } else if (PySlice_Check(item.ptr())) {
      auto* s = reinterpret_cast<PySliceObject*>(item.ptr());
      step.kind = IndexStep::Slice;
      if (s->start != Py_None) step.start = slice_bound(s->start);
      if (s->stop != Py_None) step.stop = slice_bound(s->stop);
      if (s->step != Py_None) step.step = slice_bound(s->step);
      spec.steps.push_back(step);
      keep_dim();
      ++x_dim;
    } else if (PyLong_Check(item.ptr()) || (!is_advanced(item) && PyIndex_Check(item.ptr()))) {
      step.index = index_value(item);
      int64_t size = x->shape[x_dim];
      if (step.index < -size || step.index >= size)
        throw IndexError(cat("index ", step.index, " is out of bounds for dimension ", x_dim, " with size ", size));
      spec.steps.push_back(step);
      ++x_dim;
    } else if (is_advanced(item)) {
      Tensor t = index_tensor(item);
      if (t->dtype == DType::Bool && t->dim() == 0) {
        bool_index(step, item_true(t));
        continue;
      }
      spec.advanced.push_back(t);
      int64_t covered = t->dtype == DType::Bool ? std::max<int64_t>(t->dim(), 1) : 1;
      dim += covered;
      x_dim += covered;
      any_advanced = true;
    } else {
      throw IndexError(
          "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid indices (got " +
          std::string(py::str(py::type::of(item).attr("__name__"))) + ")");
    }
  }
  if (!any_advanced) spec.advanced.clear();
  return spec;
}

}  // namespace fg
