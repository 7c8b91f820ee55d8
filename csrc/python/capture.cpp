// The recorder and the replayed program of fastgrad.compile (capture.h; the Python side, guards and
// fallbacks, is python/fastgrad/_compile.py).
#include "python/capture.h"

#include <algorithm>
#include <memory>
#include <numeric>
#include <unordered_map>

#include "python/optim_replay.h"

namespace fg::capture {

// The recorder of the capture this thread runs (null when it runs none). Steps are recorded only
// at depth 0: what a recorded op (a backward pass, an optimizer's step) does inside is its own.
struct Recorder;
Recorder* recorder();
bool recording(const Recorder* r);  // r is at depth 0 and not yet abandoned
// The capture cannot replay what the function does: `what` says why. Only the first reason is kept
// (with the user's line, found from the Python stack).
void abandon(Recorder* r, const char* what);

// A slot's tensor as the capture last saw it. A metadata change no recorded op explains (an
// in-place view op such as squeeze_ outside call_op, x.data = y) would not happen on replay.
struct Geometry {
  const Storage* storage;
  Shape shape, strides;
  int64_t offset;
  DType dtype;
  bool operator==(const Geometry& o) const {
    return storage == o.storage && shape == o.shape && strides == o.strides && offset == o.offset && dtype == o.dtype;
  }
};
Geometry geometry_of(const Tensor& t) { return {t->storage.get(), t->shape, t->strides, t->offset, t->dtype}; }

// A replay's tensors: the program's inputs, its constants and the results of its steps, by slot.
using Frame = std::vector<Tensor>;

// A step's result must be what it was at capture: defined or not, and of the same shape. An op whose
// result depends on values (a boolean mask's selection) or on state the guards do not see would
// otherwise feed later steps, recorded for the captured shapes, with something else.
[[noreturn]] void result_changed() {
  throw RuntimeError(
      "fastgrad.compile: a replayed operation gave a result of another shape than at capture (it depends on "
      "tensor values or on state the guards do not see); call fastgrad.compiler.reset() and run the function "
      "uncompiled");
}
void check_result(const Tensor& result, bool defined, const Shape& shape) {
  if (bool(result) != defined || (defined && result->shape != shape)) result_changed();
}

// call on `tensors`, without the GIL when `long_work` (the tensors are the caller's own copies).
Results run_call(const Call& call, bool long_work, TensorArgs tensors) {
  if (!long_work) return call.run(tensors);
  py::gil_scoped_release no_gil;
  return call.run(tensors);
}

// One result of a step's op as the capture saw it.
struct StepResult {
  int slot = -1;  // -1: undefined
  bool defined = false;
  Shape shape;
};

struct Step {
  explicit Step(Call c, std::vector<int> tensor_slots = {}) : call(std::move(c)), slots(std::move(tensor_slots)) {}

  Call call;
  std::vector<int> slots;           // the op's tensor arguments in argument order (capture.h's TensorArgs)
  std::vector<StepResult> results;  // none for a void op
  bool long_work = false;
  bool grad_mode = false;     // the grad mode it ran in
  std::vector<int> last_use;  // the slots no later step reads: dropped after it, as eagerly

  // Without the GIL (Program::run): host calls take it back themselves.
  void run(Frame& frame) const {
    Results got = call.run({frame.data(), slots.data()});  // the frame belongs to this replay
    if (got.size() != results.size()) result_changed();  // split into another number of parts
    for (size_t i = 0; i < results.size(); ++i) {
      check_result(got[i], results[i].defined, results[i].shape);
      if (results[i].slot >= 0) frame[results[i].slot] = std::move(got[i]);
    }
  }
};

struct Program {
  int inputs = 0;
  std::vector<Tensor> frame_template;  // the constants in their slots, empty slots elsewhere
  std::vector<Step> steps;
  std::vector<int> outputs;
  size_t fingerprint = 0;  // of the steps (add_step)

