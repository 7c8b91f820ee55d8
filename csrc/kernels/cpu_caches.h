// The data cache sizes of the CPU the process runs on, read once (the GEMM derives its cache blocks
// from them, gemm_impl.h): cpuid's deterministic cache parameters (leaf 4 on Intel, 0x8000001D on
// AMD and Hygon), else the C library's sysconf, else fallbacks typical of a current x86 core.
// FASTGRAD_CACHE_SIZES=L1D,L2,L3 (bytes) overrides them, so tests can run other machines' blocks; a
// malformed value throws RuntimeError (the import fails with the reason, as for FASTGRAD_ISA).
#pragma once
#include <cstdint>

namespace fg {

struct CacheSizes {
  int64_t l1d, l2, l3;  // bytes; l3 = 0 when the CPU has none (the whole L3, however many cores share it)
  const char* source;   // "cpuid leaf 4", "cpuid leaf 0x8000001D", "sysconf", "fallback" or "FASTGRAD_CACHE_SIZES"
};

const CacheSizes& cache_sizes();

// Whether the CPU is an Intel one (cpuid's vendor string "GenuineIntel"; false off x86): the GEMM
// prefetches its packed B panel there only (gemm_impl.h: derive_blocks).
bool cpu_is_intel();

}  // namespace fg
