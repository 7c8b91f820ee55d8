// PyTorch's CPU distribution kernels, draw for draw (see random.h). Where ATen's x86 build fuses a
// multiply and an add (GCC contracts `x * (to - from) + from` and avx_mathfun's polynomial steps into
// FMA instructions in its AVX2/AVX512 kernels), the code here says std::fma; everything else rounds
// each step (this file is compiled with -ffp-contract=off), so the values match on every machine.
#include "ops/random.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/error.h"
#include "kernels/isa.h"
#include "ops/ops.h"

namespace fg::random {

namespace {

constexpr double kPi = 3.14159265358979323846;

// Cephes' logf polynomial (avx_mathfun.h) after its leading coefficient 7.0376836292E-2.
constexpr float kLogPolynomial[] = {-1.1514610310E-1f, 1.1676998740E-1f, -1.2420140846E-1f, 1.4249322787E-1f,
                                    -1.6668057665E-1f, 2.0000714765E-1f, -2.4999993993E-1f, 3.3333331174E-1f};

// at::uniform_real_distribution<T>(from, to): the mantissa's worth of bits of one draw, scaled.
inline float uniform_value(CPUGenerator& gen, float from, float to) {
  float x = float(gen.random() & ((1u << 24) - 1)) * (1.0f / float(1u << 24));
  return std::fma(x, to - from, from);
}
inline double uniform_value(CPUGenerator& gen, double from, double to) {
  double x = double(gen.random64() & ((uint64_t(1) << 53) - 1)) * (1.0 / double(uint64_t(1) << 53));
  return std::fma(x, to - from, from);
}

// at::normal_distribution<double>: the kept second value of the last pair, or a new pair.
double scalar_normal(CPUGenerator& gen, double mean, double std) {
  double value;
  if (gen.next_double_normal) {
    value = *gen.next_double_normal;
    gen.next_double_normal.reset();
  } else {
    double u1 = uniform_value(gen, 0.0, 1.0), u2 = uniform_value(gen, 0.0, 1.0);
    double radius = std::sqrt(-2.0 * std::log1p(-u2)), theta = 2.0 * kPi * u1;
    gen.next_double_normal = radius * std::sin(theta);
    value = radius * std::cos(theta);
  }
  return std::fma(value, std, mean);
}

// avx_mathfun.h's log256_ps (Cephes' logf) for one lane, x in (0, 1].
inline float cephes_log(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  float exponent = float(int32_t(bits >> 23) - 0x7f) + 1.0f;
  bits = (bits & ~0x7f800000u) | 0x3f000000u;  // the mantissa as a value in [0.5, 1)
  float m;
  std::memcpy(&m, &bits, 4);
  if (m < 0.707106781186547524f) {
    exponent -= 1.0f;
    m = (m - 1.0f) + m;
  } else {
    m = m - 1.0f;
  }
  const float z = m * m;
  float y = 7.0376836292E-2f;
  for (float c : kLogPolynomial) y = std::fma(y, m, c);
  y = std::fma(y * m, z, exponent * -2.12194440e-4f);  // GCC fused this product of the two, not the other
  y = std::fma(-z, 0.5f, y);
  return std::fma(exponent, 0.693359375f, m + y);
}

// avx_mathfun.h's sincos256_ps (Cephes' sinf/cosf) for one lane, x >= 0 (theta = 2 pi u).
inline std::pair<float, float> cephes_sincos(float x) {
  int32_t octant = (int32_t(x * 1.27323954473516f) + 1) & ~1;  // 4/pi: the octant, rounded up to even
  const float y = float(octant);
  bool negate_sin = (octant & 4) != 0, negate_cos = ((~(octant - 2)) & 4) != 0, sin_poly = (octant & 2) == 0;
  x = std::fma(y, -0.78515625f, x);  // x - y * pi/4 in three parts (Cody-Waite)
  x = std::fma(y, -2.4187564849853515625e-4f, x);
  x = std::fma(y, -3.77489497744594108e-8f, x);
  const float z = x * x;
  float cos_poly = std::fma(std::fma(2.443315711809948E-005f, z, -1.388731625493765E-003f), z, 4.166664568298827E-002f);
  cos_poly = std::fma(cos_poly * z, z, -(z * 0.5f)) + 1.0f;
  float sin_poly_value = std::fma(std::fma(-1.9515295891E-4f, z, 8.3321608736E-3f), z, -1.6666654611E-1f);
  sin_poly_value = std::fma(sin_poly_value * z, x, x);
  float s = sin_poly ? sin_poly_value : cos_poly, c = sin_poly ? cos_poly : sin_poly_value;
  return {negate_sin ? -s : s, negate_cos ? -c : c};
}

// ATen's normal_fill_16 (double: libm) and normal_fill_16_AVX2 (float): the first 8 uniforms give
// the radii, the next 8 the angles; cosines replace the first 8, sines the next 8.
void normal_fill_16(double* data, double mean, double std) {
  for (int j = 0; j < 8; ++j) {
    double radius = std::sqrt(-2 * std::log(1 - data[j])), theta = 2.0f * kPi * data[j + 8];
    data[j] = std::fma(radius * std::cos(theta), std, mean);
    data[j + 8] = std::fma(radius * std::sin(theta), std, mean);
  }
}
#if defined(__x86_64__) && defined(__GNUC__)
// The same steps eight lanes at a time (as ATen's normal_fill_16_AVX2 runs them), for CPUs with AVX2
// and FMA: the same values, about five times faster than a call to libm's fmaf per step.
__attribute__((target("avx2,fma"))) void normal_fill_16_avx2(float* data, float mean, float std) {
  const __m256 one = _mm256_set1_ps(1.0f);
  // radius = sqrt(-2 log(1 - u)), the logarithm as cephes_log
  const __m256i bits = _mm256_castps_si256(_mm256_sub_ps(one, _mm256_loadu_ps(data)));
  __m256 exponent =
      _mm256_add_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(0x7f))), one);
  __m256 m = _mm256_castsi256_ps(
      _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(~0x7f800000)), _mm256_set1_epi32(0x3f000000)));
  const __m256 small = _mm256_cmp_ps(m, _mm256_set1_ps(0.707106781186547524f), _CMP_LT_OS);
  exponent = _mm256_sub_ps(exponent, _mm256_and_ps(one, small));
  m = _mm256_add_ps(_mm256_sub_ps(m, one), _mm256_and_ps(m, small));
  __m256 z = _mm256_mul_ps(m, m);
  __m256 y = _mm256_set1_ps(7.0376836292E-2f);
  for (float c : kLogPolynomial) y = _mm256_fmadd_ps(y, m, _mm256_set1_ps(c));
  y = _mm256_fmadd_ps(_mm256_mul_ps(y, m), z, _mm256_mul_ps(exponent, _mm256_set1_ps(-2.12194440e-4f)));
  y = _mm256_fnmadd_ps(z, _mm256_set1_ps(0.5f), y);
  const __m256 logarithm = _mm256_fmadd_ps(exponent, _mm256_set1_ps(0.693359375f), _mm256_add_ps(m, y));
  const __m256 radius = _mm256_sqrt_ps(_mm256_mul_ps(_mm256_set1_ps(-2.0f), logarithm));
  // sin and cos of theta = 2 pi u, as cephes_sincos
  __m256 x = _mm256_mul_ps(_mm256_set1_ps(float(2.0f * kPi)), _mm256_loadu_ps(data + 8));
  const __m256i octant = _mm256_and_si256(
      _mm256_add_epi32(_mm256_cvttps_epi32(_mm256_mul_ps(x, _mm256_set1_ps(1.27323954473516f))), _mm256_set1_epi32(1)),
      _mm256_set1_epi32(~1));
  const __m256 q = _mm256_cvtepi32_ps(octant);
  const __m256 sin_sign = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(octant, _mm256_set1_epi32(4)), 29));
  const __m256 cos_sign = _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_andnot_si256(_mm256_sub_epi32(octant, _mm256_set1_epi32(2)), _mm256_set1_epi32(4)), 29));
  const __m256 sin_poly =
      _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(octant, _mm256_set1_epi32(2)), _mm256_setzero_si256()));
  x = _mm256_fmadd_ps(q, _mm256_set1_ps(-0.78515625f), x);
  x = _mm256_fmadd_ps(q, _mm256_set1_ps(-2.4187564849853515625e-4f), x);
  x = _mm256_fmadd_ps(q, _mm256_set1_ps(-3.77489497744594108e-8f), x);
  z = _mm256_mul_ps(x, x);
  __m256 cos_value = _mm256_fmadd_ps(
      _mm256_fmadd_ps(_mm256_set1_ps(2.443315711809948E-005f), z, _mm256_set1_ps(-1.388731625493765E-003f)), z,
      _mm256_set1_ps(4.166664568298827E-002f));
  cos_value =
      _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(cos_value, z), z, _mm256_mul_ps(z, _mm256_set1_ps(-0.5f))), one);
  __m256 sin_value =
      _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(-1.9515295891E-4f), z, _mm256_set1_ps(8.3321608736E-3f)), z,
                      _mm256_set1_ps(-1.6666654611E-1f));
  sin_value = _mm256_fmadd_ps(_mm256_mul_ps(sin_value, z), x, x);
  const __m256 s = _mm256_xor_ps(_mm256_blendv_ps(cos_value, sin_value, sin_poly), sin_sign);
  const __m256 c = _mm256_xor_ps(_mm256_blendv_ps(sin_value, cos_value, sin_poly), cos_sign);
  const __m256 mean_v = _mm256_set1_ps(mean), std_v = _mm256_set1_ps(std);
  _mm256_storeu_ps(data, _mm256_fmadd_ps(_mm256_mul_ps(radius, c), std_v, mean_v));
  _mm256_storeu_ps(data + 8, _mm256_fmadd_ps(_mm256_mul_ps(radius, s), std_v, mean_v));
}
#endif

