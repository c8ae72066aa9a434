// Reductions. `dim` lists may be empty (reduce every dimension) and may hold
// negative indices; keepdim keeps reduced dimensions with size 1.
#pragma once
#include <optional>
#include <tuple>

#include "kiln/tensor.h"

namespace kiln {

Tensor sum(const Tensor& x, std::optional<DType> dtype = std::nullopt);
Tensor sum(const Tensor& x, IntArrayRef dim, bool keepdim = false, std::optional<DType> dtype = std::nullopt);
Tensor mean(const Tensor& x, std::optional<DType> dtype = std::nullopt);
Tensor mean(const Tensor& x, IntArrayRef dim, bool keepdim = false, std::optional<DType> dtype = std::nullopt);
Tensor prod(const Tensor& x, std::optional<DType> dtype = std::nullopt);
Tensor prod(const Tensor& x, int64_t dim, bool keepdim = false, std::optional<DType> dtype = std::nullopt);
Tensor max(const Tensor& x);
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);  // values, indices
Tensor min(const Tensor& x);
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor amax(const Tensor& x, IntArrayRef dim = {}, bool keepdim = false);
Tensor amin(const Tensor& x, IntArrayRef dim = {}, bool keepdim = false);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
// correction defaults to 1 (Bessel), as torch.var.
Tensor var(const Tensor& x, IntArrayRef dim = {}, std::optional<Scalar> correction = std::nullopt,
           bool keepdim = false);
Tensor std(const Tensor& x, IntArrayRef dim = {}, std::optional<Scalar> correction = std::nullopt,
           bool keepdim = false);
std::tuple<Tensor, Tensor> var_mean(const Tensor& x, IntArrayRef dim = {},
                                    std::optional<Scalar> correction = std::nullopt, bool keepdim = false);
std::tuple<Tensor, Tensor> std_mean(const Tensor& x, IntArrayRef dim = {},
                                    std::optional<Scalar> correction = std::nullopt, bool keepdim = false);
Tensor logsumexp(const Tensor& x, IntArrayRef dim, bool keepdim = false);
// Vector p-norm over dim (all dims when empty); p may be inf / -inf / 0.
Tensor norm(const Tensor& x, const Scalar& p = 2, IntArrayRef dim = {}, bool keepdim = false);
Tensor all(const Tensor& x);
Tensor all(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor any(const Tensor& x);
Tensor any(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);

}  // namespace kiln
