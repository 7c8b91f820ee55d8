// Depthwise convolution (groups == channels), one plane at a time: direct loops with the vector over
// output columns. conv.cpp pads each input plane with zeros first, so no tap needs a bounds check;
// a stride over 1 reads (or writes) its columns through a small buffer.
//
// Numerics: each element is one chain of fma in a fixed order -- an output over the taps (ky, kx)
// from zero; an input-gradient element over the (oy, ky, kx) that reach it; a weight-gradient
// lane over the output rows -- so the bits do not depend on how threads split the planes. Across
// ISAs only simd.h's fma differs (fused, or a multiply then an add on the scalar ISA).
//
// Included once per ISA translation unit, inside that ISA's namespace (see isa.h / simd.h).
#pragma once
#include <cstdint>

#include "kernels/kernel_table.h"
#include "kernels/simd.h"

namespace fg::simd::FG_ISA_NAMESPACE {
namespace depthwise_detail {

// p[0], p[stride], ..., count (<= kWidth) of them, as a vector (the lanes past count zero).
template <class T>
Vec<T> load_columns(const T* p, int64_t stride, int64_t count) {
  using V = Vec<T>;
  if (stride == 1 && count == V::kWidth) return V::load(p);
  T buf[V::kWidth] = {};
  for (int64_t i = 0; i < count; ++i) buf[i] = p[i * stride];
  return V::load(buf);
}

// The first count lanes of v to p[0], p[stride], ...
template <class T>
void store_columns(Vec<T> v, T* p, int64_t stride, int64_t count) {
  using V = Vec<T>;
  if (stride == 1 && count == V::kWidth) return v.store(p);
  T buf[V::kWidth];
  v.store(buf);
  for (int64_t i = 0; i < count; ++i) p[i * stride] = buf[i];
}

// Calls f(oy, ox, count) for the output columns in vectors: count of them from ox, row oy.
template <class T, class F>
void for_each_column_vector(const DepthwisePlane& g, F&& f) {
  constexpr int64_t W = Vec<T>::kWidth;
  for (int64_t oy = 0; oy < g.oh; ++oy)
    for (int64_t ox = 0; ox < g.ow; ox += W) f(oy, ox, g.ow - ox < W ? g.ow - ox : W);
}

}  // namespace depthwise_detail

// out (oh x ow) = the taps w (kh x kw) over the padded plane `in` (rows ld apart).
template <class T>
void depthwise_forward(const DepthwisePlane& g, const T* in, const T* w, T* out) {
  using namespace depthwise_detail;
  using V = Vec<T>;
  for_each_column_vector<T>(g, [&](int64_t oy, int64_t ox, int64_t count) {
    V acc = V::broadcast(T(0));
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      const T* row = in + (oy * g.sy + ky * g.dy) * g.ld + ox * g.sx;
      for (int64_t kx = 0; kx < g.kw; ++kx)
        acc = fma(V::broadcast(w[ky * g.kw + kx]), load_columns(row + kx * g.dx, g.sx, count), acc);
    }
    store_columns(acc, out + oy * g.ow + ox, 1, count);
  });
}

// gin (the padded plane, rows ld apart) += the output gradient `grad` (oh x ow) spread back through
// the taps w.
template <class T>
void depthwise_grad_input(const DepthwisePlane& g, const T* grad, const T* w, T* gin) {
  using namespace depthwise_detail;
  using V = Vec<T>;
  for_each_column_vector<T>(g, [&](int64_t oy, int64_t ox, int64_t count) {
    const V gv = load_columns(grad + oy * g.ow + ox, 1, count);
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      T* row = gin + (oy * g.sy + ky * g.dy) * g.ld + ox * g.sx;
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        T* dst = row + kx * g.dx;
        store_columns(fma(V::broadcast(w[ky * g.kw + kx]), gv, load_columns(dst, g.sx, count)), dst, g.sx, count);
      }
    }
  });
}

// acc (kh * kw rows of ow lanes) += each tap's products of `grad` (oh x ow) with the padded plane
// `in` it read, row by row: lane ox of tap (ky, kx) sums the terms of output column ox.
template <class T>
void depthwise_grad_weight(const DepthwisePlane& g, const T* grad, const T* in, T* acc) {
  using namespace depthwise_detail;
  for_each_column_vector<T>(g, [&](int64_t oy, int64_t ox, int64_t count) {
    const Vec<T> gv = load_columns(grad + oy * g.ow + ox, 1, count);
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      const T* row = in + (oy * g.sy + ky * g.dy) * g.ld + ox * g.sx;
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        T* lanes = acc + (ky * g.kw + kx) * g.ow + ox;
        store_columns(fma(gv, load_columns(row + kx * g.dx, g.sx, count), load_columns(lanes, 1, count)), lanes, 1,
                      count);
      }
    }
  });
}

template <class T>
void fill_depthwise(TypedKernels<T>& k) {
  k.depthwise_forward = depthwise_forward<T>;
  k.depthwise_grad_input = depthwise_grad_input<T>;
  k.depthwise_grad_weight = depthwise_grad_weight<T>;
}

}  // namespace fg::simd::FG_ISA_NAMESPACE
