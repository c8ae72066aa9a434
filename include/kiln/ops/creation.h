// Tensor creation and random ops (torch.* factory functions).
#pragma once
#include <initializer_list>
#include <vector>

#include "kiln/generator.h"
#include "kiln/tensor.h"

namespace kiln {

Tensor empty(SymIntArrayRef size, const TensorOptions& o = {});
Tensor empty_strided(SymIntArrayRef size, SymIntArrayRef stride, const TensorOptions& o = {});
Tensor zeros(SymIntArrayRef size, const TensorOptions& o = {});
Tensor ones(SymIntArrayRef size, const TensorOptions& o = {});
// dtype from the value when not given: bool, int64 or the default float (as torch.full).
Tensor full(SymIntArrayRef size, const Scalar& value, const TensorOptions& o = {});
Tensor scalar_tensor(const Scalar& value, const TensorOptions& o = {});
// *_like: same size, dtype and device as `t` unless options say otherwise (contiguous).
Tensor empty_like(const Tensor& t, std::optional<TensorOptions> o = std::nullopt);
Tensor zeros_like(const Tensor& t, std::optional<TensorOptions> o = std::nullopt);
Tensor ones_like(const Tensor& t, std::optional<TensorOptions> o = std::nullopt);
Tensor full_like(const Tensor& t, const Scalar& value, std::optional<TensorOptions> o = std::nullopt);
Tensor rand_like(const Tensor& t, std::optional<TensorOptions> o = std::nullopt);
Tensor randn_like(const Tensor& t, std::optional<TensorOptions> o = std::nullopt);

// arange: int64 when start/end/step are all integral, else the default float.
Tensor arange(const Scalar& end, const TensorOptions& o = {});
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1, const TensorOptions& o = {});
Tensor linspace(const Scalar& start, const Scalar& end, int64_t steps, const TensorOptions& o = {});
Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, const TensorOptions& o = {});
// [2, n] (row, col) coordinates of a row x col matrix's triangle on/below (above) diagonal offset;
// int64 unless o says int32.
Tensor tril_indices(int64_t row, int64_t col, int64_t offset = 0, const TensorOptions& o = {});
Tensor triu_indices(int64_t row, int64_t col, int64_t offset = 0, const TensorOptions& o = {});

Tensor rand(SymIntArrayRef size, const TensorOptions& o = {}, Generator* gen = nullptr);
Tensor randn(SymIntArrayRef size, const TensorOptions& o = {}, Generator* gen = nullptr);
// Integers uniform in [low, high); int64 by default.
Tensor randint(int64_t low, int64_t high, SymIntArrayRef size, const TensorOptions& o = {},
               Generator* gen = nullptr);
Tensor randint(int64_t high, SymIntArrayRef size, const TensorOptions& o = {}, Generator* gen = nullptr);
Tensor randperm(int64_t n, const TensorOptions& o = {}, Generator* gen = nullptr);
Tensor& normal_(Tensor& t, double mean = 0, double std = 1, Generator* gen = nullptr);
Tensor& uniform_(Tensor& t, double from = 0, double to = 1, Generator* gen = nullptr);
Tensor bernoulli(const Tensor& p, Generator* gen = nullptr);

// From C++ data (copied). The dtype follows T (float → float32, double → float64,
// int64_t → int64, int → int32, bool → bool, ...) unless options give another.
template <class T>
Tensor tensor(const std::vector<T>& data, SymIntArrayRef size, const TensorOptions& o = {});
template <class T>
Tensor tensor(const std::vector<T>& data, const TensorOptions& o = {}) {
  return tensor<T>(data, {static_cast<int64_t>(data.size())}, o);
}
template <class T>
Tensor tensor(std::initializer_list<T> data, const TensorOptions& o = {}) {
  return tensor<T>(std::vector<T>(data), o);
}
// A 0-d tensor.
Tensor tensor(const Scalar& value, const TensorOptions& o = {});
// Wraps memory the caller owns (no copy). `deleter`, if given, runs when the
// last tensor using the memory dies.
Tensor from_blob(void* data, SymIntArrayRef size, const TensorOptions& o = {},
                 std::function<void(void*)> deleter = nullptr);
Tensor from_blob(void* data, SymIntArrayRef size, SymIntArrayRef strides, const TensorOptions& o = {},
                 std::function<void(void*)> deleter = nullptr);

}  // namespace kiln
