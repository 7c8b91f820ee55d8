// C[b] = A[b] @ B[b] for `batch` products of (n x k) by (k x m), operands read through arbitrary
// strides (so transposed views need no copy), C contiguous. Plain loops in i-k-j order, for the
// integer products; floating point runs the packed SIMD GEMM (gemm_impl.h).
#pragma once
#include <cstdint>

#include "core/numeric.h"

namespace fg {

struct MatrixView {
  int64_t batch_stride, row_stride, col_stride;
};

// c + a * b in T; int64 wraps on overflow, as PyTorch's integer matmul (undefined in plain C++).
template <class T>
inline T multiply_add(T c, T a, T b) {
  return static_cast<T>(wrap_add<T>(c, static_cast<T>(wrap_mul<T>(a, b))));
}

template <class T>
void batched_matmul(int64_t batch, int64_t n, int64_t k, int64_t m, const T* a, MatrixView as, const T* b,
                    MatrixView bs, T* c) {
  for (int64_t p = 0; p < batch; ++p) {
    const T* ap = a + p * as.batch_stride;
    const T* bp = b + p * bs.batch_stride;
    T* cp = c + p * n * m;
    for (int64_t i = 0; i < n * m; ++i) cp[i] = T(0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t q = 0; q < k; ++q) {
        T aiq = ap[i * as.row_stride + q * as.col_stride];
        const T* brow = bp + q * bs.row_stride;
        T* crow = cp + i * m;
        for (int64_t j = 0; j < m; ++j) crow[j] = multiply_add(crow[j], aiq, brow[j * bs.col_stride]);
      }
  }
}

}  // namespace fg
