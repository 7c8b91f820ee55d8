// Matrix products. dot, mv, mm, bmm and addmm are the recorded primitives (each with its own
// backward); matmul applies PyTorch's rank rules on top of them.
#include <algorithm>
#include <type_traits>

#include "autograd/node.h"
#include "core/shape.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"
#include "ops/ops.h"

namespace fg {

namespace {

// PyTorch has no bool matrix products; `kernel` is the name its error gives. Except dot, its
// products return early (with zeros) when there is nothing to multiply: `work` = n * m * k.
void require_not_bool(const Tensor& a, const char* kernel, int64_t work = 1) {
  if (a->dtype == DType::Bool && work != 0)
    throw NotImplementedError(cat("\"", kernel, "\" not implemented for 'Bool'"));
}

void require_same_dtype(const Tensor& a, const Tensor& b) {
  if (a->dtype != b->dtype)
    throw RuntimeError(cat("expected m1 and m2 to have the same dtype, but got: ", c_type_name(a->dtype),
                           " != ", c_type_name(b->dtype)));
}

// Products of fewer multiply-adds than this run on one thread (waking the pool costs ~10-20 us).
constexpr double kParallelGemmWork = 1 << 20;
// The smallest row block, and the column unit (a multiple of every ISA's micro-tile width), of a split product.
constexpr int64_t kParallelRows = 16;
constexpr int64_t kParallelCols = 64;
// A split by rows shares one packed B from this many columns on: at 256 the second hand-out to the
// threads cost more than the copy it saved (two threads, 256^3: 0.25 -> 0.30 ms of CPU a product).
constexpr int64_t kSharedPanelCols = 512;

// addmm's epilogue: C = alpha * C + beta * input, `input` a view of C's shape (a broadcast bias has
// row stride 0) in C's compute dtype.
struct ScaledAdd {
  Tensor input;
  Scalar beta, alpha;
};

// Rows at least this long take the add kernel (a call per row); shorter ones (F.linear's last layer
// is often 10 wide) the loop: measured 0.5 us faster on 64 rows of 10.
constexpr int64_t kKernelRow = 64;

// Applies `add` to C[r0:r1, c0:c1] (rows ldc apart) once each element's k-chain is complete, while
// the block is still in cache. With alpha = beta = 1 each element becomes c + x, the bits of a
// separate `a @ b + input` (the add kernel, or the loop: 1 * v is exact); beta = 0 ignores input
// (NaN too) and alpha = 0 the product, as PyTorch's (BLAS) addmm.
template <class T>
void scaled_add(const ScaledAdd& add, T* c, int64_t ldc, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  const T beta = add.beta.to<T>(), alpha = add.alpha.to<T>();
  const int64_t row_stride = add.input->strides[0], col_stride = add.input->strides[1];
  const T* x = add.input->data_as<T>() + r0 * row_stride + c0 * col_stride;
  const int64_t cols = c1 - c0;
  const BinaryKernel<T> add_kernel = [&]() -> BinaryKernel<T> {
    if constexpr (std::is_floating_point_v<T>)
      if (alpha == T(1) && beta == T(1) && col_stride <= 1 && cols >= kKernelRow)
        return kernels().of<T>().binary[static_cast<int>(VecBinary::Add)];
    return nullptr;
  }();
  for (int64_t i = r0; i < r1; ++i, x += row_stride) {
    T* row = c + i * ldc + c0;
    if (add_kernel) {
      add_kernel(row, false, x, col_stride == 0, row, cols);
      continue;
    }
    for (int64_t j = 0; j < cols; ++j) {
      const T product = static_cast<T>(wrap_mul(alpha, row[j]));
      const T addend = static_cast<T>(wrap_mul(beta, x[j * col_stride]));
      row[j] = beta == T(0) ? product : alpha == T(0) ? addend : static_cast<T>(wrap_add(product, addend));
    }
  }
}

// out[p] = a[p] @ b[p] with a viewed as (batch, n, k) and b as (batch, k, m). Floating point runs
// the packed SIMD GEMM (kernels/gemm_impl.h), which packs straight from the operands' strides, so
// transposed views (the backward's A^T G and G B^T) are never copied first; int64 the plain loop.
// `add`: addmm's epilogue (batch 1 only), applied in the compute type.
Tensor product(const Tensor& a, MatrixView as, const Tensor& b, MatrixView bs, int64_t batch, int64_t n, int64_t k,
               int64_t m, const Shape& out_shape, const ScaledAdd* add = nullptr) {
  if (compute_type(a->dtype) != a->dtype) {  // storage dtypes multiply dense copies in their compute type
    auto dense = [&](const Tensor& t, MatrixView v, int64_t rows, int64_t cols) {
      Tensor copy = empty({batch, rows, cols}, compute_type(t->dtype));
      copy_values(copy, make_view(t, {batch, rows, cols}, {v.batch_stride, v.row_stride, v.col_stride}, t->offset));
      return copy;
    };
    std::optional<ScaledAdd> wide_add;
    if (add) wide_add = ScaledAdd{cast_values(add->input, compute_type(a->dtype)), add->beta, add->alpha};
    Tensor wide = product(dense(a, as, n, k), {n * k, k, 1}, dense(b, bs, k, m), {k * m, m, 1}, batch, n, k, m,
                          out_shape, wide_add ? &*wide_add : nullptr);
    Tensor out = empty(out_shape, a->dtype);
    copy_values(out, wide);
    return out;
  }
  Tensor out = empty(out_shape, a->dtype);
  dispatch(a->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* ap = a->data_as<T>();
    const T* bp = b->data_as<T>();
    T* cp = out->data_as<T>();
    if constexpr (std::is_floating_point_v<T>) {
      GemmKernel<T> gemm = kernels().of<T>().gemm;
      // C[p][r0:r1, c0:c1]: each element is the same k-ordered chain whatever block computes it
      // (the GEMM's contract), so how the threads split C never changes a bit.
      auto block = [&](int64_t p, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
        gemm(r1 - r0, c1 - c0, k, ap + p * as.batch_stride + r0 * as.row_stride, as.row_stride, as.col_stride,
             bp + p * bs.batch_stride + c0 * bs.col_stride, bs.row_stride, bs.col_stride, cp + p * n * m + r0 * m + c0,
             m);
        if (add) scaled_add<T>(*add, cp, m, r0, r1, c0, c1);
      };
      const bool parallel = double(batch) * double(n) * double(m) * double(k) >= kParallelGemmWork;
      const int64_t nr = kernels().of<T>().gemm_blocks.nr;
      if (!parallel || batch >= get_num_threads()) {  // whole products per thread
        parallel_for(0, batch, parallel ? 1 : batch, [&](int64_t lo, int64_t hi) {
          for (int64_t p = lo; p < hi; ++p) block(p, 0, n, 0, m);
        });
      } else if (n >= m && m >= kSharedPanelCols) {  // blocks of rows over one packed B
        // B packed once, its panels split among the threads, then read by every thread's rows.
        // Packed by each thread (as a plain row block's gemm does), B's copies cost each thread a
        // share of its time that grows with the threads. Two threads, CPU time per product (Intel
        // Xeon model 167, the machine shared), n = 512 / 1024 / 2048: -2% / -4% / -1%.
        const TypedKernels<T>& kernel = kernels().of<T>();
        const int64_t panel_count = (m + nr - 1) / nr;
        Tensor panels = empty({panel_count * nr * k}, a->dtype);
        T* pp = panels->data_as<T>();
        for (int64_t p = 0; p < batch; ++p) {
          const T* bb = bp + p * bs.batch_stride;
          parallel_for(0, panel_count, 1, [&](int64_t lo, int64_t hi) {
            kernel.gemm_pack_b(k, std::min(m, hi * nr) - lo * nr, bb + lo * nr * bs.col_stride, bs.row_stride,
                               bs.col_stride, pp + lo * nr * k);
          });
          parallel_for(0, n, kParallelRows, [&](int64_t lo, int64_t hi) {
            kernel.gemm_packed_b(hi - lo, m, k, ap + p * as.batch_stride + lo * as.row_stride, as.row_stride,
                                 as.col_stride, pp, cp + p * n * m + lo * m, m);
            if (add) scaled_add<T>(*add, cp, m, lo, hi, 0, m);
          });
        }
      } else if (n >= m) {  // blocks of rows (each thread packs all of a narrow B)
        for (int64_t p = 0; p < batch; ++p)
          parallel_for(0, n, kParallelRows, [&](int64_t lo, int64_t hi) { block(p, lo, hi, 0, m); });
      } else {  // blocks of whole column tiles, the last one taking the remainder: a block of one
                // column out of a wider C would be computed as a matrix-vector product (gemm_impl.h)
        const int64_t tiles = std::max<int64_t>(1, m / kParallelCols);
        for (int64_t p = 0; p < batch; ++p)
          parallel_for(0, tiles, 1, [&](int64_t lo, int64_t hi) {
            block(p, 0, n, lo * kParallelCols, hi == tiles ? m : hi * kParallelCols);
          });
      }
    } else {
      batched_matmul<T>(batch, n, k, m, ap, as, bp, bs, cp);
      if (add) scaled_add<T>(*add, cp, m, 0, n, 0, m);
    }
  });
  return out;
}

std::string dims_str(const Tensor& t) { return cat(t->shape[0], "x", t->shape[1]); }

// Every product's backward reads both operands.
template <class N>
Tensor record_product(const Tensor& out, const Tensor& a, const Tensor& b) {
  if (auto* node = record<N>(out, {&a, &b})) {
    node->save(a);
    node->save(b);
  }
  return out;
}

}  // namespace

