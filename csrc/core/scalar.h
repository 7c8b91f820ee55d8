// A Python number used as an operand. Its kind takes part in type promotion the way PyTorch
// treats "wrapped numbers": it can raise the category of the result (int64 tensor * 0.5 is float32)
// but never its width within a category (float32 tensor * 2.5 stays float32).
#pragma once
#include "core/dtype.h"
#include "core/numeric.h"

namespace fg {

struct Scalar {
  double value;        // the number as a double: what floating computations and backward formulas use
  Category kind;
  int64_t integer = 0; // a bool's or an integer's exact value (a double holds 53 bits of it)

  static Scalar from_bool(bool v) { return {v ? 1.0 : 0.0, Category::Bool, v ? 1 : 0}; }
  static Scalar from_int(int64_t v) { return {static_cast<double>(v), Category::Integral, v}; }
  static Scalar from_float(double v) { return {v, Category::Floating, 0}; }

  // The number in element type T, as PyTorch converts it: integers exactly (or rounded to the
  // nearest float), floats truncated towards zero for int64 (value_cast: defined for any double).
  template <class T>
  T to() const {
    if (kind == Category::Floating) return value_cast<T>(value);
    if constexpr (std::is_same_v<T, bool>) return integer != 0;
    else return value_cast<T>(integer);
  }
};

}  // namespace fg
