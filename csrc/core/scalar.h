// A Python number used as an operand. Its kind takes part in type promotion the way PyTorch
// treats "wrapped numbers": it can raise the category of the result (int64 tensor * 0.5 is float32)
// but never its width within a category (float32 tensor * 2.5 stays float32).
#pragma once
#include "core/dtype.h"

namespace fg {

struct Scalar {
  double value;
  Category kind;
  static Scalar from_bool(bool v) { return {v ? 1.0 : 0.0, Category::Bool}; }
  static Scalar from_int(int64_t v) { return {static_cast<double>(v), Category::Integral}; }
  static Scalar from_float(double v) { return {v, Category::Floating}; }
};

}  // namespace fg