FG_NODE(DotBackward0);
GradList DotBackward0::apply(GradList&& grads) {
  GradList out(2);
  if (needs_input_grad(0)) out[0] = mul(grads[0], unpack(1));
  if (needs_input_grad(1)) out[1] = mul(grads[0], unpack(0));
  return out;
}
Tensor dot(const Tensor& a, const Tensor& b) {
  if (a->dim() != 1 || b->dim() != 1)
    throw RuntimeError(cat("1D tensors expected, but got ", a->dim(), "D and ", b->dim(), "D tensors"));
  if (a->shape[0] != b->shape[0])
    throw RuntimeError(cat("inconsistent tensor size, expected tensor [", a->shape[0], "] and src [", b->shape[0],
                           "] to have the same number of elements, but got ", a->shape[0], " and ", b->shape[0],
                           " elements respectively"));
  if (a->dtype != b->dtype)
    throw RuntimeError(cat("dot : expected both vectors to have same dtype, but found ", c_type_name(a->dtype), " and ",
                           c_type_name(b->dtype)));
  require_not_bool(a, "dot");
  Tensor out = product(a, {0, 0, a->strides[0]}, b, {0, b->strides[0], 0}, 1, 1, a->shape[0], 1, {});
  return record_product<DotBackward0>(out, a, b);
}

