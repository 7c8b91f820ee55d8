// CPUGenerator: PyTorch's CPU random generator (ATen's CPUGeneratorImpl) number for number: a 32-bit
// Mersenne Twister seeded as ATen seeds it (only the low 32 bits of the seed enter the state; the
// whole 64-bit seed is kept for initial_seed()), random64() made of two draws (the first one the
// high half), and the normal sample that ATen's scalar Box-Muller keeps for its next call.
// get_state()/set_state() read and write ATen's state bytes (CPUGeneratorImplState, 5056 bytes),
// so a state saved by torch.get_rng_state() loads here and the other way round.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace fg {

class CPUGenerator {
 public:
  static constexpr int kWords = 624;           // mt19937's state: 624 32-bit words
  static constexpr size_t kStateBytes = 5056;  // sizeof(at::detail::CPUGeneratorImplState) on 64-bit platforms
  static constexpr uint64_t kDefaultSeed = 67280421310721;  // at::default_rng_seed_val

  explicit CPUGenerator(uint64_t seed = kDefaultSeed) { manual_seed(seed); }

  // Restarts the stream (and forgets a kept normal sample), as at::CPUGeneratorImpl::set_current_seed.
  void manual_seed(uint64_t seed);
  uint64_t initial_seed() const { return seed_; }

  uint32_t random() {
    if (--left_ == 0) twist();
    uint32_t y = state_[next_++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
  }
  uint64_t random64() {
    uint64_t high = random();
    return (high << 32) | random();
  }

  // The second value of the last scalar Box-Muller pair, used by the next normal draw of that type.
  std::optional<double> next_double_normal;
  std::optional<float> next_float_normal;

  std::array<uint8_t, kStateBytes> get_state() const;
  // Throws RuntimeError for a state of another size or an invalid twister position, with ATen's words.
  void set_state(const uint8_t* bytes, size_t size);

 private:
  void twist();

  uint64_t seed_ = 0;
  int32_t left_ = 1;  // draws until the next twist, plus one
  uint32_t next_ = 0;  // the next word of state_ to temper
  std::array<uint32_t, kWords> state_{};
};

}  // namespace fg
