// The draws of PyTorch's CPU distribution kernels (ATen's native/cpu/DistributionTemplates.h and
// core/DistributionsHelper.h), value for value: each fills `n` values in order from a CPUGenerator,
// consuming its words exactly as ATen does, so a stream continues identically after any mix of calls.
// Output arrays are contiguous; T is the element type of the tensor being filled.
#pragma once
#include <cstdint>

#include "core/generator.h"
#include "core/tensor.h"

namespace fg::random {

// uniform_(from, to): float draws 24 bits of one word, double 53 bits of random64(); a value that
// rounds to `to` becomes `from` (ATen keeps the range half-open).
template <typename T>
void uniform(CPUGenerator& gen, T* out, int64_t n, double from, double to);

// normal_(mean, std) of a tensor whose `n` values lie contiguously (`contiguous`): from 16 values on,
// ATen fills all the uniforms first and turns them into normals 16 at a time (float: the AVX2
// polynomial log/sincos of its avx_mathfun.h, which its x86 wheel runs); otherwise one scalar
// Box-Muller draw per value, with the generator keeping the second value of each pair.
template <typename T>
void normal(CPUGenerator& gen, T* out, int64_t n, double mean, double std, bool contiguous);

// random_(from, to): (word % range) + from, one word or (range >= 2**32, 64-bit types) random64().
template <typename T>
void random_from_to(CPUGenerator& gen, T* out, int64_t n, uint64_t range, int64_t from);
// random_(-2**63, None): the whole random64() as an int64.
template <typename T>
void random_full_range(CPUGenerator& gen, T* out, int64_t n);
// random_(): [0, 2**mantissa] for floating types, [0, max] for integers, the low bit for bool.
template <typename T>
void random_default(CPUGenerator& gen, T* out, int64_t n);

// randperm(n): a Fisher-Yates shuffle of 0..n-1 (ATen's randperm_cpu).
void randperm(CPUGenerator& gen, int64_t* out, int64_t n);

// bernoulli_(p): a double uniform < p per value.
template <typename T>
void bernoulli_scalar(CPUGenerator& gen, T* out, int64_t n, double p);
// bernoulli(p tensor): a uniform of p's type (float or double) < p, per value.
template <typename T, typename P>
void bernoulli_tensor(CPUGenerator& gen, T* out, const P* p, int64_t n);

// multinomial(probabilities, samples, replacement=True), samples > 1 (ATen's
// multinomial_with_replacement): for each of `rows` rows of `categories` probabilities, the
// cumulative sums in T divided by their total, the last set to 1; each sample is the first category
// whose cumulative sum is >= a double uniform (a binary search). Rows are checked by the caller.
template <typename T>
void multinomial_with_replacement(CPUGenerator& gen, int64_t* out, const T* probabilities, int64_t rows,
                                  int64_t categories, int64_t samples);

// multinomial without replacement keeps the `count` largest keys of each row (ATen's topk, largest
// and sorted): the row's (key, position) pairs partially sorted by std::partial_sort when
// count * 64 <= n, else by std::nth_element and a std::sort of the first count - 1, NaN first. The
// positions of equal keys come out in the order these libstdc++ algorithms leave them, PyTorch's.
template <typename T>
void top_keys(int64_t* out, const T* keys, int64_t rows, int64_t n, int64_t count);

// exponential_(lambd): -1/lambd * log1p(-u) in double.
template <typename T>
void exponential(CPUGenerator& gen, T* out, int64_t n, double lambd);

// multinomial(probabilities, 1) of a non-empty float32 or float64 row or matrix of rows, in one pass
// where the Python path took ten crossings into the core (a sampling loop calls it per token): PyTorch's
// checks (every value finite and >= 0, then every row's largest > 0; its messages), then per row the
// position of the largest key p / Exponential(1) in T, the first of equal keys and NaN first (argmax),
// the noise drawn value by value in row-major order as exponential_(1) fills the whole shape: the
// draws, keys and positions of that path. Returns int64 positions of shape [..., 1].
Tensor multinomial_one(CPUGenerator& gen, const Tensor& probabilities);

// geometric_(p): ceil(log(u) / log(1 - p)) of a double uniform.
template <typename T>
void geometric(CPUGenerator& gen, T* out, int64_t n, double p);
// log_normal_(mean, std): exp of a scalar Box-Muller normal (the generator's kept value first).
template <typename T>
void log_normal(CPUGenerator& gen, T* out, int64_t n, double mean, double std);
// cauchy_(median, sigma): median + sigma * tan(pi * (u - 0.5)).
template <typename T>
void cauchy(CPUGenerator& gen, T* out, int64_t n, double median, double sigma);
// poisson(rates): ATen's sample_poisson for each rate (a product of double uniforms below 10,
// Hoermann's transformed rejection from 10 on).
template <typename T>
void poisson(CPUGenerator& gen, T* out, const T* rates, int64_t n);

}  // namespace fg::random