FG_NODE(MvBackward0);
GradList MvBackward0::apply(GradList&& grads) {
  const Tensor& g = grads[0];
  GradList out(2);
  if (needs_input_grad(0)) out[0] = mm(unsqueeze(g, 1), unsqueeze(unpack(1), 0));
  if (needs_input_grad(1)) out[1] = mv(t(unpack(0)), g);
  return out;
}
Tensor mv(const Tensor& a, const Tensor& b) {
  if (a->dim() != 2 || b->dim() != 1)
    throw RuntimeError(cat("vector + matrix @ vector expected, got ", 1, ", ", a->dim(), ", ", b->dim()));
  if (a->shape[1] != b->shape[0])
    throw RuntimeError(
        cat("size mismatch, got input (", a->shape[0], "), mat (", dims_str(a), "), vec (", b->shape[0], ")"));
  require_same_dtype(a, b);
  require_not_bool(a, "addmv_impl_cpu", a->numel());
  Tensor out = product(a, {0, a->strides[0], a->strides[1]}, b, {0, b->strides[0], 0}, 1, a->shape[0], a->shape[1], 1,
                       {a->shape[0]});
  return record_product<MvBackward0>(out, a, b);
}

namespace {
// A matrix laid out as the transpose of a contiguous one (a linear layer's W.t()).
bool is_transposed_matrix(const Tensor& m) {
  return m->shape[0] > 1 && m->shape[1] > 1 && m->strides[0] == 1 && m->strides[1] == m->shape[0];
}

// The gradients of a @ b for the output gradient g. Each comes out in its input's layout, as in
// PyTorch: the weight of a linear layer, used as W.t(), then gets a contiguous gradient that .grad
// takes without a copy. Both forms of a product sum the same terms in the same order, so the values
// are identical.
Tensor mm_grad_a(const Tensor& g, const Tensor& a, const Tensor& b) {
  return is_transposed_matrix(a) ? t(mm(b, t(g))) : mm(g, t(b));
}
Tensor mm_grad_b(const Tensor& g, const Tensor& a, const Tensor& b) {
  return is_transposed_matrix(b) ? t(mm(t(g), a)) : mm(t(a), g);
}
}  // namespace

FG_NODE(MmBackward0);
GradList MmBackward0::apply(GradList&& grads) {
  GradList out(2);
  if (needs_input_grad(0)) out[0] = mm_grad_a(grads[0], unpack(0), unpack(1));
  if (needs_input_grad(1)) out[1] = mm_grad_b(grads[0], unpack(0), unpack(1));
  return out;
}
Tensor mm(const Tensor& a, const Tensor& b) {
  if (a->dim() != 2) throw RuntimeError("self must be a matrix");
  if (b->dim() != 2) throw RuntimeError("mat2 must be a matrix");
  if (a->shape[1] != b->shape[0])
    throw RuntimeError(cat("mat1 and mat2 shapes cannot be multiplied (", dims_str(a), " and ", dims_str(b), ")"));
  require_same_dtype(a, b);
  require_not_bool(a, "addmm_impl_cpu_", a->numel() * b->shape[1]);
  Tensor out = product(a, {0, a->strides[0], a->strides[1]}, b, {0, b->strides[0], b->strides[1]}, 1, a->shape[0],
                       a->shape[1], b->shape[1], {a->shape[0], b->shape[1]});
  return record_product<MmBackward0>(out, a, b);
}

