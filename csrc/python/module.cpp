// The extension module: error translation, the registries of Python-side types, grad mode and
// graph statistics. Tensor and op bindings live in tensor_bind.cpp.
#include <algorithm>
#include <chrono>
#include <ctime>

#include "autograd/arena.h"
#include "autograd/grad_mode.h"
#include "kernels/cpu_caches.h"
#include "kernels/isa.h"
#include "kernels/kernel_table.h"
#include "kernels/thread_pool.h"
#include "kernels/ulp_scan.h"
#include "python/bindings.h"

namespace fg {

namespace {
// Borrowed from the fastgrad package at import; the package module keeps them alive.
constexpr int kDTypes = 10;  // DType's values are 0 .. 9
PyObject* dtype_objects[kDTypes] = {};
PyObject* size_type = nullptr;
// set_num_threads caps larger requests here rather than start a million threads.
constexpr int64_t kMaxThreads = 1024;

double thread_seconds() {
#if defined(CLOCK_THREAD_CPUTIME_ID)
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
#else
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
#endif
}
}  // namespace

DType dtype_from_py(py::handle obj) {
  if (!py::hasattr(obj, "_code")) throw TypeError(cat("argument 'dtype' must be fastgrad.dtype, not ", type_name(obj)));
  return static_cast<DType>(obj.attr("_code").cast<int>());
}

py::object dtype_to_py(DType d) { return py::reinterpret_borrow<py::object>(dtype_objects[static_cast<int>(d)]); }

py::object size_to_py(const Shape& shape) {
  py::tuple t(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t[i] = py::int_(shape[i]);
  return py::reinterpret_borrow<py::object>(size_type)(t);
}

std::string type_name(py::handle obj) { return Py_TYPE(obj.ptr())->tp_name; }

bool scalar_from_py(py::handle obj, Scalar& out) {
  PyObject* p = obj.ptr();
  if (PyBool_Check(p)) out = Scalar::from_bool(p == Py_True);
  else if (PyLong_Check(p)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(p, &overflow);
    if (overflow) {
      PyErr_SetString(PyExc_OverflowError, "int too big to convert");
      throw py::error_already_set();
    }
    out = Scalar::from_int(v);
  } else if (PyFloat_Check(p)) out = Scalar::from_float(PyFloat_AS_DOUBLE(p));
  else if (py::isinstance<TensorImpl>(obj)) return false;
  else if (!py::isinstance<py::array>(obj) && py::hasattr(obj, "dtype") && py::hasattr(obj, "item") &&
           py::hasattr(obj, "ndim") && obj.attr("ndim").cast<int>() == 0) {
    // numpy scalars (a 0-d array is not a number to PyTorch). PyTorch reads np.bool_ as a float.
    py::object value = obj.attr("item")();
    if (PyBool_Check(value.ptr())) value = py::float_(value.ptr() == Py_True ? 1.0 : 0.0);
    return scalar_from_py(value, out);
  } else return false;
  return true;
}

Tensor tensor_or_scalar(py::handle obj, DType dtype_for_scalar) {
  if (py::isinstance<TensorImpl>(obj)) return obj.cast<Tensor>();
  Scalar s;
  if (!scalar_from_py(obj, s)) throw TypeError(cat("expected Tensor or number, got ", type_name(obj)));
  // an op of its own: a compiled function keeps the number (in its fingerprint) and makes it again
  return call_op(false, [](const Scalar& s, DType dtype) { return full({}, s, dtype); }, s, dtype_for_scalar);
}

}  // namespace fg

PYBIND11_MODULE(_C, m) {
  using namespace fg;
  m.doc() = "fastgrad's C++ core";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const IndexError& e) {
      PyErr_SetString(PyExc_IndexError, e.what());
    } catch (const ValueError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const TypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    } catch (const NotImplementedError& e) {
      PyErr_SetString(PyExc_NotImplementedError, e.what());
    } catch (const RuntimeError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    } catch (const MemoryError& e) {
      PyErr_SetString(PyExc_MemoryError, e.what());
    } catch (const py::cast_error& e) {
      set_cast_failure(e.what());
    }
  });

  m.def("_register_types", [](py::list dtypes, py::object size) {
    for (int i = 0; i < kDTypes; ++i) dtype_objects[i] = dtypes[i].ptr();
    size_type = size.ptr();
  });
  m.def("is_grad_enabled", &grad_enabled);
  m.def("_set_grad_enabled", &set_grad_enabled);
  m.def("is_inference_mode_enabled", &inference_mode_enabled);
  m.def("_set_inference_mode", &set_inference_mode);
  m.def("set_default_dtype", [](py::handle dtype) { default_float_type_slot() = dtype_from_py(dtype); });
  m.def(
      "graph_stats",
      [] {
        ArenaStats s = arena_stats();
        py::dict d;
        d["live_nodes"] = s.live_nodes;
        d["arena_bytes"] = s.arena_bytes;
        return d;
      },
      "Live graph nodes and bytes held by the node arena.");
  kernels();  // choose the ISA now: a bad FASTGRAD_ISA fails the import with the reason
  m.def(
      "config",
      [] {
        py::dict d;
        d["isa"] = kernels().isa;  // the table in use names the ISA it was compiled for
        py::list names;
        for (Isa isa : available_isas()) names.append(isa_name(isa));
        d["isas_available"] = names;
        d["num_threads"] = get_num_threads();
        d["compiler"] = FASTGRAD_COMPILER;  // these three: defined by CMakeLists.txt
        d["build_type"] = FASTGRAD_BUILD_TYPE;
        d["cxx_flags"] = FASTGRAD_CXX_FLAGS;
        const CacheSizes& caches = cache_sizes();
        py::dict cache_dict;
        cache_dict["l1d"] = caches.l1d;
        cache_dict["l2"] = caches.l2;
        cache_dict["l3"] = caches.l3;
        cache_dict["source"] = caches.source;
        d["caches"] = cache_dict;
        py::dict gemm_blocks;
        for (auto [name, b] :
             {std::pair{"float32", kernels().f32.gemm_blocks}, {"float64", kernels().f64.gemm_blocks}}) {
          py::dict row;
          row["mr"] = b.mr;
          row["nr"] = b.nr;
          row["kc"] = b.kc;
          row["mc"] = b.mc;
          row["nc"] = b.nc;
          gemm_blocks[name] = row;
        }
        d["gemm_blocks"] = gemm_blocks;
        return d;
      },
      "The SIMD instruction set in use (FASTGRAD_ISA forces one), the ones available, threads, how the module "
      "was built (compiler, build type, flags), the CPU's data caches and the GEMM blocks derived from them.");
  m.def(
      "_fma_peak",
      [](double seconds) {
        // One thread's float32 FMA throughput on the active ISA, in GFLOP/s, for the bench's % of peak:
        // the best of short bursts timed in this thread's CPU time where the OS has it (on a virtual
        // machine wall time also counts the time the host runs other guests on this core).
        py::gil_scoped_release release;
        const FmaLoopKernel loop = kernels().f32.fma_loop;
        constexpr int64_t kBurst = 1 << 16;
        double best = 0, spent = 0;
        do {
          const double t0 = thread_seconds();
          const double flops = loop(kBurst);
          const double elapsed = thread_seconds() - t0;
          spent += elapsed;
          if (elapsed > 0) best = std::max(best, flops / elapsed / 1e9);
        } while (spent < seconds);
        return best;
      },
      py::arg("seconds") = 0.05);
  m.def(
      "_ulp_scan",
      [](const std::string& name, const std::string& isa, uint64_t start, uint64_t stop, uint64_t step) {
        const std::pair<const char*, VecUnary> ops[] = {{"exp", VecUnary::Exp},   {"log", VecUnary::Log},
                                                        {"tanh", VecUnary::Tanh}, {"sigmoid", VecUnary::Sigmoid},
                                                        {"sin", VecUnary::Sin},   {"cos", VecUnary::Cos}};
        // gelu's value and gradient, approximate='none' and 'tanh'
        const std::tuple<const char*, Activation, bool> gelus[] = {{"gelu", Activation::Gelu, false},
                                                                   {"gelu_grad", Activation::Gelu, true},
                                                                   {"gelu_tanh", Activation::GeluTanh, false},
                                                                   {"gelu_tanh_grad", Activation::GeluTanh, true}};
        auto op = std::find_if(std::begin(ops), std::end(ops), [&](const auto& o) { return name == o.first; });
        auto gelu =
            std::find_if(std::begin(gelus), std::end(gelus), [&](const auto& o) { return name == std::get<0>(o); });
        if (op == std::end(ops) && gelu == std::end(gelus)) throw ValueError(cat("_ulp_scan: unknown function ", name));
        const Isa isas[] = {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon};
        auto chosen = std::find_if(std::begin(isas), std::end(isas), [&](Isa i) { return isa == isa_name(i); });
        if (chosen == std::end(isas)) throw ValueError(cat("_ulp_scan: unknown ISA ", isa));
        UlpScan scan;
        {
          py::gil_scoped_release released;
          scan = op != std::end(ops)
                     ? ulp_scan(op->second, *chosen, start, stop, step)
                     : gelu_ulp_scan(std::get<1>(*gelu), std::get<2>(*gelu), *chosen, start, stop, step);
        }
        float worst;
        std::memcpy(&worst, &scan.worst_bits, sizeof worst);
        return py::make_tuple(scan.max_ulp, worst, scan.checked);
      },
      "The largest error in ulps of a float32 kernel (exp, log, tanh, sigmoid, sin, cos; gelu, gelu_grad, gelu_tanh, "
      "gelu_tanh_grad) of one ISA over the inputs with bit patterns start, start + step, ... < stop, against double "
      "evaluation: (max_ulp, worst input, inputs checked). "
      "For tests (kernels/ulp_scan.h).");
  m.def("get_num_threads", &get_num_threads, "Threads the long kernels (GEMM, large elementwise, sums) use.");
  m.def(
      "set_num_threads",
      [](py::handle n) {
        if (!PyLong_Check(n.ptr()) || PyBool_Check(n.ptr()))  // as PyTorch: no bool, float or str
          throw RuntimeError(cat("set_num_threads expects an int, but got ", Py_TYPE(n.ptr())->tp_name));
        int overflow = 0;
        const long long threads = PyLong_AsLongLongAndOverflow(n.ptr(), &overflow);
        if (overflow) throw ValueError("Overflow when unpacking long long");
        if (threads > INT32_MAX || threads < INT32_MIN) throw ValueError("Overflow when unpacking long");
        if (threads <= 0) throw RuntimeError("set_num_threads expects a positive integer");
        set_num_threads(static_cast<int>(std::min<long long>(threads, kMaxThreads)));
      },
      "Sets the threads the long kernels use (default: the physical cores).");

  bind_node(m);
  bind_autograd(m);
  bind_tensor(m);
  bind_hooks(m);
  bind_dlpack(m);
  bind_random(m);
  bind_capture(m);
  bind_module_attribute(m);
  guard_argument_errors(m);
}
