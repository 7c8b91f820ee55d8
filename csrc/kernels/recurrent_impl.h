// The recurrent layers' per-step gate kernels (ops/recurrent.cpp runs the products around them):
// one pass over a step's rows, a vector of units at a time, instead of a kernel call per gate.
//
// Forward: the composition's ops in its order (nn/rnn.py, ATen's CPU cell formulas), each lane
// with the elementwise kernels' own functions (sigmoid_value, tanh; + - * exact), so every state is
// the composed ops' bits: the pass only keeps the intermediate values in registers.
// Backward: the derivatives from the saved activations, the same expressions in the same order on
// every ISA (exact + - *; the build does not contract them into fma), so its bits do not depend on
// the ISA either.
//
// Included once per ISA translation unit, inside that ISA's namespace (see isa.h / simd.h).
#pragma once
#include <cstdint>

#include "kernels/elementwise_impl.h"
#include "kernels/kernel_table.h"
#include "kernels/simd.h"

namespace fg::simd::FG_ISA_NAMESPACE {
namespace recurrent_detail {

// The vector of units a kernel works on: kWidth of them (Full, a compile-time count: plain loads
// and stores) or the `count` < kWidth past the last full vector (zero-padded loads, partial stores).
template <class T>
struct Full {
  static constexpr int64_t count = Vec<T>::kWidth;
};
template <class T>
Vec<T> load_part(const T* p, Full<T>) {
  return Vec<T>::load(p);
}
template <class T>
void store_part(Vec<T> v, T* p, Full<T>) {
  v.store(p);
}
template <class T>
Vec<T> load_part(const T* p, int64_t count) {
  return load_first(p, count);
}
template <class T>
void store_part(Vec<T> v, T* p, int64_t count) {
  store_first(v, p, count);
}

// Calls body(row, unit, n) for every vector of units of every row, n a Full<T> or the tail's count.
template <class T, class F>
void for_each_vector(int64_t rows, int64_t hidden, F body) {
  constexpr int64_t W = Vec<T>::kWidth;
  const int64_t full = hidden / W * W;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < full; j += W) body(r, j, Full<T>{});
    if (full < hidden) body(r, full, hidden - full);
  }
}

// FG_FLATTEN (elementwise_impl.h): the vector functions (tanh, exp, their polynomials) inlined into the pass.
template <class T, RecurrentCell Cell>
FG_FLATTEN void step_forward(const RecurrentStep<T>& s) {
  using V = Vec<T>;
  const int64_t H = s.hidden, G = recurrent_gates(Cell) * H, K = recurrent_kept(Cell) * H;
  for_each_vector<T>(s.rows, H, [&](int64_t r, int64_t j, auto n) {
    auto in = [n, j](const T* row, int64_t part) { return load_part(row + part + j, n); };
    auto out = [n, j](V v, T* row, int64_t part) { store_part(v, row + part + j, n); };
    // gate q's h W_hh^T + b_hh (addmm's epilogue), and the projected input's part of it
    auto hidden = [&](int64_t q) {
      return s.bias ? in(s.hh + r * G, q * H) + in(s.bias, q * H) : in(s.hh + r * G, q * H);
    };
    auto input = [&](int64_t q) { return in(s.x + r * G, q * H); };
    T* h_out = s.h_out + r * H;
    if constexpr (Cell == RecurrentCell::RnnTanh) {
      out(tanh(hidden(0) + input(0)), h_out, 0);
    } else if constexpr (Cell == RecurrentCell::RnnRelu) {
      out(Relu{}(hidden(0) + input(0)), h_out, 0);
    } else if constexpr (Cell == RecurrentCell::Lstm) {
      const V i = sigmoid_value(hidden(0) + input(0)), f = sigmoid_value(hidden(1) + input(1));
      const V g = tanh(hidden(2) + input(2)), o = sigmoid_value(hidden(3) + input(3));
      const V c = f * in(s.c + r * H, 0) + i * g;  // c' = f * c + i * g
      const V tc = tanh(c);
      T* keep = s.keep + r * K;
      out(i, keep, 0), out(f, keep, H), out(g, keep, 2 * H), out(o, keep, 3 * H), out(tc, keep, 4 * H);
      out(c, s.c_out + r * H, 0);
      out(o * tc, h_out, 0);  // h' = o * tanh(c')
    } else {
      const V reset = sigmoid_value(hidden(0) + input(0)), update = sigmoid_value(hidden(1) + input(1));
      const V hn = hidden(2);
      const V candidate = tanh(input(2) + hn * reset);  // n = tanh(x_n + (h W_hn + b_hn) * r)
      T* keep = s.keep + r * K;
      out(reset, keep, 0), out(update, keep, H), out(candidate, keep, 2 * H), out(hn, keep, 3 * H);
      out((in(s.h + r * H, 0) - candidate) * update + candidate, h_out, 0);  // h' = (h - n) * z + n
    }
  });
}

