// Helpers shared by the layer files: torch-style repr formatting and argument expansion.
#pragma once
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/array_ref.h"
#include "kiln/error.h"
#include "kiln/nn/init.h"

namespace kiln::nn::detail {

// A double as Python's repr prints it: shortest round-trip digits, "1.0" not "1", "1e-05".
inline std::string py_float(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, end);
  if (s == "inf" || s == "-inf" || s == "nan" || s == "-nan") return s;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

inline const char* py_bool(bool b) { return b ? "True" : "False"; }

// A tuple as Python prints it: "(3,)" for one element, "(3, 3)" otherwise.
inline std::string py_tuple(IntArrayRef v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

// An argument given as an int or a tuple, printed the way it was given.
inline std::string py_int_or_tuple(IntArrayRef v) { return v.size() == 1 ? std::to_string(v[0]) : py_tuple(v); }

// torch's _single/_pair: one value repeated n times, or exactly n values.
inline std::vector<int64_t> expand_arg(const std::string& who, const char* what, IntArrayRef v, size_t n) {
  KILN_CHECK(v.size() == 1 || v.size() == n, who, ": expected ", what, " to be a single int or ", n, " ints, got ",
             v.size(), " values");
  return v.size() == 1 ? std::vector<int64_t>(n, v[0]) : v.vec();
}

// torch's bias rule for Linear/Conv: U(-1/√fan_in, 1/√fan_in), or 0 when fan_in is 0.
inline void init_bias_from_fan_in(Tensor& bias, int64_t fan_in) {
  if (!bias.defined()) return;
  double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
  init::uniform_(bias, -bound, bound);
}

}  // namespace kiln::nn::detail
