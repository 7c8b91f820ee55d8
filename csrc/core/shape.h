// Shape rules shared by the ops: broadcasting, dim wrapping, reduction dims.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace fg {

// "[2, 3]" as PyTorch prints shapes in messages.
std::string shape_str(const Shape& shape);

// numpy/PyTorch broadcasting of two shapes; RuntimeError naming the mismatching dim otherwise.
Shape broadcast_shapes(const Shape& a, const Shape& b);

// The strides that read `t` as if it had been expanded to `shape` (0 along broadcast dims).
Shape broadcast_strides(const Tensor& t, const Shape& shape);

// Wraps a possibly negative dim into [0, ndim); IndexError like PyTorch's otherwise. A 0-d tensor
// accepts dims -1 and 0, as in PyTorch.
int64_t wrap_dim(int64_t dim, int64_t ndim);

// A mask of reduced dims from a list of (possibly negative) dims; empty list = all dims.
std::vector<bool> reduction_mask(const std::vector<int64_t>& dims, int64_t ndim);

// The shape of a reduction's result.
Shape reduced_shape(const Shape& shape, const std::vector<bool>& mask, bool keepdim);

}  // namespace fg