void normal_fill_16(float* data, float mean, float std) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx2 = active_isa() != Isa::Scalar;  // AVX2 and FMA, unless FASTGRAD_ISA=scalar
  if (avx2) return normal_fill_16_avx2(data, mean, std);
#endif
  const float two_pi = float(2.0f * kPi);
  for (int j = 0; j < 8; ++j) {
    float radius = std::sqrt(-2.0f * cephes_log(1.0f - data[j]));
    auto [s, c] = cephes_sincos(two_pi * data[j + 8]);
    data[j] = std::fma(radius * c, std, mean);
    data[j + 8] = std::fma(radius * s, std, mean);
  }
}

}  // namespace

template <typename T>
void uniform(CPUGenerator& gen, T* out, int64_t n, double from, double to) {
  for (int64_t i = 0; i < n; ++i) {
    const T value = uniform_value(gen, T(from), T(to));
    out[i] = value == T(to) ? T(from) : value;
  }
}

template <typename T>
void normal(CPUGenerator& gen, T* out, int64_t n, double mean, double std, bool contiguous) {
  if (n < 16 || !contiguous) {
    for (int64_t i = 0; i < n; ++i) out[i] = T(scalar_normal(gen, mean, std));
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = uniform_value(gen, T(0), T(1));
  for (int64_t i = 0; i + 16 <= n; i += 16) normal_fill_16(out + i, T(mean), T(std));
  if (n % 16 != 0) {  // ATen redraws the last 16 values (overlapping the last full block) and refills them
    T* tail = out + n - 16;
    for (int i = 0; i < 16; ++i) tail[i] = uniform_value(gen, T(0), T(1));
    normal_fill_16(tail, T(mean), T(std));
  }
}

template <typename T>
void random_from_to(CPUGenerator& gen, T* out, int64_t n, uint64_t range, int64_t from) {
  constexpr bool wide = std::is_same_v<T, int64_t> || std::is_floating_point_v<T>;
  const bool use64 = wide && range >= (uint64_t(1) << 32);
  for (int64_t i = 0; i < n; ++i) {
    uint64_t word = use64 ? gen.random64() : gen.random();
    out[i] = static_cast<T>(static_cast<int64_t>(word % range + uint64_t(from)));
  }
}

template <typename T>
void random_full_range(CPUGenerator& gen, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(static_cast<int64_t>(gen.random64()));
}

template <typename T>
void random_default(CPUGenerator& gen, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, bool>) {
      out[i] = (gen.random() & 1u) != 0;
    } else if constexpr (std::is_floating_point_v<T>) {
      constexpr uint64_t top = (uint64_t(1) << std::numeric_limits<T>::digits) + 1;
      uint64_t word = std::is_same_v<T, double> ? gen.random64() : gen.random();
      out[i] = static_cast<T>(word % top);
    } else {
      constexpr uint64_t top = uint64_t(std::numeric_limits<T>::max()) + 1;
      uint64_t word = std::is_same_v<T, int64_t> ? gen.random64() : gen.random();
      out[i] = static_cast<T>(word % top);
    }
  }
}

