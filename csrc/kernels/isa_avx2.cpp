// The kernels for the avx2 ISA: compiled with -mavx2 -mfma only (CMakeLists.txt).
#define FG_ISA_NAMESPACE avx2
#define FG_ISA_AVX2
#include "kernels/isa_table_impl.h"