  // The outputs of one replay on `args`. Grad mode is restored afterwards, even on an error. The steps
  // run without the GIL (other Python threads run meanwhile, other programs replay in parallel): the
  // ops are C++ on the frame's own tensors; host calls, the backward pass and the reads and writes of
  // .grad take the GIL back, as they hold it eagerly (capture.h's with_gil).
  std::vector<Tensor> run(const std::vector<Tensor>& args) const {
    if (static_cast<int>(args.size()) != inputs)
      throw ValueError(cat("compiled program: expected ", inputs, " tensor inputs, got ", args.size()));
    Frame frame = frame_template;
    std::copy(args.begin(), args.end(), frame.begin());
    py::gil_scoped_release no_gil;
    GradModeGuard restore(grad_enabled());
    for (const Step& step : steps) {
      if (step.grad_mode != grad_enabled()) set_grad_enabled(step.grad_mode);
      step.run(frame);
      for (int slot : step.last_use) frame[slot].reset();
    }
    std::vector<Tensor> out;
    for (int slot : outputs) out.push_back(frame[slot]);
    return out;
  }
};

struct Recorder {
  uint32_t id;
  int depth = 0;
  bool abandoned = false;
  std::string reason, location;
  py::object locate;  // Python: the user's line that is running ("file:line")
  std::unique_ptr<Program> program = std::make_unique<Program>();
  std::unordered_map<const TensorImpl*, int> slots;
  std::vector<Geometry> geometries;  // per slot
  std::vector<size_t> last_step;     // per slot: the last step that reads or writes it
  std::vector<Tensor> alive;         // every slot's tensor, so that no address is reused meanwhile

  int new_slot(const Tensor& t) {
    const int slot = static_cast<int>(alive.size());
    slots.emplace(t.get(), slot);
    geometries.push_back(geometry_of(t));
    last_step.push_back(0);
    alive.push_back(t);
    return slot;
  }
};

namespace {
thread_local Recorder* this_thread_recorder = nullptr;
uint32_t last_capture_id = 0;

void untracked(const char* what) {
  Recorder* r = this_thread_recorder;
  if (r && r->depth == 0) abandon(r, what);
}
}  // namespace

Recorder* recorder() { return this_thread_recorder; }
bool recording(const Recorder* r) { return r && r->depth == 0 && !r->abandoned; }

void abandon(Recorder* r, const char* what) {
  if (r->abandoned) return;
  r->abandoned = true;
  r->reason = what;
  // Where the user's code is: asked of Python, which may be waiting for the GIL (a kernel released it).
  py::gil_scoped_acquire gil;
  try {
    r->location = py::cast<std::string>(r->locate());
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("fastgrad.compile locating a graph break");
  }
}

void cannot_replay(const char* what) {
  Recorder* r = this_thread_recorder;
  if (r && r->depth == 0) abandon(r, what);
}

namespace {

// The slot of a tensor argument of the step about to be added: -1 for an undefined tensor, -2 when
// refused (the capture is abandoned).
int input_slot(Recorder* r, const Tensor& t) {
  if (!t) return -1;
  auto found = r->slots.find(t.get());
  if (found != r->slots.end()) {
    r->last_step[found->second] = r->program->steps.size();  // the step about to be added
    if (r->geometries[found->second] == geometry_of(t)) return found->second;
    abandon(r, "a tensor changed in place by an operation compile cannot capture (x.data = ..., an in-place view op)");
    return -2;
  }
  if (t->capture_birth == r->id) {
    abandon(r, "a tensor made by an operation compile cannot capture yet (a view, detach(), .data, ...)");
    return -2;
  }
  // Made before the call (a parameter, a buffer, a global): replays read it as it is then.
  const int slot = r->new_slot(t);
  r->last_step[slot] = r->program->steps.size();
  r->program->frame_template.push_back(t);
  return slot;
}

int output_slot(Recorder* r, const Tensor& t) {
  if (!t) return -1;
  auto found = r->slots.find(t.get());
  if (found == r->slots.end()) {
    r->program->frame_template.emplace_back();
    const int slot = r->new_slot(t);
    r->last_step[slot] = r->program->steps.size();
    return slot;
  }
  r->last_step[found->second] = r->program->steps.size();
  r->geometries[found->second] = geometry_of(t);  // an in-place op's result is its input
  return found->second;
}

void refresh_geometry(Recorder* r, const Tensor& t) {
  if (!t) return;
  auto found = r->slots.find(t.get());
  if (found != r->slots.end()) r->geometries[found->second] = geometry_of(t);
}

// `identity` (the op, its slots and its other arguments) goes into the program's fingerprint.
void add_step(Recorder* r, Step step, size_t identity) {
  step.grad_mode = grad_enabled();
  r->program->steps.push_back(std::move(step));
  r->program->fingerprint = combine(combine(r->program->fingerprint, identity), grad_enabled());
}

// Marks the ops and allocations of a recorded host call as its own while it runs.
class Region {
 public:
  explicit Region(Recorder* r) : r_(r) { ++r_->depth; }
  ~Region() { --r_->depth; }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

