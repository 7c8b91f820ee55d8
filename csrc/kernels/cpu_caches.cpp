#include "kernels/cpu_caches.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#endif

namespace fg {

namespace {

#if defined(__x86_64__) || defined(_M_X64)
// Walks the subleaves of a deterministic-cache-parameters leaf (same layout on Intel's leaf 4 and
// AMD's 0x8000001D): type in eax[4:0] (0 ends the list, 2 is instructions only), level in eax[7:5],
// size = ways * partitions * line size * sets.
bool read_cpuid_caches(uint32_t leaf, CacheSizes& out) {
  uint32_t eax, ebx, ecx, edx;
  if (!__get_cpuid(leaf & 0x80000000u, &eax, &ebx, &ecx, &edx) || eax < leaf) return false;
  bool found = false;
  for (uint32_t sub = 0; sub < 16; ++sub) {
    __cpuid_count(leaf, sub, eax, ebx, ecx, edx);
    const uint32_t type = eax & 0x1f, level = (eax >> 5) & 0x7;
    if (type == 0) break;
    if (type == 2) continue;
    const int64_t size =
        int64_t((ebx >> 22) + 1) * (((ebx >> 12) & 0x3ff) + 1) * ((ebx & 0xfff) + 1) * (int64_t(ecx) + 1);
    if (level == 1) out.l1d = size;
    if (level == 2) out.l2 = size;
    if (level == 3) out.l3 = size;
    found = true;
  }
  return found && out.l1d > 0 && out.l2 > 0;
}

// cpuid leaf 0's vendor string ("GenuineIntel", "AuthenticAMD", ...); empty if cpuid fails.
struct Vendor {
  char name[13] = {};
};
Vendor cpuid_vendor() {
  Vendor v;
  uint32_t eax, ebx, ecx, edx;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return v;
  std::memcpy(v.name, &ebx, 4);
  std::memcpy(v.name + 4, &edx, 4);
  std::memcpy(v.name + 8, &ecx, 4);
  return v;
}

const char* cpuid_caches(CacheSizes& out) {
  uint32_t eax, ebx, ecx, edx;
  const Vendor v = cpuid_vendor();
  const char* vendor = v.name;
  if (!*vendor) return nullptr;
  if (!std::strcmp(vendor, "AuthenticAMD") || !std::strcmp(vendor, "HygonGenuine")) {
    // Leaf 0x8000001D needs the topology extensions (0x80000001 ecx bit 22).
    if (__get_cpuid(0x80000001, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 22)) && read_cpuid_caches(0x8000001D, out))
      return "cpuid leaf 0x8000001D";
    return nullptr;
  }
  return read_cpuid_caches(4, out) ? "cpuid leaf 4" : nullptr;
}
#endif

// FASTGRAD_CACHE_SIZES=L1D,L2,L3 (bytes; L3 may be 0): another machine's blocking on this one.
bool forced_caches(CacheSizes& out) {
  const char* forced = std::getenv("FASTGRAD_CACHE_SIZES");
  if (!forced || !*forced) return false;
  long long l1d = 0, l2 = 0, l3 = -1;
  char tail = 0;
  if (std::sscanf(forced, "%lld,%lld,%lld%c", &l1d, &l2, &l3, &tail) != 3 || l1d <= 0 || l2 <= 0 || l3 < 0)
    throw RuntimeError(cat("FASTGRAD_CACHE_SIZES=", forced, " is not three byte counts L1D,L2,L3 (L1D and L2 > 0)"));
  out = {l1d, l2, l3, "FASTGRAD_CACHE_SIZES"};
  return true;
}

CacheSizes detect() {
  CacheSizes sizes{0, 0, 0, nullptr};
  if (forced_caches(sizes)) return sizes;
#if defined(__x86_64__) || defined(_M_X64)
  if (const char* source = cpuid_caches(sizes)) {
    sizes.source = source;
    return sizes;
  }
  sizes = {0, 0, 0, nullptr};
#endif
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE) && defined(_SC_LEVEL3_CACHE_SIZE)
  const long l1d = sysconf(_SC_LEVEL1_DCACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE),
             l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (l1d > 0 && l2 > 0) return {l1d, l2, l3 > 0 ? l3 : 0, "sysconf"};
#endif
  return {32 * 1024, 512 * 1024, 8 * 1024 * 1024, "fallback"};
}

}  // namespace

const CacheSizes& cache_sizes() {
  static const CacheSizes sizes = detect();
  return sizes;
}

bool cpu_is_intel() {
#if defined(__x86_64__) || defined(_M_X64)
  static const bool intel = !std::strcmp(cpuid_vendor().name, "GenuineIntel");
  return intel;
#else
  return false;
#endif
}

}  // namespace fg
