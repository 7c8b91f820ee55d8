// The kernels for the avx512 ISA: compiled with -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma only (CMakeLists.txt).
#define FG_ISA_NAMESPACE avx512
#define FG_ISA_AVX512
#include "kernels/isa_table_impl.h"
