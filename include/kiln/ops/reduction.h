// Reductions. `dim` lists may be empty (reduce every dimension) and may hold
// negative indices; keepdim keeps reduced dimensions with size 1.
#pragma once
#include <optional>
#include <string>
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
// torch.max(input, other) / torch.min(input, other): the elementwise maximum / minimum.
Tensor max(const Tensor& x, const Tensor& other);
Tensor min(const Tensor& x, const Tensor& other);
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
// The running max/min and the index where it was reached (the last index on ties;
// a NaN takes over and stays, each later NaN taking its index).
std::tuple<Tensor, Tensor> cummax(const Tensor& x, int64_t dim);  // values, indices
std::tuple<Tensor, Tensor> cummin(const Tensor& x, int64_t dim);
Tensor logcumsumexp(const Tensor& x, int64_t dim);
// NaNs count as zero (nansum) or are left out (nanmean: NaN where every value is NaN).
Tensor nansum(const Tensor& x, std::optional<DType> dtype = std::nullopt);
Tensor nansum(const Tensor& x, IntArrayRef dim, bool keepdim = false, std::optional<DType> dtype = std::nullopt);
Tensor nanmean(const Tensor& x, std::optional<DType> dtype = std::nullopt);
Tensor nanmean(const Tensor& x, IntArrayRef dim, bool keepdim = false, std::optional<DType> dtype = std::nullopt);
Tensor count_nonzero(const Tensor& x, IntArrayRef dim = {});  // int64; NaN counts as non-zero
Tensor count_nonzero(const Tensor& x, int64_t dim);
std::tuple<Tensor, Tensor> aminmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt,
                                   bool keepdim = false);  // min, max
// Order statistics. median/nanmedian give the lower of the two middle values; with
// a dim they return (values, indices). A NaN makes median NaN; nanmedian skips NaNs.
// Among equal values, the index is that of the k-th in stable sorted order.
Tensor median(const Tensor& x);
std::tuple<Tensor, Tensor> median(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor nanmedian(const Tensor& x);
std::tuple<Tensor, Tensor> nanmedian(const Tensor& x, int64_t dim, bool keepdim = false);
// The k-th smallest (k from 1; NaN sorts largest).
std::tuple<Tensor, Tensor> kthvalue(const Tensor& x, int64_t k, int64_t dim = -1, bool keepdim = false);
// The most frequent value (the smallest on ties) and the last index holding it; NaNs count as equal.
std::tuple<Tensor, Tensor> mode(const Tensor& x, int64_t dim = -1, bool keepdim = false);
// q in [0, 1]; a 1-D q puts its length first in the output. dim absent: over every
// element. interpolation: linear, lower, higher, midpoint or nearest. float32/float64 only.
Tensor quantile(const Tensor& x, double q, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
                const std::string& interpolation = "linear");
Tensor quantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
                const std::string& interpolation = "linear");
Tensor nanquantile(const Tensor& x, double q, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
                   const std::string& interpolation = "linear");
Tensor nanquantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
                   const std::string& interpolation = "linear");

}  // namespace kiln
