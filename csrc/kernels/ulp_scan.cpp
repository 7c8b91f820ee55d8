#include "kernels/ulp_scan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.h"

namespace fg {

namespace {

// |got - exact| in ulps of exact rounded to float (the spacing of floats at its magnitude, as
// numpy.spacing); infinite for a special value other than the reference's.
double ulp_error(float got, double exact) {
  const float rounded = static_cast<float>(exact);
  constexpr double inf = std::numeric_limits<double>::infinity();
  if (std::isnan(exact) || std::isinf(rounded)) {
    return (std::isnan(exact) ? std::isnan(got) : got == rounded) ? 0 : inf;
  }
  if (!std::isfinite(got)) return inf;
  if (exact == 0 && got == 0 && std::signbit(exact) != std::signbit(got)) return inf;
  // The spacing is 2^(e - 150) for the biased exponent e of a normal float, 2^-149 for denormals
  // (e = 0); built from its bits: faster than ilogb and ldexp, which dominated the scan.
  uint32_t bits;
  std::memcpy(&bits, &rounded, sizeof bits);
  const uint64_t biased = std::max<uint32_t>((bits >> 23) & 0xff, 1);
  const uint64_t spacing_bits = (biased - 150 + 1023) << 52;
  double spacing;
  std::memcpy(&spacing, &spacing_bits, sizeof spacing);
  return std::fabs(static_cast<double>(got) - exact) / spacing;
}

void check_arguments(Isa isa, uint64_t stop, uint64_t step) {
  const std::vector<Isa> available = available_isas();
  if (std::find(available.begin(), available.end(), isa) == available.end())
    throw ValueError(cat("ulp_scan: ISA ", isa_name(isa), " is not available on this machine"));
  if (step == 0 || stop > (uint64_t{1} << 32)) throw ValueError("ulp_scan: expected step >= 1 and stop <= 2**32");
}

// The largest error of kernel(x, y, n) (float32) against reference(x, y, n) (float64) over the inputs.
template <class Kernel, class Reference>
UlpScan scan_inputs(uint64_t start, uint64_t stop, uint64_t step, Kernel kernel, Reference reference) {
  constexpr int64_t kChunk = 4096;
  float x[kChunk], y[kChunk];
  double wide[kChunk], exact[kChunk];
  UlpScan scan;
  for (uint64_t bits = start; bits < stop;) {
    int64_t n = 0;
    for (; n < kChunk && bits < stop; ++n, bits += step) {
      const uint32_t b = static_cast<uint32_t>(bits);
      std::memcpy(&x[n], &b, sizeof b);
    }
    kernel(x, y, n);
    std::copy(x, x + n, wide);
    reference(wide, exact, n);
    for (int64_t i = 0; i < n; ++i) {
      const double error = ulp_error(y[i], exact[i]);
      if (error > scan.max_ulp) {
        scan.max_ulp = error;
        std::memcpy(&scan.worst_bits, &x[i], sizeof x[i]);
      }
    }
    scan.checked += static_cast<uint64_t>(n);
  }
  return scan;
}

}  // namespace

UlpScan ulp_scan(VecUnary op, Isa isa, uint64_t start, uint64_t stop, uint64_t step) {
  if (op != VecUnary::Exp && op != VecUnary::Log && op != VecUnary::Tanh && op != VecUnary::Sigmoid &&
      op != VecUnary::Sin && op != VecUnary::Cos)
    throw ValueError("ulp_scan: expected exp, log, tanh, sigmoid, sin or cos");
  check_arguments(isa, stop, step);
  const UnaryKernel<float> kernel = kernel_table(isa).f32.unary[static_cast<int>(op)];
  const UnaryKernel<double> reference = kernels().f64.unary[static_cast<int>(op)];
  return scan_inputs(start, stop, step, kernel, reference);
}

// gelu's value, or its gradient (the incoming gradient 1: the kernel's result is gelu'(x) rounded).
UlpScan gelu_ulp_scan(Activation op, bool gradient, Isa isa, uint64_t start, uint64_t stop, uint64_t step) {
  if (op != Activation::Gelu && op != Activation::GeluTanh) throw ValueError("gelu_ulp_scan: expected a GELU");
  check_arguments(isa, stop, step);
  const int slot = static_cast<int>(op);
  const float one_f = 1;
  const double one_d = 1;
  if (gradient) {
    const ActivationGradKernel<float> kernel = kernel_table(isa).f32.activation_grad[slot];
    const ActivationGradKernel<double> reference = kernels().f64.activation_grad[slot];
    return scan_inputs(
        start, stop, step, [&](const float* x, float* y, int64_t n) { kernel(&one_f, true, x, y, n, nullptr); },
        [&](const double* x, double* y, int64_t n) { reference(&one_d, true, x, y, n, nullptr); });
  }
  const ActivationKernel<float> kernel = kernel_table(isa).f32.activation[slot];
  const ActivationKernel<double> reference = kernels().f64.activation[slot];
  return scan_inputs(
      start, stop, step, [&](const float* x, float* y, int64_t n) { kernel(x, y, n, nullptr); },
      [&](const double* x, double* y, int64_t n) { reference(x, y, n, nullptr); });
}

}  // namespace fg
