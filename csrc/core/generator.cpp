#include "core/generator.h"

#include <cstring>

#include "core/error.h"

namespace fg {

namespace {
// Byte offsets of the fields of ATen's CPUGeneratorImplState (its legacy THGeneratorState first):
// uint64 the_initial_seed; int left; int seeded; uint64 next; uint64 state[624]; double normal_x,
// normal_y, normal_rho; int normal_is_valid; (4 bytes padding) float next_float_normal_sample;
// bool is_next_float_normal_sample_valid; (3 bytes padding). normal_y holds the kept double sample.
constexpr size_t kSeedAt = 0, kLeftAt = 8, kSeededAt = 12, kNextAt = 16, kWordsAt = 24;
constexpr size_t kNormalYAt = kWordsAt + 8 * CPUGenerator::kWords + 8, kNormalValidAt = kNormalYAt + 16;
constexpr size_t kFloatNormalAt = kNormalValidAt + 8, kFloatValidAt = kFloatNormalAt + 4;
static_assert(kFloatValidAt + 4 == CPUGenerator::kStateBytes, "ATen's CPUGeneratorImplState layout");

template <typename T>
void put(std::array<uint8_t, CPUGenerator::kStateBytes>& bytes, size_t at, T value) {
  std::memcpy(bytes.data() + at, &value, sizeof(T));
}
template <typename T>
T get(const uint8_t* bytes, size_t at) {
  T value;
  std::memcpy(&value, bytes + at, sizeof(T));
  return value;
}
}  // namespace

void CPUGenerator::manual_seed(uint64_t seed) {
  seed_ = seed;
  state_[0] = static_cast<uint32_t>(seed);
  for (int j = 1; j < kWords; ++j) state_[j] = 1812433253u * (state_[j - 1] ^ (state_[j - 1] >> 30)) + uint32_t(j);
  left_ = 1;
  next_ = 0;
  next_double_normal.reset();
  next_float_normal.reset();
}

void CPUGenerator::twist() {
  constexpr int kShift = 397;
  constexpr uint32_t kMatrix = 0x9908b0dfu;
  auto mix = [](uint32_t upper, uint32_t lower) {
    uint32_t y = (upper & 0x80000000u) | (lower & 0x7fffffffu);
    return (y >> 1) ^ ((y & 1u) ? kMatrix : 0u);
  };
  int i = 0;
  for (; i < kWords - kShift; ++i) state_[i] = state_[i + kShift] ^ mix(state_[i], state_[i + 1]);
  for (; i < kWords - 1; ++i) state_[i] = state_[i + kShift - kWords] ^ mix(state_[i], state_[i + 1]);
  state_[kWords - 1] = state_[kShift - 1] ^ mix(state_[kWords - 1], state_[0]);
  left_ = kWords;
  next_ = 0;
}

std::array<uint8_t, CPUGenerator::kStateBytes> CPUGenerator::get_state() const {
  std::array<uint8_t, kStateBytes> bytes{};
  put<uint64_t>(bytes, kSeedAt, seed_);
  put<int32_t>(bytes, kLeftAt, left_);
  put<int32_t>(bytes, kSeededAt, 1);
  put<uint64_t>(bytes, kNextAt, next_);
  for (int j = 0; j < kWords; ++j) put<uint64_t>(bytes, kWordsAt + 8 * size_t(j), state_[j]);
  if (next_double_normal) {
    put<double>(bytes, kNormalYAt, *next_double_normal);
    put<int32_t>(bytes, kNormalValidAt, 1);
  }
  if (next_float_normal) {
    put<float>(bytes, kFloatNormalAt, *next_float_normal);
    put<uint8_t>(bytes, kFloatValidAt, 1);
  }
  return bytes;
}

void CPUGenerator::set_state(const uint8_t* bytes, size_t size) {
  if (size != kStateBytes)
    throw RuntimeError(cat("Expected a CPUGeneratorImplState of size ", kStateBytes,
                           " but found the input RNG state size to be ", size));
  auto left = get<int32_t>(bytes, kLeftAt);
  auto next = static_cast<uint32_t>(get<uint64_t>(bytes, kNextAt));
  if (get<int32_t>(bytes, kSeededAt) == 0 || left <= 0 || left > kWords || next > uint32_t(kWords))
    throw RuntimeError("Invalid mt19937 state");
  seed_ = get<uint64_t>(bytes, kSeedAt);
  left_ = left;
  next_ = next;
  for (int j = 0; j < kWords; ++j) state_[j] = static_cast<uint32_t>(get<uint64_t>(bytes, kWordsAt + 8 * size_t(j)));
  next_double_normal.reset();
  next_float_normal.reset();
  if (get<int32_t>(bytes, kNormalValidAt)) next_double_normal = get<double>(bytes, kNormalYAt);
  if (get<uint8_t>(bytes, kFloatValidAt)) next_float_normal = get<float>(bytes, kFloatNormalAt);
}

}  // namespace fg