// beta * input + alpha * (mat1 @ mat2) as one node (F.linear's op): the add runs in the product's
// epilogue, and the backward gives the input's gradient summed back to its shape (a bias: the
// gradient summed over rows) and the operands' gradients as MmBackward0's, times alpha.
struct AddmmBackward0 final : Node {
  FG_NODE_MEMBERS(AddmmBackward0)
  Shape input_shape;
  Scalar beta, alpha;
};
GradList AddmmBackward0::apply(GradList&& grads) {
  const Tensor& g = grads[0];
  auto scaled = [](const Tensor& x, const Scalar& factor) { return factor.value == 1 ? x : mul(x, factor); };
  GradList out(3);
  if (needs_input_grad(0)) out[0] = sum_to(scaled(g, beta), input_shape);
  if (needs_input_grad(1)) out[1] = scaled(mm_grad_a(g, unpack(0), unpack(1)), alpha);
  if (needs_input_grad(2)) out[2] = scaled(mm_grad_b(g, unpack(0), unpack(1)), alpha);
  return out;
}
Tensor addmm(const Tensor& input, const Tensor& mat1, const Tensor& mat2, const Scalar& beta, const Scalar& alpha) {
  for (auto [name, mat] : {std::pair{"mat1", &mat1}, std::pair{"mat2", &mat2}})
    if ((*mat)->dim() != 2) throw RuntimeError(cat(name, " must be a matrix, got ", (*mat)->dim(), "-D tensor"));
  if (mat1->shape[1] != mat2->shape[0])
    throw RuntimeError(
        cat("mat1 and mat2 shapes cannot be multiplied (", dims_str(mat1), " and ", dims_str(mat2), ")"));
  if (mat1->dtype != mat2->dtype)
    throw RuntimeError(cat("mat1 and mat2 must have the same dtype, but got ", scalar_type_name(mat1->dtype), " and ",
                           scalar_type_name(mat2->dtype)));
  if (input->dtype != mat2->dtype)
    throw RuntimeError(cat("self and mat2 must have the same dtype, but got ", scalar_type_name(input->dtype), " and ",
                           scalar_type_name(mat2->dtype)));
  const int64_t n = mat1->shape[0], k = mat1->shape[1], m = mat2->shape[1];
  ScaledAdd add{Tensor(), beta, alpha};
  {
    GradModeGuard no_grad(false);  // a view to read the input through, not part of the graph
    add.input = expand(input, {n, m});
  }
  require_not_bool(mat1, "addmm_impl_cpu_", n * k * m);
  Tensor out = product(mat1, {0, mat1->strides[0], mat1->strides[1]}, mat2, {0, mat2->strides[0], mat2->strides[1]}, 1,
                       n, k, m, {n, m}, &add);
  if (auto* node = record<AddmmBackward0>(out, {&input, &mat1, &mat2})) {
    node->save(mat1);
    node->save(mat2);
    node->input_shape = input->shape;
    node->beta = beta;
    node->alpha = alpha;
  }
  return out;
}

FG_NODE(BmmBackward0);
GradList BmmBackward0::apply(GradList&& grads) {
  const Tensor& g = grads[0];
  GradList out(2);
  if (needs_input_grad(0)) out[0] = bmm(g, transpose(unpack(1), 1, 2));
  if (needs_input_grad(1)) out[1] = bmm(transpose(unpack(0), 1, 2), g);
  return out;
}
Tensor bmm(const Tensor& a, const Tensor& b) {
  if (a->dim() != 3) throw RuntimeError(cat("batch1 must be a 3D tensor"));
  if (b->dim() != 3) throw RuntimeError(cat("batch2 must be a 3D tensor"));
  if (a->shape[0] != b->shape[0] || a->shape[2] != b->shape[1])
    throw RuntimeError(cat("Expected size for first two dimensions of batch2 tensor to be: [", a->shape[0], ", ",
                           a->shape[2], "] but got: [", b->shape[0], ", ", b->shape[1], "]."));
  require_same_dtype(a, b);
  require_not_bool(a, "bmm", a->numel() * b->shape[2]);
  Tensor out =
      product(a, {a->strides[0], a->strides[1], a->strides[2]}, b, {b->strides[0], b->strides[1], b->strides[2]},
              a->shape[0], a->shape[1], a->shape[2], b->shape[2], {a->shape[0], a->shape[1], b->shape[2]});
  return record_product<BmmBackward0>(out, a, b);
}