void randperm(CPUGenerator& gen, int64_t* out, int64_t n) {
  if (n < int64_t(UINT32_MAX / 20)) {
    for (int64_t i = 0; i < n; ++i) out[i] = i;
    for (int64_t i = 0; i < n - 1; ++i) std::swap(out[i], out[i + int64_t(gen.random() % uint64_t(n - i))]);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {  // the inside-out shuffle ATen uses for huge n
    int64_t z = int64_t(gen.random64() % uint64_t(i + 1));
    out[i] = out[z];
    out[z] = i;
  }
}

template <typename T>
void bernoulli_scalar(CPUGenerator& gen, T* out, int64_t n, double p) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(uniform_value(gen, 0.0, 1.0) < p);
}

template <typename T, typename P>
void bernoulli_tensor(CPUGenerator& gen, T* out, const P* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(uniform_value(gen, P(0), P(1)) < p[i]);
}

template <typename T>
void multinomial_with_replacement(CPUGenerator& gen, int64_t* out, const T* probabilities, int64_t rows,
                                  int64_t categories, int64_t samples) {
  std::vector<T> cumulative(categories);
  for (int64_t r = 0; r < rows; ++r) {
    T sum = 0;
    for (int64_t j = 0; j < categories; ++j) cumulative[j] = sum += probabilities[r * categories + j];
    for (T& c : cumulative) c /= sum;
    cumulative[categories - 1] = 1;
    for (int64_t s = 0; s < samples; ++s) {
      const double u = uniform_value(gen, 0.0, 1.0);
      int64_t left = 0, right = categories;
      while (left < right) {
        const int64_t middle = left + (right - left) / 2;
        if (cumulative[middle] < u) left = middle + 1;
        else right = middle;
      }
      out[r * samples + s] = left;
    }
  }
}