 private:
  Recorder* r_;
};

// A host call as a step: fn() again, with the GIL taken back (a replay runs without it), or the
// optimizer update it stands for in C++ where optim_replay.h can do it.
struct HostCall {
  py::object fn;
  std::optional<FusedUpdate> fused;
  HostCall(py::object f, std::optional<FusedUpdate> u) : fn(std::move(f)), fused(std::move(u)) {}
  Results run(TensorArgs) const {
    py::gil_scoped_acquire gil;
    if (!fused || !replay_fused_update(*fused)) fn();
    return {};
  }
};

// Records one op around its eager run: the constructor takes the slots of the op's tensor arguments
// as they are before it runs (its result may be one of them) and marks what the op does inside as
// its own; finish() adds the step once the op has run.
class OpRecord {
 public:
  OpRecord(Recorder* r, const ArgRef* args, size_t count, size_t op_identity);
  ~OpRecord();
  OpRecord(const OpRecord&) = delete;
  OpRecord& operator=(const OpRecord&) = delete;
  // results: the op's (none for a void op); long_work: the replay runs it without the GIL.
  void finish(Call call, bool long_work, const Results& results);

 private:
  Recorder* r_;
  const ArgRef* args_;
  size_t count_;
  size_t identity_;
  std::vector<int> slots_;
  bool refused_ = false;
};

OpRecord::OpRecord(Recorder* r, const ArgRef* args, size_t count, size_t op_identity)
    : r_(r), args_(args), count_(count), identity_(op_identity) {
  for (size_t i = 0; i < count; ++i) {
    if (args[i].tensor) {
      slots_.push_back(input_slot(r, *args[i].tensor));
    } else if (args[i].list) {
      for (const Tensor& t : *args[i].list) slots_.push_back(input_slot(r, t));
    }
    identity_ = combine(identity_, args[i].identity);  // a list may come with values (an index's)
  }
  for (int slot : slots_) {
    refused_ |= slot == -2;
    identity_ = combine(identity_, std::hash<int>()(slot));
  }
  ++r_->depth;
}

OpRecord::~OpRecord() { --r_->depth; }

void OpRecord::finish(Call call, bool long_work, const Results& results) {
  // The arguments' geometry as the op left it (an in-place view op, x.data = y).
  for (size_t i = 0; i < count_; ++i) {
    if (args_[i].tensor) refresh_geometry(r_, *args_[i].tensor);
    if (args_[i].list)
      for (const Tensor& t : *args_[i].list) refresh_geometry(r_, t);
  }
  if (refused_) return;
  Step step(std::move(call), std::move(slots_));
  step.long_work = long_work;
  for (const Tensor& result : results) {
    StepResult& kept = step.results.emplace_back();
    kept.slot = output_slot(r_, result);
    kept.defined = bool(result);
    if (kept.defined) kept.shape = result->shape;
    identity_ = combine(identity_, std::hash<int>()(kept.slot));
  }
  add_step(r_, std::move(step), identity_);
}

}  // namespace

Results run_recorded(Call call, bool long_work, const ArgRef* args, size_t count, size_t op_identity) {
  // The op's tensors in the Call's order: copies holding their own references (with the GIL
  // released, another thread may drop the caller's Python objects).
  std::vector<Tensor> tensors;
  for (size_t i = 0; i < count; ++i) {
    if (args[i].tensor) tensors.push_back(*args[i].tensor);
    if (args[i].list) tensors.insert(tensors.end(), args[i].list->begin(), args[i].list->end());
  }
  std::vector<int> positions(tensors.size());
  std::iota(positions.begin(), positions.end(), 0);
  const TensorArgs in_place{tensors.data(), positions.data()};
  Recorder* r = recorder();
  if (!recording(r)) return run_call(call, long_work, in_place);
  OpRecord record(r, args, count, op_identity);
  Results results = run_call(call, long_work, in_place);
  record.finish(std::move(call), long_work, results);
  return results;
}

namespace {

// The tensors of a Python list, which must hold only tensors.
template <class F>
void for_each_tensor(py::handle list, const char* caller, F f) {
  if (!PyList_Check(list.ptr())) throw TypeError(cat(caller, "(): expected a list of tensors"));
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list.ptr()); ++i) {
    const Tensor* t = tensor_of(PyList_GET_ITEM(list.ptr(), i));
    if (!t) throw TypeError(cat(caller, "(): expected a list of tensors"));
    f(**t);
  }
}

