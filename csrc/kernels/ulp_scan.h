// The accuracy check of the float32 transcendental kernels (elementwise_impl.h): the largest error,
// in ulps of the result, of one ISA's float32 kernel over a set of inputs, against the float64
// kernel of the active ISA (within 3 float64 ulps, checked against long double by
// tests/test_kernels.py: about 2^-28 float32 ulps; the C library's functions would take most of the scan's time).
// tests/test_kernels.py runs it over a strided sample of all 2^32 bit patterns, and over all of them with
// FASTGRAD_EXHAUSTIVE_ULP=1.
#pragma once
#include <cstdint>

#include "kernels/isa.h"
#include "kernels/kernel_table.h"

namespace fg {

struct UlpScan {
  double max_ulp = 0;  // infinite where a result is NaN, infinite or a zero of the wrong sign unlike the reference
  uint32_t worst_bits = 0;  // the input with the largest error, as its bit pattern
  uint64_t checked = 0;
};

// Over the inputs with bit patterns start, start + step, ... below stop (stop <= 2^32, step >= 1).
// exp, log, tanh, sigmoid, sin and cos only; an unavailable ISA or another op throws ValueError.
UlpScan ulp_scan(VecUnary op, Isa isa, uint64_t start, uint64_t stop, uint64_t step);
// gelu (op Gelu or GeluTanh) or its gradient gelu'(x) (the incoming gradient 1), likewise.
UlpScan gelu_ulp_scan(Activation op, bool gradient, Isa isa, uint64_t start, uint64_t stop, uint64_t step);

}  // namespace fg