template <typename T>
void top_keys(int64_t* out, const T* keys, int64_t rows, int64_t n, int64_t count) {
  using Entry = std::pair<T, int64_t>;
  auto before = [](const Entry& a, const Entry& b) {
    return (std::isnan(a.first) && !std::isnan(b.first)) || a.first > b.first;
  };
  std::vector<Entry> row(n);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) row[j] = {keys[r * n + j], j};
    if (count * 64 <= n) {
      std::partial_sort(row.begin(), row.begin() + count, row.end(), before);
    } else {
      std::nth_element(row.begin(), row.begin() + count - 1, row.end(), before);
      std::sort(row.begin(), row.begin() + count - 1, before);
    }
    for (int64_t j = 0; j < count; ++j) out[r * count + j] = row[j].second;
  }
}

namespace {
template <typename T>
T exponential_value(CPUGenerator& gen, double lambd) {
  return static_cast<T>(-1.0 / lambd * std::log1p(-uniform_value(gen, 0.0, 1.0)));
}

template <typename T>
void multinomial_one_rows(CPUGenerator& gen, int64_t* out, const T* probabilities, int64_t rows, int64_t n) {
  for (int64_t i = 0; i < rows * n; ++i)
    if (!(probabilities[i] >= 0 && probabilities[i] < std::numeric_limits<T>::infinity()))  // NaN fails both
      throw RuntimeError("probability tensor contains either `inf`, `nan` or element < 0");
  for (int64_t r = 0; r < rows; ++r)
    if (!(*std::max_element(probabilities + r * n, probabilities + (r + 1) * n) > 0))
      throw RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)");
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = probabilities + r * n;
    T best = row[0] / exponential_value<T>(gen, 1.0);
    out[r] = 0;
    for (int64_t j = 1; j < n; ++j) {
      const T key = row[j] / exponential_value<T>(gen, 1.0);  // drawn even once a NaN key has won
      if (!std::isnan(best) && (std::isnan(key) || key > best)) best = key, out[r] = j;
    }
  }
}
}  // namespace

template <typename T>
void exponential(CPUGenerator& gen, T* out, int64_t n, double lambd) {
  for (int64_t i = 0; i < n; ++i) out[i] = exponential_value<T>(gen, lambd);
}

Tensor multinomial_one(CPUGenerator& gen, const Tensor& probabilities) {
  const Tensor p = contiguous(probabilities);
  if (p->dim() < 1 || p->dim() > 2 || p->numel() == 0)
    throw ValueError("multinomial_one: a non-empty row or matrix of rows");
  const int64_t n = p->shape.back(), rows = p->numel() / n;
  Shape shape = p->shape;
  shape.back() = 1;
  Tensor out = empty(shape, DType::Int64);
  int64_t* positions = out->data_as<int64_t>();
  if (p->dtype == DType::Float32) multinomial_one_rows(gen, positions, p->data_as<float>(), rows, n);
  else if (p->dtype == DType::Float64) multinomial_one_rows(gen, positions, p->data_as<double>(), rows, n);
  else throw TypeError("multinomial_one: float32 or float64 probabilities");
  return out;
}

