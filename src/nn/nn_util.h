// Helpers shared by the layer files: torch-style repr formatting and argument expansion.
#pragma once
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor_impl.h"
#include "kiln/array_ref.h"
#include "kiln/error.h"
#include "kiln/nn/init.h"
#include "kiln/tensor.h"

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

// The transformer layers' constructor checks, naming the layer rather than the attention inside it.
inline void check_transformer_dims(const char* who, int64_t d_model, int64_t nhead, int64_t dim_feedforward,
                                   double dropout) {
  KILN_CHECK(d_model > 0 && nhead > 0, who, ": d_model and nhead must be greater than 0, got d_model=", d_model,
             " and nhead=", nhead);
  KILN_CHECK(d_model % nhead == 0, who, ": d_model (", d_model, ") must be divisible by nhead (", nhead, ")");
  KILN_CHECK(dim_feedforward > 0, who, ": dim_feedforward must be greater than 0, got ", dim_feedforward);
  KILN_CHECK(dropout >= 0 && dropout <= 1, who, ": dropout probability has to be between 0 and 1, got ", dropout);
}

// A transformer input: [S, N, E] ([N, S, E] when batch_first) or unbatched [S, E], E = d_model.
inline void check_sequence(const char* who, const char* name, const Tensor& x, int64_t d_model, bool batch_first) {
  KILN_CHECK(x.defined(), who, ": ", name, " must be defined");
  KILN_CHECK((x.dim() == 2 || x.dim() == 3) && x.sizes().back() == d_model, who, ": expected ", name, " of shape ",
             batch_first ? "[N, S, " : "[S, N, ", d_model, "] or unbatched [S, ", d_model, "], got ",
             shape_str(x.sizes()));
}

}  // namespace kiln::nn::detail
