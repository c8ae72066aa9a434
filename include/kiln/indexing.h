// Python-style indexing for C++, as libtorch's torch::indexing:
//
//   using namespace kiln::indexing;
//   x.index({Slice(), 0})                 // x[:, 0]
//   x.index({"...", None, idx})           // x[..., None, idx]   (idx: an int64 or bool tensor)
//   x.index({Slice(1, None, 2)})          // x[1::2]
//   x.index_put_({mask}, 0.0)             // x[mask] = 0
//   x.index_put_({Slice(), Slice(0, 2)}, v)
//
// Integers select (the dim goes away), slices and None keep or add a dim (basic indexing:
// views of x); tensors index the dims they stand at (advanced indexing: a copy, as torch).
#pragma once
#include <concepts>
#include <cstdint>
#include <optional>
#include <variant>

#include "kiln/tensor.h"

namespace kiln::indexing {

// `None` both as an index (a new dim of size 1) and as a missing slice bound.
inline constexpr std::nullopt_t None = std::nullopt;
struct EllipsisIndexType {};
inline constexpr EllipsisIndexType Ellipsis;

// start:stop:step; a bound left out (None) is the start or the end of the dim.
struct Slice {
  Slice(std::optional<SymInt> start = std::nullopt, std::optional<SymInt> stop = std::nullopt,
        std::optional<SymInt> step = std::nullopt)
      : start(start), stop(stop), step(step) {}
  std::optional<SymInt> start, stop, step;
};

class TensorIndex {
 public:
  TensorIndex(std::nullopt_t) : v_(std::nullopt) {}
  TensorIndex(EllipsisIndexType) : v_(EllipsisIndexType{}) {}
  TensorIndex(const char* s);  // "..." only
  template <class I>
  requires(std::integral<I> && !std::same_as<I, bool>) TensorIndex(I i) : v_(SymInt(static_cast<int64_t>(i))) {}
  TensorIndex(SymInt i) : v_(i) {}
  TensorIndex(bool b) : v_(b) {}
  TensorIndex(Slice s) : v_(s) {}
  TensorIndex(Tensor t) : v_(std::move(t)) {}

  bool is_none() const { return std::holds_alternative<std::nullopt_t>(v_); }
  bool is_ellipsis() const { return std::holds_alternative<EllipsisIndexType>(v_); }
  bool is_integer() const { return std::holds_alternative<SymInt>(v_); }
  bool is_boolean() const { return std::holds_alternative<bool>(v_); }
  bool is_slice() const { return std::holds_alternative<Slice>(v_); }
  bool is_tensor() const { return std::holds_alternative<Tensor>(v_); }
  SymInt integer() const { return std::get<SymInt>(v_); }
  bool boolean() const { return std::get<bool>(v_); }
  const Slice& slice() const { return std::get<Slice>(v_); }
  const Tensor& tensor() const { return std::get<Tensor>(v_); }

 private:
  std::variant<std::nullopt_t, EllipsisIndexType, SymInt, bool, Slice, Tensor> v_;
};

}  // namespace kiln::indexing
