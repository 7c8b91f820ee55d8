// Which SIMD instruction set the kernels use: the best one this CPU (and its OS) supports, or the
// one FASTGRAD_ISA=scalar|avx2|avx512|neon forces, so every path can be tested on one machine.
#pragma once
#include <vector>

namespace fg {

struct KernelTable;

enum class Isa { Scalar, Avx2, Avx512, Neon };

const char* isa_name(Isa isa);
// The ISAs this build has kernels for and this CPU can run, baseline first.
std::vector<Isa> available_isas();
// The ISA in use, chosen on first call. An unknown or unavailable FASTGRAD_ISA throws
// RuntimeError (so `import fastgrad` fails with the reason) instead of silently testing another path.
Isa active_isa();
// The kernels compiled for `isa`, which must be available (kernels() is the active ISA's).
const KernelTable& kernel_table(Isa isa);

}  // namespace fg
