// _C._CPUGenerator: the core's CPUGenerator (core/generator.h) and the distribution fills of
// ops/random.h, writing into contiguous numpy arrays that fastgrad/random.py and _sampling.py
// allocate and turn into tensors. The GIL stays held: it serialises draws from one generator, as
// ATen's generator mutex does. _C.fill_drawn_ runs such a fill on a tensor as one op, so that
// fastgrad.compile replays the draw.
#include "core/generator.h"
#include "ops/random.h"
#include "python/bindings.h"
#include "python/capture.h"

namespace fg {

namespace capture {

// A fill of _CPUGenerator (a bound method) and its arguments after the array. A capture keeps it
// as the step's argument, by the hash of the arguments (the generator's identity is the method's).
struct DrawnFill {
  py::object fill;
  py::tuple args;
};
template <>
struct Kept<DrawnFill> : KeptCopy<DrawnFill> {};
inline size_t identity_of(const DrawnFill& f) {
  const Py_hash_t h = PyObject_Hash(f.args.ptr());
  if (h == -1) PyErr_Clear();  // unhashable arguments: the fill counts by its kind alone
  return static_cast<size_t>(h);
}

// The _CPUGenerator a draw reads, kept by a capture as its Python object: a replay draws from the
// generator's state then, as an eager call would.
struct Engine {
  py::object generator;
};
template <>
struct Kept<Engine> : KeptCopy<Engine> {};

}  // namespace capture

namespace {

// The element pointer and size of a writable C-contiguous array of the dtype `kind`'s kernel takes.
template <typename T>
T* elements(py::array& a) {
  if (!(a.flags() & py::array::c_style) || !a.writeable())
    throw ValueError("random fills write into a writable C-contiguous array");
  return static_cast<T*>(a.mutable_data());
}

// Calls fill(T* data, n) with the array's element type: the real types, or every type a fill of
// integers takes (bool, integers, reals).
template <bool any_type, typename Fill>
void dispatch(py::array& a, const Fill& fill) {
  const char kind = a.dtype().kind();
  const auto size = a.itemsize();
  const int64_t n = a.size();
  if (kind == 'f' && size == 4) return fill(elements<float>(a), n);
  if (kind == 'f' && size == 8) return fill(elements<double>(a), n);
  if constexpr (any_type) {
    if (kind == 'b') return fill(elements<bool>(a), n);
    if (kind == 'u' && size == 1) return fill(elements<uint8_t>(a), n);
    if (kind == 'i' && size == 1) return fill(elements<int8_t>(a), n);
    if (kind == 'i' && size == 2) return fill(elements<int16_t>(a), n);
    if (kind == 'i' && size == 4) return fill(elements<int32_t>(a), n);
    if (kind == 'i' && size == 8) return fill(elements<int64_t>(a), n);
  }
  throw TypeError(cat("no random fill for numpy dtype ", std::string(py::str(a.dtype()))));
}

}  // namespace

void bind_random(py::module_& m) {
  py::class_<CPUGenerator>(m, "_CPUGenerator",
                           "PyTorch's CPU generator (mt19937), with the fills of its CPU distribution kernels.")
      .def(py::init<uint64_t>())
      .def("manual_seed", &CPUGenerator::manual_seed)
      .def("initial_seed", &CPUGenerator::initial_seed)
      .def("random", &CPUGenerator::random, "One 32-bit draw.")
      .def("random64", &CPUGenerator::random64, "Two 32-bit draws, the first the high half.")
      .def(
          "get_state",
          [](const CPUGenerator& g) {
            auto bytes = g.get_state();
            return py::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
          },
          "ATen's CPUGeneratorImplState bytes (torch.get_rng_state()'s values).")
      .def("set_state",
           [](CPUGenerator& g, const py::bytes& state) {
             std::string_view bytes(state);
             g.set_state(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
           })
      .def("uniform_",
           [](CPUGenerator& g, py::array out, double from, double to) {
             dispatch<false>(out, [&](auto* data, int64_t n) { random::uniform(g, data, n, from, to); });
           })
      .def("normal_",
           [](CPUGenerator& g, py::array out, double mean, double std, bool contiguous) {
             dispatch<false>(out, [&](auto* data, int64_t n) { random::normal(g, data, n, mean, std, contiguous); });
           })
      .def("exponential_",
           [](CPUGenerator& g, py::array out, double lambd) {
             dispatch<false>(out, [&](auto* data, int64_t n) { random::exponential(g, data, n, lambd); });
           })
      .def("geometric_",
           [](CPUGenerator& g, py::array out, double p) {
             dispatch<true>(out, [&](auto* data, int64_t n) { random::geometric(g, data, n, p); });
           })
      .def("log_normal_",
           [](CPUGenerator& g, py::array out, double mean, double std) {
             dispatch<false>(out, [&](auto* data, int64_t n) { random::log_normal(g, data, n, mean, std); });
           })
      .def("cauchy_",
           [](CPUGenerator& g, py::array out, double median, double sigma) {
             dispatch<false>(out, [&](auto* data, int64_t n) { random::cauchy(g, data, n, median, sigma); });
           })
      .def("poisson_",
           [](CPUGenerator& g, py::array out, py::array rates) {
             if (rates.size() != out.size() || !rates.dtype().is(out.dtype()) || !(rates.flags() & py::array::c_style))
               throw ValueError("poisson_: one rate of the output's type per value, C-contiguous");
             dispatch<false>(out, [&](auto* data, int64_t n) {
               using T = std::remove_pointer_t<decltype(data)>;
               random::poisson(g, data, static_cast<const T*>(rates.data()), n);
             });
           })
      .def("random_from_to_",
           [](CPUGenerator& g, py::array out, uint64_t range, int64_t from) {
             dispatch<true>(out, [&](auto* data, int64_t n) { random::random_from_to(g, data, n, range, from); });
           })
      .def("random_full_range_",
           [](CPUGenerator& g, py::array out) {
             dispatch<true>(out, [&](auto* data, int64_t n) { random::random_full_range(g, data, n); });
           })
      .def("random_",
           [](CPUGenerator& g, py::array out) {
             dispatch<true>(out, [&](auto* data, int64_t n) { random::random_default(g, data, n); });
           })
      .def("bernoulli_",
           [](CPUGenerator& g, py::array out, double p) {
             dispatch<true>(out, [&](auto* data, int64_t n) { random::bernoulli_scalar(g, data, n, p); });
           })
      .def("bernoulli_tensor_",
           [](CPUGenerator& g, py::array out, py::array p) {
             if (p.size() != out.size()) throw ValueError("bernoulli_tensor_: one probability per value");
             dispatch<false>(p, [&](auto* probabilities, int64_t) {
               dispatch<true>(out, [&](auto* data, int64_t n) { random::bernoulli_tensor(g, data, probabilities, n); });
             });
           })
      .def("multinomial_with_replacement_",
           [](CPUGenerator& g, py::array_t<int64_t> out, py::array probabilities) {
             // out: rows x samples, probabilities: rows x categories (float32 or float64)
             if (out.ndim() != 2 || probabilities.ndim() != 2 || out.shape(0) != probabilities.shape(0) ||
                 probabilities.shape(1) < 1)
               throw ValueError("multinomial_with_replacement_: rows x samples out, rows x categories probabilities");
             int64_t* samples = elements<int64_t>(out);
             dispatch<false>(probabilities, [&](auto* p, int64_t) {
               random::multinomial_with_replacement(g, samples, p, out.shape(0), probabilities.shape(1), out.shape(1));
             });
           })
      .def("multinomial_top_",
           [](CPUGenerator&, py::array_t<int64_t> out, py::array keys) {
             // out: rows x count, keys: rows x categories (float32 or float64), count <= categories
             if (out.ndim() != 2 || keys.ndim() != 2 || out.shape(0) != keys.shape(0) || out.shape(1) < 1 ||
                 out.shape(1) > keys.shape(1))
               throw ValueError("multinomial_top_: rows x count out, rows x categories keys");
             int64_t* positions = elements<int64_t>(out);
             dispatch<false>(keys, [&](auto* k, int64_t) {
               random::top_keys(positions, k, keys.shape(0), keys.shape(1), out.shape(1));
             });
           })
      .def("randperm_",
           [](CPUGenerator& g, py::array_t<int64_t> out) { random::randperm(g, elements<int64_t>(out), out.size()); });

  // fill(out's elements as a flat array, *args): `out` (C-contiguous) filled with fresh draws. An op,
  // so that a compiled function's replay draws again, from the generator's state then, as an eager
  // call would; with the GIL, which the fill needs and which serialises draws from one generator.
  m.def("fill_drawn_", [](const Tensor& out, py::object fill, py::tuple args) {
    if (!out->is_contiguous()) throw ValueError("fill_drawn_: a contiguous tensor to fill");
    auto draw = with_gil(
        [](const Tensor& t, const capture::DrawnFill& f) { f.fill(tensor_to_numpy(t).attr("reshape")(-1), *f.args); });
    call_op(false, draw, out, capture::DrawnFill{std::move(fill), std::move(args)});
  });
  // multinomial(probabilities, 1): _sampling's path for one sample per row (random.h). An op, so that
  // fastgrad.compile replays the draw; with the GIL, which serialises draws from one generator.
  m.def("multinomial_one", [](py::object engine, const Tensor& probabilities) {
    auto draw = with_gil([](const Tensor& p, const capture::Engine& e) {
      return random::multinomial_one(e.generator.cast<CPUGenerator&>(), p);
    });
    return call_op(false, draw, probabilities, capture::Engine{std::move(engine)});
  });
}

}  // namespace fg
