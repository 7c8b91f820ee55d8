// Scaled dot-product attention as one fused op, for the inputs PyTorch sends to its CPU flash kernel
// (4-D float32 / float64 query, key and value of the same batch and head sizes, value's width the
// query's, last dims contiguous, nothing empty; no mask but is_causal, no dropout): node
// ScaledDotProductFlashAttentionForCpuBackward0, as PyTorch's. flash_attention_case tells which
// inputs those are; F.scaled_dot_product_attention composes the others (nn/_functional_attention.py).
//
// Per (batch, head) plane and query row (kernels/attention_impl.h): the scores over the visible keys
// (causal: j <= i, no mask tensor), softmax's stable steps, the weighted sum of value rows. q, k and v
// are read in place through their strides (a projection's split viewed as heads is not copied).
// Saved for backward: the softmax weights P (batch, heads, L, S), which the forward computes anyway;
// the alternative, FlashAttention's row log-sum-exp with P recomputed, would cost the backward one
// more q k^T and exp per plane to save memory the composed path (it saves P too) never saved. The
// backward is one pass per plane: dV += P^T dO, dp = dO V^T, ds = P * (dp - rowsum(P * dp)) * scale,
// dQ = ds K, dK += ds^T Q. In a backward with create_graph the same formulas run as tensor ops from
// the saved inputs (P recomputed as the composed path computes it), so gradients of any order follow.
// The output and each gradient take their tensor's memory order (as PyTorch's empty_like): heads of
// a split projection give (batch, L, heads, E) memory, which the caller's transpose(1, 2) and
// contiguous() then find contiguous.
#include <algorithm>
#include <array>
#include <memory>

#include "autograd/node.h"
#include "kernels/kernel_table.h"
#include "kernels/thread_pool.h"
#include "ops/ops.h"

namespace fg {

namespace {

// Planes below this many multiply-adds (summed over a thread's share) stay on one thread: a
// sampling step's (1, 4, 32, 16) attention is 65K, its hand-out would cost more than it saves.
constexpr int64_t kParallelWork = 1 << 18;

// A new tensor of t's (4-D) shape whose memory order follows t's strides, the largest first, the
// last dim innermost (stable for equal strides).
Tensor empty_in_layout_of(const Tensor& t) {
  std::array<int64_t, 3> order{0, 1, 2};
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return t->strides[a] > t->strides[b]; });
  const Shape permuted{t->shape[order[0]], t->shape[order[1]], t->shape[order[2]], t->shape[3]};
  const Shape packed = contiguous_strides(permuted);
  Shape strides{0, 0, 0, 1};
  for (int64_t d = 0; d < 3; ++d) strides[order[d]] = packed[d];
  return make_view(empty(permuted, t->dtype), t->shape, strides, 0);
}

Tensor zeros_in_layout_of(const Tensor& t) {
  Tensor out = empty_in_layout_of(t);
  std::fill_n(out->data(), out->numel() * static_cast<int64_t>(itemsize(out->dtype)), char(0));
  return out;
}

// The first element of plane (b, h) of a 4-D tensor.
template <class T>
T* plane_of(const Tensor& t, int64_t plane) {
  const int64_t heads = t->shape[1];
  return t->data_as<T>() + (plane / heads) * t->strides[0] + (plane % heads) * t->strides[1];
}

}  // namespace

bool flash_attention_case(const Tensor& q, const Tensor& k, const Tensor& v) {
  if (q->dim() != 4 || k->dim() != 4 || v->dim() != 4) return false;
  if (q->dtype != k->dtype || q->dtype != v->dtype) return false;
  if (q->dtype != DType::Float32 && q->dtype != DType::Float64) return false;
  for (int64_t d : {0, 1})
    if (k->shape[d] != q->shape[d] || v->shape[d] != q->shape[d]) return false;
  if (v->shape[2] != k->shape[2] || k->shape[3] != q->shape[3] || v->shape[3] != q->shape[3]) return false;
  for (const Tensor* t : {&q, &k, &v})
    if ((*t)->numel() == 0 || ((*t)->strides[3] != 1 && (*t)->shape[3] != 1)) return false;
  return true;
}

namespace {

// Runs body(first plane, end plane, scratch) over all planes of `work` multiply-adds each, split
// over threads when large; each block has its own scratch, left uninitialised (the kernels write
// what they read: zeroing it was a tenth of a sampling step's call).
template <class T, class F>
void for_each_plane(int64_t planes, int64_t work, int64_t scratch_size, F&& body) {
  parallel_for(0, planes, std::max<int64_t>(1, kParallelWork / std::max<int64_t>(1, work)),
               [&](int64_t lo, int64_t hi) {
                 const std::unique_ptr<T[]> scratch(new T[scratch_size]);
                 body(lo, hi, scratch.get());
               });
}

struct AttentionNode : Node {
  double scale = 1;
  bool causal = false;
};

}  // namespace

