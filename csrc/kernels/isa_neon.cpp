// The kernels for the neon ISA: arm64 only (NEON is part of the baseline there).
#define FG_ISA_NAMESPACE neon
#define FG_ISA_NEON
#include "kernels/isa_table_impl.h"
