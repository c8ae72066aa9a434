// Helpers shared by the normalisation / activation / loss ops (nn_*.cpp, grad_nn.cpp).
#pragma once
#include <string>

#include "dispatch/dispatch.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/pointwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "ops/meta_util.h"

namespace kiln::nn_detail {

// Note [Value checks]: a check of tensor values eager makes (binary_cross_entropy's input range,
// a variance's sign, class-index targets) is made while compiling too: reading a tracer's values
// breaks the graph there (as user code's item() does), so a compiled call raises eager's error
// instead of returning an answer. Meta tensors have no values to check. An op with a kernel that
// checks (CHECKS_VALUES in ops.def: one_hot) is recorded whole and kept whole when the graph is
// lowered to prims, so its decomposition's check only runs where no kernel does. Index checks
// read checked_index_values (ops/indexing.h) where no kernel repeats them (embedding_bag's
// offsets), index_values (eager only) where one does.
inline bool has_values_to_check(const Tensor& t) {
  return t.defined() && t.numel() > 0 && (t.has_storage() || t.unsafe_impl()->is_tracer());
}

// Checks a loss reduction string ("none", "mean", "sum").
inline void check_reduction(const std::string& r, const char* op) {
  KILN_CHECK(r == "none" || r == "mean" || r == "sum", op, ": reduction must be 'none', 'mean' or 'sum', got '", r,
             "'");
}

// Applies a "mean"/"sum"/"none" reduction to an elementwise loss.
inline Tensor reduce_loss(const Tensor& loss, const std::string& r) {
  if (r == "none") return loss;
  if (r == "sum") return sum(loss);
  return mean(loss);
}

// Sizes [1, C, 1, ...] for broadcasting a per-channel vector against an (N, C, *) tensor.
inline Shape channel_shape(int64_t ndim, int64_t c, int64_t channel_dim = 1) {
  Shape s(static_cast<size_t>(ndim), 1);
  s[channel_dim] = c;
  return s;
}

// A 0-d tensor holding v, flagged as a wrapped number (promotes like a C++ scalar).
inline Tensor scalar(double v) { return wrap_scalar(Scalar(v)); }

// Trailing dims [ndim - k, ndim) as a list.
inline std::vector<int64_t> last_dims(int64_t ndim, int64_t k) {
  std::vector<int64_t> d;
  for (int64_t i = ndim - k; i < ndim; ++i) d.push_back(i);
  return d;
}

// The int attr carrying a 64-bit Philox seed / offset (bit-preserving).
inline int64_t as_attr(uint64_t v) { return static_cast<int64_t>(v); }
inline uint64_t from_attr(int64_t v) { return static_cast<uint64_t>(v); }

}  // namespace kiln::nn_detail
