#include "kernels/isa.h"

#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "kernels/kernel_table.h"
#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#endif

namespace fg {

namespace {

#if defined(__x86_64__) || defined(_M_X64)
// The CPU must have the instructions and the OS must save the wider registers on a context switch
// (XCR0 bits: 1-2 SSE/AVX state, 5-7 AVX-512 opmask and upper registers).
uint64_t os_saved_state() {
  uint32_t eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & (1u << 27))) return 0;  // no OSXSAVE: no xgetbv
  uint32_t lo, hi;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t{hi} << 32) | lo;
}

bool cpu_has_avx2() {
  uint32_t eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const bool fma_avx = (ecx & (1u << 12)) && (ecx & (1u << 28));
  if (!fma_avx || !__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  return (ebx & (1u << 5)) && (os_saved_state() & 0x6) == 0x6;
}

bool cpu_has_avx512() {
  uint32_t eax, ebx, ecx, edx;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const uint32_t f_dq_bw_vl = (1u << 16) | (1u << 17) | (1u << 30) | (1u << 31);
  return (ebx & f_dq_bw_vl) == f_dq_bw_vl && (os_saved_state() & 0xe6) == 0xe6;
}
#endif

Isa choose_isa() {
  std::vector<Isa> available = available_isas();
  const char* forced = std::getenv("FASTGRAD_ISA");
  if (!forced || !*forced) return available.back();
  std::string names;
  for (Isa isa : available) {
    if (std::string(forced) == isa_name(isa)) return isa;
    names += names.empty() ? isa_name(isa) : cat(", ", isa_name(isa));
  }
  throw RuntimeError(cat("FASTGRAD_ISA=", forced, " is not available on this machine (available: ", names, ")"));
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
    case Isa::Neon: return "neon";
  }
  return "?";
}

std::vector<Isa> available_isas() {
  std::vector<Isa> isas{Isa::Scalar};
#if defined(__x86_64__) || defined(_M_X64)
  if (cpu_has_avx2()) isas.push_back(Isa::Avx2);
  if (cpu_has_avx2() && cpu_has_avx512()) isas.push_back(Isa::Avx512);
#elif defined(__aarch64__)
  isas.push_back(Isa::Neon);  // part of every arm64 CPU
#endif
  return isas;
}

Isa active_isa() {
  static const Isa isa = choose_isa();
  return isa;
}

const KernelTable& kernel_table(Isa isa) {
  switch (isa) {
#if defined(__x86_64__) || defined(_M_X64)
    case Isa::Avx2: return simd::avx2::kernel_table();
    case Isa::Avx512: return simd::avx512::kernel_table();
#elif defined(__aarch64__)
    case Isa::Neon: return simd::neon::kernel_table();
#endif
    default: return simd::scalar::kernel_table();
  }
}

const KernelTable& kernels() {
  static const KernelTable& table = kernel_table(active_isa());
  return table;
}

}  // namespace fg
