#include "core/shape.h"

#include <algorithm>

namespace fg {

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t d = 0; d < shape.size(); ++d) s += (d ? ", " : "") + std::to_string(shape[d]);
  return s + "]";
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    // Align from the right, as broadcasting does.
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw RuntimeError(cat("The size of tensor a (", da, ") must match the size of tensor b (", db,
                             ") at non-singleton dimension ", i));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape broadcast_strides(const Tensor& t, const Shape& shape) {
  // Callers pass shapes that broadcast; a tensor whose shape was swapped under the graph (x.data =
  // a tensor of another shape) may not, and must fail here rather than read past `shape`.
  if (t->shape.size() > shape.size())
    throw RuntimeError(cat("shape ", shape_str(t->shape), " cannot be broadcast to ", shape_str(shape)));
  Shape strides(shape.size(), 0);
  size_t lead = shape.size() - t->shape.size();
  for (size_t d = 0; d < t->shape.size(); ++d) {
    if (t->shape[d] != 1 && t->shape[d] != shape[lead + d])
      throw RuntimeError(cat("shape ", shape_str(t->shape), " cannot be broadcast to ", shape_str(shape)));
    strides[lead + d] = t->shape[d] == 1 ? 0 : t->strides[d];
  }
  return strides;
}

int64_t wrap_dim(int64_t dim, int64_t ndim) {
  int64_t n = ndim > 0 ? ndim : 1;
  if (dim < -n || dim >= n)
    throw IndexError(
        cat("Dimension out of range (expected to be in range of [", -n, ", ", n - 1, "], but got ", dim, ")"));
  return dim < 0 ? dim + n : dim;
}

std::vector<bool> reduction_mask(const std::vector<int64_t>& dims, int64_t ndim) {
  std::vector<bool> mask(ndim, dims.empty());
  std::vector<bool> seen(std::max<int64_t>(ndim, 1), false);  // a 0-d tensor has one dim to name: 0 (or -1)
  for (int64_t dim : dims) {
    int64_t d = wrap_dim(dim, ndim);
    if (seen[d]) throw RuntimeError(cat("dim ", d, " appears multiple times in the list of dims"));
    seen[d] = true;
    if (ndim > 0) mask[d] = true;
  }
  return mask;
}

Shape reduced_shape(const Shape& shape, const std::vector<bool>& mask, bool keepdim) {
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!mask[d]) out.push_back(shape[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

}  // namespace fg