// _compile.py's guard state of a value a compiled function reaches (what its replay depends on in
// it but for the tensors it reaches, appended to `tensors`): a primitive by type and value, a module
// by module_parts(module) (its structure's key and tensors, cached in Python), a tuple, list or dict
// by its contents `depth` levels deep (and its identity, unless it is an argument: `inputs`),
// anything else by identity. The same objects as _compile.py built in Python before, in C++ since
// they are computed on every call.
struct GuardWalk {
  py::list tensors;
  py::handle module_class, module_parts;
  bool inputs;

  py::object state(py::handle value, int depth) {
    if (tensor_of(value.ptr())) {
      if (!inputs) tensors.append(value);
      return py::none();
    }
    PyTypeObject* kind = Py_TYPE(value.ptr());
    const py::handle type(reinterpret_cast<PyObject*>(kind));
    if (kind == &PyBool_Type || kind == &PyLong_Type || kind == &PyFloat_Type || kind == &PyComplex_Type ||
        kind == &PyUnicode_Type || kind == &PyBytes_Type || value.is_none())
      return py::make_tuple(type, value);
    const int is_module = PyObject_IsInstance(value.ptr(), module_class.ptr());
    if (is_module < 0) throw py::error_already_set();
    if (is_module) {
      py::tuple parts = module_parts(value);
      for (py::handle t : parts[1]) tensors.append(t);
      return parts[0];
    }
    const bool dict = kind == &PyDict_Type;
    if (depth > 0 && (dict || kind == &PyTuple_Type || kind == &PyList_Type)) {
      std::vector<py::object> contents;
      if (dict) {
        for (auto [k, v] : py::reinterpret_borrow<py::dict>(value))
          contents.push_back(py::make_tuple(k, state(v, depth - 1)));
      } else {
        const py::sequence items = py::reinterpret_borrow<py::sequence>(value);
        for (size_t i = 0; i < items.size(); ++i) contents.push_back(py::make_tuple(i, state(items[i], depth - 1)));
      }
      py::tuple key(contents.size());
      for (size_t i = 0; i < contents.size(); ++i) key[i] = std::move(contents[i]);
      if (inputs) return std::move(key);  // an argument's container is new on each call
      return py::make_tuple(py::reinterpret_steal<py::object>(PyLong_FromVoidPtr(value.ptr())), key);
    }
    return py::reinterpret_steal<py::object>(PyLong_FromVoidPtr(value.ptr()));  // id(value)
  }
};

// _compile.py's key of a call's arguments: a tensor as (Tensor, its position in `tensors`, where it
// is appended the first time it is met), a tuple or list as (its type, its items' keys), a dict as
// (dict, its (key, value's key) pairs), anything else as (its type, itself), which must hash (else
// TypeError: the call cannot have a key). The type too: f(x, 1) and f(x, True) promote differently.
struct ArgumentKeys {
  py::list tensors;
  std::unordered_map<PyObject*, size_t> positions;

  py::object key(py::handle value) {
    const py::handle type(reinterpret_cast<PyObject*>(Py_TYPE(value.ptr())));
    if (tensor_of(value.ptr())) {
      auto [at, added] = positions.emplace(value.ptr(), positions.size());
      if (added) tensors.append(value);
      return py::make_tuple(py::type::of<TensorImpl>(), at->second);
    }
    const bool dict = PyDict_CheckExact(value.ptr());
    if (dict || PyTuple_CheckExact(value.ptr()) || PyList_CheckExact(value.ptr())) {
      std::vector<py::object> items;
      if (dict) {
        for (auto [k, v] : py::reinterpret_borrow<py::dict>(value)) items.push_back(py::make_tuple(k, key(v)));
      } else {
        const py::sequence sequence = py::reinterpret_borrow<py::sequence>(value);
        for (size_t i = 0; i < sequence.size(); ++i) items.push_back(key(sequence[i]));
      }
      py::tuple keys(items.size());
      for (size_t i = 0; i < items.size(); ++i) keys[i] = std::move(items[i]);
      return py::make_tuple(type, keys);
    }
    if (PyObject_Hash(value.ptr()) == -1) throw py::error_already_set();
    return py::make_tuple(type, value);
  }
};