// PyTorch's matmul: vectors are promoted to matrices and the extra dim removed afterwards; batch
// dims broadcast, and the product runs as one bmm over the flattened batch.
Tensor matmul(const Tensor& a, const Tensor& b) {
  if (a->dim() == 0 || b->dim() == 0)
    throw RuntimeError(
        cat("both arguments to matmul need to be at least 1D, but they are ", a->dim(), "D and ", b->dim(), "D"));
  if (a->dim() == 1 && b->dim() == 1) return dot(a, b);
  if (a->dim() == 2 && b->dim() == 1) return mv(a, b);
  // squeezed in place, as PyTorch (SqueezeBackward4): F.linear of a vector without a bias shows it
  if (a->dim() == 1 && b->dim() == 2) return squeeze_(mm(unsqueeze(a, 0), b), std::vector<int64_t>{0}, false);
  if (a->dim() == 2 && b->dim() == 2) return mm(a, b);
  if (a->dim() >= 3 && b->dim() <= 2) {
    // (..., n, k) @ (k, m): one mm over the folded leading dims.
    int64_t k = a->shape.back();
    Shape out_shape(a->shape.begin(), a->shape.end() - 1);
    Tensor folded = reshape(a, {numel_of(out_shape), k});  // not -1: k may be 0
    if (b->dim() == 1)
      return unsafe_view(squeeze(mm(folded, unsqueeze(b, 1)), std::vector<int64_t>{1}, false), out_shape);
    out_shape.push_back(b->shape[1]);
    return unsafe_view(mm(folded, b), out_shape);
  }
  Tensor a3 = a->dim() == 1 ? unsqueeze(a, 0) : a;
  Tensor b3 = b->dim() == 1 ? unsqueeze(b, 1) : b;
  int64_t n = a3->shape[a3->dim() - 2], k = a3->shape[a3->dim() - 1];
  int64_t k2 = b3->shape[b3->dim() - 2], m = b3->shape[b3->dim() - 1];
  if (k != k2)
    throw RuntimeError(cat("Expected size for first two dimensions of batch2 tensor to be: [",
                           numel_of(Shape(a3->shape.begin(), a3->shape.end() - 2)), ", ", k, "] but got: [",
                           numel_of(Shape(b3->shape.begin(), b3->shape.end() - 2)), ", ", k2, "]."));
  Shape batch =
      broadcast_shapes(Shape(a3->shape.begin(), a3->shape.end() - 2), Shape(b3->shape.begin(), b3->shape.end() - 2));
  int64_t flat = numel_of(batch);
  auto batched = [&](const Tensor& x, int64_t rows, int64_t cols) {
    Shape full = batch;
    full.push_back(rows);
    full.push_back(cols);
    return reshape(expand(x, full), {flat, rows, cols});
  };
  Tensor out = bmm(batched(a3, n, k), batched(b3, k, m));
  Shape out_shape = batch;
  if (a->dim() > 1) out_shape.push_back(n);
  if (b->dim() > 1) out_shape.push_back(m);
  return unsafe_view(out, out_shape);
}

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  if (input->dim() == 0 || weight->dim() == 0)
    throw RuntimeError(cat("both arguments to linear need to be at least 1D, but they are ", input->dim(), "D and ",
                           weight->dim(), "D"));
  if (!bias) return matmul(input, t(weight));
  const Scalar one = Scalar::from_int(1);
  if (input->dim() == 2) return addmm(bias, input, t(weight), one, one);
  // PyTorch's bias.squeeze().dim() == 1: one size other than 1
  const bool vector_bias =
      bias->dim() == 1 || std::count_if(bias->shape.begin(), bias->shape.end(), [](int64_t n) { return n != 1; }) == 1;
  if (!vector_bias || !input->is_contiguous() || !bias->is_contiguous()) return add_(matmul(input, t(weight)), bias);
  // another rank: ViewBackward0 on either side of the AddmmBackward0, as PyTorch's nodes; the rows
  // counted, not -1: a dim may be 0
  Shape out_shape(input->shape.begin(), input->shape.end() - 1);
  Tensor out = addmm(bias, view(input, {numel_of(out_shape), input->shape.back()}), t(weight), one, one);
  out_shape.push_back(out->shape[1]);
  return view(out, out_shape);
}

}  // namespace fg
