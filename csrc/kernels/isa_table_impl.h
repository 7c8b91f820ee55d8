// The body of every isa_<isa>.cpp: the kernel families compiled for one ISA and its table.
// Each kernel family includes its *_impl.h here and fills its members in kernel_table() below.
#pragma once
#include "kernels/attention_impl.h"
#include "kernels/copy_impl.h"
#include "kernels/depthwise_impl.h"
#include "kernels/elementwise_impl.h"
#include "kernels/float_binary_impl.h"
#include "kernels/gemm_impl.h"
#include "kernels/norm_impl.h"
#include "kernels/optim_impl.h"
#include "kernels/pool_impl.h"
#include "kernels/recurrent_impl.h"
#include "kernels/reduce_impl.h"
#include "kernels/softmax_impl.h"

namespace fg::simd::FG_ISA_NAMESPACE {

const KernelTable& kernel_table() {
  static const KernelTable table = [] {
    KernelTable t{};
#define FG_STRINGIFY(x) #x
#define FG_NAME(x) FG_STRINGIFY(x)
    t.isa = FG_NAME(FG_ISA_NAMESPACE);
#undef FG_NAME
#undef FG_STRINGIFY
    fill_elementwise(t.f32);
    fill_elementwise(t.f64);
    fill_reduce(t.f32);
    fill_reduce(t.f64);
    fill_gemm(t.f32);
    fill_gemm(t.f64);
    fill_depthwise(t.f32);
    fill_depthwise(t.f64);
    fill_optim(t.f32);
    fill_optim(t.f64);
    fill_copy(t.f32);
    fill_copy(t.f64);
    fill_pool(t.f32);
    fill_pool(t.f64);
    fill_norm(t.f32);
    fill_norm(t.f64);
    fill_softmax(t.f32);
    fill_softmax(t.f64);
    fill_recurrent(t.f32);
    fill_recurrent(t.f64);
    fill_attention(t.f32);
    fill_attention(t.f64);
    return t;
  }();
  return table;
}

}  // namespace fg::simd::FG_ISA_NAMESPACE
