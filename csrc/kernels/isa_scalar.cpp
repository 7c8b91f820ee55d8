// The kernels for the scalar ISA: the baseline: plain C++, compiled with the global flags (x86-64 / armv8-a).
#define FG_ISA_NAMESPACE scalar
#define FG_ISA_SCALAR
#include "kernels/isa_table_impl.h"