// Saves query, key, value and the softmax weights.
FG_NODE_FROM(ScaledDotProductFlashAttentionForCpuBackward0, AttentionNode);

GradList ScaledDotProductFlashAttentionForCpuBackward0::apply(GradList&& grads) {
  const Tensor q = unpack(0), k = unpack(1), v = unpack(2);
  const Tensor& g = grads[0];
  GradList out(3);
  if (grad_enabled()) {  // create_graph: the formulas as tensor ops
    const Tensor p = softmax(attention_scores(q, k, scale, Tensor(), causal), -1);
    const Tensor dp = matmul(g, transpose(v, -2, -1));
    const Tensor ds = mul(mul(p, sub(dp, sum(mul(p, dp), {3}, true))), Scalar::from_float(scale));
    if (needs_input_grad(0)) out[0] = matmul(ds, k);
    if (needs_input_grad(1)) out[1] = matmul(transpose(ds, -2, -1), q);
    if (needs_input_grad(2)) out[2] = matmul(transpose(p, -2, -1), g);
    return out;
  }
  const Tensor probs = unpack(3), dout = dense(g);
  if (needs_input_grad(0)) out[0] = empty_in_layout_of(q);
  if (needs_input_grad(1)) out[1] = zeros_in_layout_of(k);
  if (needs_input_grad(2)) out[2] = zeros_in_layout_of(v);
  const int64_t L = q->shape[2], S = k->shape[2], E = q->shape[3];
  const AttentionPlane plane{L, S, E, scale, causal};
  dispatch_floating(q->dtype, [&](auto tag) {
    using T = decltype(tag);
    const AttentionBackwardKernel<T> kernel = kernels().of<T>().attention_backward;
    for_each_plane<T>(q->shape[0] * q->shape[1], 2 * L * S * E, attention_scratch(S, E),
                      [&](int64_t lo, int64_t hi, T* scratch) {
                        for (int64_t n = lo; n < hi; ++n) {
                          AttentionBackward<T> io{};
                          io.q = plane_of<T>(q, n), io.k = plane_of<T>(k, n), io.v = plane_of<T>(v, n);
                          io.ld_q = q->strides[2], io.ld_k = k->strides[2], io.ld_v = v->strides[2];
                          io.probs = probs->data_as<T>() + n * L * S;
                          io.dout = dout->data_as<T>() + n * L * E, io.ld_dout = E;
                          if (out[0]) io.dq = plane_of<T>(out[0], n), io.ld_dq = out[0]->strides[2];
                          if (out[1]) io.dk = plane_of<T>(out[1], n), io.ld_dk = out[1]->strides[2];
                          if (out[2]) io.dv = plane_of<T>(out[2], n), io.ld_dv = out[2]->strides[2];
                          kernel(plane, io, scratch);
                        }
                      });
  });
  return out;
}

Tensor flash_attention(const Tensor& query, const Tensor& key, const Tensor& value, double scale, bool causal) {
  if (!flash_attention_case(query, key, value))  // the bindings ask first; F.* composes the other cases
    throw RuntimeError("flash_attention: inputs its kernel does not take (see flash_attention_case)");
  const int64_t L = query->shape[2], S = key->shape[2], E = query->shape[3];
  const int64_t planes = query->shape[0] * query->shape[1];
  Tensor out = empty_in_layout_of(query);
  const bool recording = should_record({&query, &key, &value});
  const Tensor probs = recording ? empty({query->shape[0], query->shape[1], L, S}, query->dtype) : Tensor();
  const AttentionPlane plane{L, S, E, scale, causal};
  dispatch_floating(query->dtype, [&](auto tag) {
    using T = decltype(tag);
    const AttentionForwardKernel<T> kernel = kernels().of<T>().attention_forward;
    for_each_plane<T>(planes, 2 * L * S * E, attention_scratch(S, E), [&](int64_t lo, int64_t hi, T* buffer) {
      for (int64_t n = lo; n < hi; ++n) {
        AttentionForward<T> io{};
        io.q = plane_of<T>(query, n), io.k = plane_of<T>(key, n), io.v = plane_of<T>(value, n);
        io.ld_q = query->strides[2], io.ld_k = key->strides[2], io.ld_v = value->strides[2];
        io.out = plane_of<T>(out, n), io.ld_out = out->strides[2];
        io.probs = recording ? probs->data_as<T>() + n * L * S : nullptr;
        kernel(plane, io, buffer);
      }
    });
  });
  if (auto* node = record<ScaledDotProductFlashAttentionForCpuBackward0>(out, {&query, &key, &value})) {
    node->scale = scale;
    node->causal = causal;
    node->save(query);
    node->save(key);
    node->save(value);
    node->save(probs);
  }
  return out;
}

}  // namespace fg