template <class T, RecurrentCell Cell>
FG_FLATTEN void step_backward(const RecurrentStepGrad<T>& s) {
  using V = Vec<T>;
  const int64_t H = s.hidden, G = recurrent_gates(Cell) * H, K = recurrent_kept(Cell) * H;
  const V one = V::broadcast(T(1)), zero = V::broadcast(T(0));
  for_each_vector<T>(s.rows, H, [&](int64_t r, int64_t j, auto n) {
    auto in = [n, j](const T* row, int64_t part) { return load_part(row + part + j, n); };
    auto out = [n, j](V v, T* row, int64_t part) { store_part(v, row + part + j, n); };
    const T* keep = s.keep + r * K;
    T *grad_h = s.grad_h + r * H, *grad_x = s.grad_x + r * G;
    // h''s gradient: its direct part, the part through the next step's product, the layer output's
    const V dh = (in(grad_h, 0) + in(s.through + r * H, 0)) + in(s.grad_h_out + r * H, 0);
    if constexpr (Cell == RecurrentCell::RnnTanh || Cell == RecurrentCell::RnnRelu) {
      const V y = in(s.h_out + r * H, 0);
      out(Cell == RecurrentCell::RnnTanh ? dh * (one - y * y) : select(gt(y, zero), dh, zero), grad_x, 0);
      out(zero, grad_h, 0);
    } else if constexpr (Cell == RecurrentCell::Lstm) {
      const V i = in(keep, 0), f = in(keep, H), g = in(keep, 2 * H), o = in(keep, 3 * H), tc = in(keep, 4 * H);
      T* grad_c = s.grad_c + r * H;
      const V dcell = (in(grad_c, 0) + in(s.grad_c_out + r * H, 0)) + dh * o * (one - tc * tc);
      out(dcell * g * i * (one - i), grad_x, 0);
      out(dcell * in(s.c + r * H, 0) * f * (one - f), grad_x, H);
      out(dcell * i * (one - g * g), grad_x, 2 * H);
      out(dh * tc * o * (one - o), grad_x, 3 * H);
      out(dcell * f, grad_c, 0);
      out(zero, grad_h, 0);
    } else {
      const V reset = in(keep, 0), update = in(keep, H), candidate = in(keep, 2 * H), hn = in(keep, 3 * H);
      T* grad_hh = s.grad_hh + r * G;
      const V dnew = dh * (one - update) * (one - candidate * candidate);  // through tanh's input
      const V dreset = dnew * hn * reset * (one - reset);
      const V dupdate = dh * (in(s.h + r * H, 0) - candidate) * update * (one - update);
      out(dreset, grad_x, 0), out(dreset, grad_hh, 0);
      out(dupdate, grad_x, H), out(dupdate, grad_hh, H);
      out(dnew, grad_x, 2 * H), out(dnew * reset, grad_hh, 2 * H);
      out(dh * update, grad_h, 0);
    }
  });
}

}  // namespace recurrent_detail

template <class T>
void fill_recurrent(TypedKernels<T>& k) {
  using namespace recurrent_detail;
  using C = RecurrentCell;
  k.recurrent_forward[int(C::RnnTanh)] = step_forward<T, C::RnnTanh>;
  k.recurrent_forward[int(C::RnnRelu)] = step_forward<T, C::RnnRelu>;
  k.recurrent_forward[int(C::Lstm)] = step_forward<T, C::Lstm>;
  k.recurrent_forward[int(C::Gru)] = step_forward<T, C::Gru>;
  k.recurrent_backward[int(C::RnnTanh)] = step_backward<T, C::RnnTanh>;
  k.recurrent_backward[int(C::RnnRelu)] = step_backward<T, C::RnnRelu>;
  k.recurrent_backward[int(C::Lstm)] = step_backward<T, C::Lstm>;
  k.recurrent_backward[int(C::Gru)] = step_backward<T, C::Gru>;
}

}  // namespace fg::simd::FG_ISA_NAMESPACE