template <typename T>
void geometric(CPUGenerator& gen, T* out, int64_t n, double p) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<T>(std::ceil(std::log(uniform_value(gen, 0.0, 1.0)) / std::log(1.0 - p)));
}

template <typename T>
void log_normal(CPUGenerator& gen, T* out, int64_t n, double mean, double std) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(std::exp(scalar_normal(gen, mean, std)));
}

template <typename T>
void cauchy(CPUGenerator& gen, T* out, int64_t n, double median, double sigma) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<T>(median + sigma * std::tan(kPi * (uniform_value(gen, 0.0, 1.0) - 0.5)));
}

namespace {
int64_t poisson_count(CPUGenerator& gen, double rate) {
  if (rate >= 10) {
    const double sqrt_rate = std::sqrt(rate), log_rate = std::log(rate);
    const double b = 0.931 + 2.53 * sqrt_rate, a = -0.059 + 0.02483 * b;
    const double inverse_alpha = 1.1239 + 1.1328 / (b - 3.4), vr = 0.9277 - 3.6224 / (b - 2);
    while (true) {
      const double u = uniform_value(gen, 0.0, 1.0) - 0.5, v = uniform_value(gen, 0.0, 1.0);
      const double us = 0.5 - std::fabs(u);
      const auto k = static_cast<int64_t>(std::floor((2 * a / us + b) * u + rate + 0.43));
      if (us >= 0.07 && v <= vr) return k;
      if (k < 0 || (us < 0.013 && v > us)) continue;
      if (std::log(v) + std::log(inverse_alpha) - std::log(a / (us * us) + b) <=
          -rate + double(k) * log_rate - std::lgamma(double(k) + 1))
        return k;
    }
  }
  if (rate == 0) return 0;
  int64_t count = 0;
  const double limit = std::exp(-rate);
  for (double product = uniform_value(gen, 0.0, 1.0); product > limit; product *= uniform_value(gen, 0.0, 1.0)) ++count;
  return count;
}
}  // namespace

template <typename T>
void poisson(CPUGenerator& gen, T* out, const T* rates, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(poisson_count(gen, double(rates[i])));
}

#define FG_RANDOM_REAL(T)                                                                                      \
  template void uniform<T>(CPUGenerator&, T*, int64_t, double, double);                                        \
  template void normal<T>(CPUGenerator&, T*, int64_t, double, double, bool);                                   \
  template void exponential<T>(CPUGenerator&, T*, int64_t, double);                                            \
  template void log_normal<T>(CPUGenerator&, T*, int64_t, double, double);                                     \
  template void cauchy<T>(CPUGenerator&, T*, int64_t, double, double);                                         \
  template void poisson<T>(CPUGenerator&, T*, const T*, int64_t);                                              \
  template void multinomial_with_replacement<T>(CPUGenerator&, int64_t*, const T*, int64_t, int64_t, int64_t); \
  template void top_keys<T>(int64_t*, const T*, int64_t, int64_t, int64_t);
FG_RANDOM_REAL(float)
FG_RANDOM_REAL(double)
#undef FG_RANDOM_REAL

#define FG_RANDOM_ANY(T)                                                              \
  template void random_from_to<T>(CPUGenerator&, T*, int64_t, uint64_t, int64_t);     \
  template void random_full_range<T>(CPUGenerator&, T*, int64_t);                     \
  template void random_default<T>(CPUGenerator&, T*, int64_t);                        \
  template void bernoulli_scalar<T>(CPUGenerator&, T*, int64_t, double);              \
  template void geometric<T>(CPUGenerator&, T*, int64_t, double);                     \
  template void bernoulli_tensor<T, float>(CPUGenerator&, T*, const float*, int64_t); \
  template void bernoulli_tensor<T, double>(CPUGenerator&, T*, const double*, int64_t);
FG_RANDOM_ANY(float)
FG_RANDOM_ANY(double)
FG_RANDOM_ANY(int64_t)
FG_RANDOM_ANY(int32_t)
FG_RANDOM_ANY(int16_t)
FG_RANDOM_ANY(int8_t)
FG_RANDOM_ANY(uint8_t)
FG_RANDOM_ANY(bool)
#undef FG_RANDOM_ANY

}  // namespace fg::random