py::bytes words_to_bytes(const std::vector<int64_t>& words) {
  return py::bytes(reinterpret_cast<const char*>(words.data()), words.size() * sizeof(int64_t));
}

// Ends this thread's capture, whatever becomes of it.
std::unique_ptr<Recorder> end_capture() {
  std::unique_ptr<Recorder> r(this_thread_recorder);
  this_thread_recorder = nullptr;
  active_capture.store(0, std::memory_order_relaxed);
  return r;
}

}  // namespace
}  // namespace fg::capture

namespace fg {

void bind_capture(py::module_& m) {
  using namespace capture;
  py::class_<Program, std::shared_ptr<Program>>(m, "CompiledProgram")
      .def("run", &Program::run)
      .def_property_readonly("num_steps", [](const Program& p) { return p.steps.size(); })
      .def_property_readonly("num_inputs", [](const Program& p) { return p.inputs; })
      .def_property_readonly("fingerprint", [](const Program& p) { return p.fingerprint; })
      // The tensors made before the capture that the program reads (parameters, buffers, globals).
      .def_property_readonly("constants", [](const Program& p) {
        std::vector<Tensor> out;
        for (const Tensor& t : p.frame_template)
          if (t) out.push_back(t);
        return out;
      });
  // Starts recording this thread's ops, `inputs` in the first slots; `locate()` names the user's line.
  // False if another thread is capturing (the call then runs eagerly, unrecorded).
  m.def("_capture_begin", [](const std::vector<Tensor>& inputs, py::object locate) {
    if (capture_in_progress()) return false;
    auto r = std::make_unique<Recorder>();
    r->id = ++last_capture_id == 0 ? ++last_capture_id : last_capture_id;
    r->locate = std::move(locate);
    for (const Tensor& t : inputs) {
      if (r->slots.count(t.get())) throw ValueError("_capture_begin: an input appears twice");
      r->program->frame_template.emplace_back();
      r->new_slot(t);
    }
    r->program->inputs = static_cast<int>(inputs.size());
    capture_untracked = &untracked;
    this_thread_recorder = r.release();
    active_capture.store(this_thread_recorder->id, std::memory_order_relaxed);
    return true;
  });
  // Ends the capture: the program whose outputs are `outputs`, or (reason, "file:line") when the
  // function did something the capture cannot replay.
  m.def("_capture_end", [](const std::vector<Tensor>& outputs) -> py::object {
    std::unique_ptr<Recorder> r = end_capture();
    if (!r) throw RuntimeError("_capture_end: no capture in progress on this thread");
    if (!r->abandoned) {
      r->depth = 0;  // the outputs' slots are looked up as inputs of a last step would be
      for (const Tensor& t : outputs) {
        const int slot = input_slot(r.get(), t);
        if (slot < 0) break;
        r->program->outputs.push_back(slot);
      }
    }
    if (!r->abandoned) {
      Program& program = *r->program;
      for (int slot : program.outputs) r->last_step[slot] = program.steps.size();  // kept to the end
      for (size_t slot = 0; slot < r->last_step.size(); ++slot)
        if (r->last_step[slot] < program.steps.size()) program.steps[r->last_step[slot]].last_use.push_back(slot);
      // Undefined arguments read one slot that stays empty.
      const int undefined = static_cast<int>(program.frame_template.size());
      program.frame_template.emplace_back();
      for (Step& step : program.steps) std::replace(step.slots.begin(), step.slots.end(), -1, undefined);
    }
    if (r->abandoned) return py::make_tuple(r->reason, r->location);
    return py::cast(std::shared_ptr<Program>(std::move(r->program)));
  });
  // The guard of a call's tensor inputs, as bytes compared whole: each one's shape, strides, offset,
  // dtype and requires_grad, and which earlier input shares its storage (the replay's ops see the
  // same aliasing).
  m.def("_input_signature", [](py::handle tensors) {
    std::vector<int64_t> words;
    std::vector<const Storage*> storages;
    for_each_tensor(tensors, "_input_signature", [&](const TensorImpl& t) {
      const int64_t sharing = std::find(storages.begin(), storages.end(), t.storage.get()) - storages.begin();
      storages.push_back(t.storage.get());
      words.insert(words.end(), {t.dim(), t.offset, static_cast<int64_t>(t.dtype), t.requires_grad(), sharing});
      words.insert(words.end(), t.shape.begin(), t.shape.end());
      words.insert(words.end(), t.strides.begin(), t.strides.end());
    });
    return words_to_bytes(words);
  });
  // The guard of the tensors a replay reads as they are (parameters, buffers, globals): each one's
  // identity, dtype, requires_grad, whether its .grad is set (Python may branch on it) and shape.
  m.def("_guard_tensors", [](py::handle tensors) {
    std::vector<int64_t> words;
    for_each_tensor(tensors, "_guard_tensors", [&](const TensorImpl& t) {
      words.insert(words.end(), {reinterpret_cast<intptr_t>(&t), t.dim(), static_cast<int64_t>(t.dtype),
                                 t.requires_grad(), bool(t.grad)});
      words.insert(words.end(), t.shape.begin(), t.shape.end());
    });
    return words_to_bytes(words);
  });
  // The guard state of what a compiled function reaches besides its tensor arguments (_compile.py's
  // _reached): the object of a bound method, its closure cells (None for an empty one), the global
  // names its code reads, and its arguments; the tensors met on the way are appended to `tensors`.
  m.def("_guard_reached", [](py::handle self, py::tuple cells, py::dict globals, py::tuple names, py::handle args,
                             py::list tensors, int depth, py::handle module_class, py::handle module_parts) {
    GuardWalk walk{tensors, module_class, module_parts, false};
    py::tuple parts(2 + cells.size() + names.size());
    size_t i = 0;
    parts[i++] = walk.state(self, depth);
    for (py::handle cell : cells) {
      PyObject* contents = PyCell_GET(cell.ptr());
      parts[i++] = contents ? walk.state(contents, depth) : py::none();
    }
    for (py::handle name : names) {
      PyObject* value = PyDict_GetItemWithError(globals.ptr(), name.ptr());
      if (!value && PyErr_Occurred()) throw py::error_already_set();
      parts[i++] = walk.state(value ? value : Py_None, depth);
    }
    walk.inputs = true;
    parts[i++] = walk.state(args, depth);
    return parts;
  });
  m.def("_argument_key",
        [](py::handle arguments, py::list tensors) { return ArgumentKeys{tensors, {}}.key(arguments); });
  m.def("_capture_abort", [] { end_capture(); });
  // Python code that knows a replay would go wrong (capture.h's cannot_replay).
  m.def("_capture_abandon", [](const std::string& what) { cannot_replay(what.c_str()); });
  // Whether this thread records steps now (a capture at depth 0).
  m.def("_capturing", [] { return recording(recorder()); });
  // An eager optimizer step or zero_grad done as a replay does it (optim_replay.h; the same bits as the
  // Python method's, without its per-parameter work): false when the Python method must run.
  m.def("_run_fused_update", [](py::handle fused) { return replay_fused_update(fused_update_of(fused)); });
  // fn(*args), a host call of the program: replays call it again (an optimizer's step, a scheduler's
  // step: Python that reads its state then). What it does with tensors is its own, not recorded.
  // `fused`: None, or the C++ form of an optimizer's step or zero_grad (optim_replay.h) that replays
  // run instead of fn() when they can.
  m.def("_capture_host_call", [](py::object fn, py::handle fused) {
    Recorder* r = recorder();
    if (!recording(r)) return fn();
    // Its identity: for a functools.partial (which hashes by identity), the method and the arguments
    // that hash.
    const bool partial = py::hasattr(fn, "func") && py::hasattr(fn, "args");
    size_t identity = py::hash(partial ? fn.attr("func") : fn);
    for (py::handle a : partial ? py::tuple(fn.attr("args")) : py::tuple()) {
      const Py_hash_t h = PyObject_Hash(a.ptr());
      if (h == -1) PyErr_Clear();
      identity = combine(identity, static_cast<size_t>(h));
    }
    std::optional<FusedUpdate> update;
    if (!fused.is_none()) update = fused_update_of(fused);
    Step step(Call(new HostCall(fn, std::move(update))));
    add_step(r, std::move(step), identity);
    Region region(r);
    return fn();
  });
}

}  // namespace fg
