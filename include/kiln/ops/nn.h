// Linear algebra and neural-network ops (torch.* and torch.nn.functional.*).
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "kiln/generator.h"
#include "kiln/ops/nn_loss_extra.h"  // the remaining losses, distances and norms
#include "kiln/tensor.h"

namespace kiln {

// ---- linear algebra ----
Tensor matmul(const Tensor& a, const Tensor& b);  // 1-D, 2-D, batched with broadcasting
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
Tensor addmm(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta = 1,
             const Scalar& alpha = 1);
Tensor baddbmm(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta = 1,
               const Scalar& alpha = 1);
// addbmm: beta * self + alpha * sum_i batch1[i] @ batch2[i] ([n, p]).
Tensor addbmm(const Tensor& self, const Tensor& batch1, const Tensor& batch2, const Scalar& beta = 1,
              const Scalar& alpha = 1);
// The product of 2-D matrices, multiplied in the cheapest order (torch.chain_matmul, deprecated there
// for linalg.multi_dot); one matrix is returned as a copy.
Tensor chain_matmul(const std::vector<Tensor>& matrices);
// A^n for square (batches of) matrices: the identity for n = 0, inverse(A)^-n for n < 0 (floating A).
Tensor matrix_power(const Tensor& A, int64_t n);
// torch.inverse: an alias of linalg::inv (torch 2.x's, whose errors say "linalg.inv").
Tensor inverse(const Tensor& A);
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);
// einsum("ij,ij->i", a, b): the operands as arguments, as torch.einsum.
template <class... T>
requires(sizeof...(T) > 0 && (std::is_convertible_v<const T&, const Tensor&> && ...)) Tensor
    einsum(const std::string& equation, const T&... operands) {
  return einsum(equation, std::vector<Tensor>{Tensor(operands)...});
}
Tensor outer(const Tensor& a, const Tensor& b);
Tensor dot(const Tensor& a, const Tensor& b);
Tensor vdot(const Tensor& a, const Tensor& b);  // dot (kiln has no complex dtypes to conjugate)
Tensor mv(const Tensor& mat, const Tensor& vec);
// beta * self + alpha * (mat @ vec); beta == 0 ignores self (its NaN/inf too), as torch.
Tensor addmv(const Tensor& self, const Tensor& mat, const Tensor& vec, const Scalar& beta = 1,
             const Scalar& alpha = 1);
// beta * self + alpha * outer(vec1, vec2).
Tensor addr(const Tensor& self, const Tensor& vec1, const Tensor& vec2, const Scalar& beta = 1,
            const Scalar& alpha = 1);
// Compositions of the ops above (src/ops/shape_compose.cpp).
Tensor kron(const Tensor& a, const Tensor& b);
// Contracts the last `dims` dims of a with the first `dims` of b, or dims_a[i] with dims_b[i].
Tensor tensordot(const Tensor& a, const Tensor& b, int64_t dims = 2);
Tensor tensordot(const Tensor& a, const Tensor& b, IntArrayRef dims_a, IntArrayRef dims_b);
// torch.cross: dim absent takes the first dim of size 3 (torch's deprecated default).
Tensor cross(const Tensor& a, const Tensor& b, std::optional<int64_t> dim = std::nullopt);
Tensor linalg_cross(const Tensor& a, const Tensor& b, int64_t dim = -1);  // torch.linalg.cross, broadcasting

// ---- convolution and pooling (NCHW / NCL) ----
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, IntArrayRef stride = 1,
              IntArrayRef padding = 0, IntArrayRef dilation = 1, int64_t groups = 1);
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, IntArrayRef stride = 1,
              IntArrayRef padding = 0, IntArrayRef dilation = 1, int64_t groups = 1);
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                        IntArrayRef stride = 1, IntArrayRef padding = 0, IntArrayRef output_padding = 0,
                        int64_t groups = 1, IntArrayRef dilation = 1);
Tensor max_pool2d(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride = {}, IntArrayRef padding = 0,
                  IntArrayRef dilation = 1, bool ceil_mode = false);
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, IntArrayRef kernel_size,
                                                   IntArrayRef stride = {}, IntArrayRef padding = 0,
                                                   IntArrayRef dilation = 1, bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride = {}, IntArrayRef padding = 0,
                  bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
Tensor adaptive_avg_pool2d(const Tensor& x, IntArrayRef output_size);
Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, IntArrayRef stride = 1,
              IntArrayRef padding = 0, IntArrayRef dilation = 1, int64_t groups = 1);
// String padding, as torch's: "valid" is no padding; "same" keeps the input's size (stride must
// be 1): dilation*(k-1) in all per dim, half on each side and the odd one on the right. A template
// so that 0 and {1, 1} never pick it (std::string converts from both).
template <class S>
concept PaddingString = std::is_convertible_v<const S&, std::string_view>;
namespace detail {
Tensor conv_padding_string(int64_t nd, const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
                           std::string_view padding, IntArrayRef dilation, int64_t groups);
}  // namespace detail
template <PaddingString S>
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride, const S& padding,
              IntArrayRef dilation = 1, int64_t groups = 1) {
  return detail::conv_padding_string(1, x, weight, bias, stride, padding, dilation, groups);
}
template <PaddingString S>
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride, const S& padding,
              IntArrayRef dilation = 1, int64_t groups = 1) {
  return detail::conv_padding_string(2, x, weight, bias, stride, padding, dilation, groups);
}
template <PaddingString S>
Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride, const S& padding,
              IntArrayRef dilation = 1, int64_t groups = 1) {
  return detail::conv_padding_string(3, x, weight, bias, stride, padding, dilation, groups);
}
Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                        IntArrayRef stride = 1, IntArrayRef padding = 0, IntArrayRef output_padding = 0,
                        int64_t groups = 1, IntArrayRef dilation = 1);
Tensor conv_transpose3d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                        IntArrayRef stride = 1, IntArrayRef padding = 0, IntArrayRef output_padding = 0,
                        int64_t groups = 1, IntArrayRef dilation = 1);
Tensor max_pool1d(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride = {}, IntArrayRef padding = 0,
                  IntArrayRef dilation = 1, bool ceil_mode = false);
std::tuple<Tensor, Tensor> max_pool1d_with_indices(const Tensor& x, IntArrayRef kernel_size,
                                                   IntArrayRef stride = {}, IntArrayRef padding = 0,
                                                   IntArrayRef dilation = 1, bool ceil_mode = false);
Tensor max_pool3d(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride = {}, IntArrayRef padding = 0,
                  IntArrayRef dilation = 1, bool ceil_mode = false);
std::tuple<Tensor, Tensor> max_pool3d_with_indices(const Tensor& x, IntArrayRef kernel_size,
                                                   IntArrayRef stride = {}, IntArrayRef padding = 0,
                                                   IntArrayRef dilation = 1, bool ceil_mode = false);
// torch.avg_pool1d has no divisor_override.
Tensor avg_pool1d(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride = {}, IntArrayRef padding = 0,
                  bool ceil_mode = false, bool count_include_pad = true);
Tensor avg_pool3d(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride = {}, IntArrayRef padding = 0,
                  bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
Tensor adaptive_avg_pool1d(const Tensor& x, IntArrayRef output_size);
Tensor adaptive_avg_pool3d(const Tensor& x, IntArrayRef output_size);
// Indices are flat positions within each input plane (L, H*W or D*H*W), as torch's.
Tensor adaptive_max_pool1d(const Tensor& x, IntArrayRef output_size);
Tensor adaptive_max_pool2d(const Tensor& x, IntArrayRef output_size);
Tensor adaptive_max_pool3d(const Tensor& x, IntArrayRef output_size);
std::tuple<Tensor, Tensor> adaptive_max_pool1d_with_indices(const Tensor& x, IntArrayRef output_size);
std::tuple<Tensor, Tensor> adaptive_max_pool2d_with_indices(const Tensor& x, IntArrayRef output_size);
std::tuple<Tensor, Tensor> adaptive_max_pool3d_with_indices(const Tensor& x, IntArrayRef output_size);
// Channel shuffle, max unpooling and fractional max pooling (src/ops/pooling_extra.cpp).
// (N, C, *) with C = g * k: channel c = i * k + j moves to j * g + i (ShuffleNet's shuffle).
Tensor channel_shuffle(const Tensor& x, int64_t groups);
// The inverse of max_pool2d_with_indices: x [N, C, H, W] or [C, H, W] written at its indices (flat
// positions in each output plane) of zeros [.., oH, oW]; output_size absent: (H - 1) * stride -
// 2 * padding + kernel_size per dim (stride absent: kernel_size), as torch.nn.functional's.
Tensor max_unpool2d(const Tensor& x, const Tensor& indices, IntArrayRef kernel_size, IntArrayRef stride = {},
                    IntArrayRef padding = 0, std::optional<std::vector<int64_t>> output_size = std::nullopt);
// Max pooling over pseudo-random windows of kernel_size (Graham, 2014): exactly one of output_size and
// output_ratio (output = int(input * ratio)); random_samples [N, C, 2] in [0, 1) (N = 1 for a 3-D
// input) fix the windows as torch's _random_samples does (the same samples give torch's output);
// absent, they are drawn from gen (else the device's default generator).
Tensor fractional_max_pool2d(const Tensor& x, IntArrayRef kernel_size,
                             std::optional<std::vector<int64_t>> output_size = std::nullopt,
                             std::optional<std::vector<double>> output_ratio = std::nullopt,
                             const Tensor& random_samples = {}, Generator* gen = nullptr);
std::tuple<Tensor, Tensor> fractional_max_pool2d_with_indices(
    const Tensor& x, IntArrayRef kernel_size, std::optional<std::vector<int64_t>> output_size = std::nullopt,
    std::optional<std::vector<double>> output_ratio = std::nullopt, const Tensor& random_samples = {},
    Generator* gen = nullptr);

// ---- normalisation ----
// training=true normalises with batch statistics and updates running stats in place.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = {}, const Tensor& bias = {}, bool training = false,
                  double momentum = 0.1, double eps = 1e-5);
Tensor layer_norm(const Tensor& x, IntArrayRef normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);
Tensor rms_norm(const Tensor& x, IntArrayRef normalized_shape, const Tensor& weight = {},
                std::optional<double> eps = std::nullopt);

// ---- activations and probabilities ----
Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true, Generator* gen = nullptr);
// softmin, gumbel_softmax and the dropout variants (src/ops/activation_extra.cpp).
// softmax(-x, dim, dtype).
Tensor softmin(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
// softmax((logits + g) / tau, dim) with g Gumbel(0, 1) noise; hard: the one-hot of its argmax in the
// forward, the soft sample's gradient in the backward (straight-through). torch's deprecated eps is left out.
Tensor gumbel_softmax(const Tensor& logits, double tau = 1, bool hard = false, int64_t dim = -1,
                      Generator* gen = nullptr);
// SELU-preserving dropout: dropped elements are set to SELU's negative saturation, then an affine map
// keeps mean and variance. training defaults to false, as torch.nn.functional's.
Tensor alpha_dropout(const Tensor& x, double p = 0.5, bool training = false, Generator* gen = nullptr);
// alpha_dropout with one draw per (N, C) channel (at least 2-D input).
Tensor feature_alpha_dropout(const Tensor& x, double p = 0.5, bool training = false, Generator* gen = nullptr);
// Zeroes whole channels with probability p and scales the rest by 1 / (1 - p). Input (N, C, H, W), or
// (N, C, L): a 3-D input is taken as batched 1-D channels, as PyTorch 2.x does (it warns that this
// will change; its documented shapes are these two). Other ranks, which PyTorch 2.x warns will be an
// error, are one here.
Tensor dropout2d(const Tensor& x, double p = 0.5, bool training = true, Generator* gen = nullptr);

// ---- losses; reduction: "mean", "sum" or "none" ----
Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                     int64_t ignore_index = -100, const std::string& reduction = "mean",
                     double label_smoothing = 0.0);
Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                int64_t ignore_index = -100, const std::string& reduction = "mean");
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
                      double beta = 1.0);
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                            const std::string& reduction = "mean");
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                                        const std::string& reduction = "mean",
                                        const Tensor& pos_weight = {});

// ---- attention, embeddings, resampling ----
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask = {}, double dropout_p = 0.0,
                                    bool is_causal = false, std::optional<double> scale = std::nullopt,
                                    Generator* gen = nullptr);
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx = -1);
// mode: "sum", "mean" or "max"; offsets given → 1-D input split into bags.
Tensor embedding_bag(const Tensor& weight, const Tensor& indices, const Tensor& offsets = {},
                     const std::string& mode = "mean", const Tensor& per_sample_weights = {},
                     bool include_last_offset = false, int64_t padding_idx = -1);
// [*, C*r*r, H, W] <-> [*, C, H*r, W*r] (torch.nn.functional.pixel_shuffle / pixel_unshuffle).
Tensor pixel_shuffle(const Tensor& x, int64_t upscale_factor);
Tensor pixel_unshuffle(const Tensor& x, int64_t downscale_factor);
// F.interpolate: give size or scale_factor. mode "nearest", "nearest-exact" or "area" (3-D to 5-D
// input), "linear" (3-D), "bilinear" or "bicubic" (4-D), "trilinear" (5-D); align_corners only with
// the last four.
Tensor interpolate(const Tensor& x, std::optional<std::vector<int64_t>> size,
                   std::optional<std::vector<double>> scale_factor = std::nullopt,
                   const std::string& mode = "nearest", std::optional<bool> align_corners = std::nullopt);
// F.affine_grid: theta [N, 2, 3] with size {N, C, H, W} -> grid [N, H, W, 2], or theta [N, 3, 4] with
// size {N, C, D, H, W} -> [N, D, H, W, 3] (src/ops/grid_sample.cpp).
Tensor affine_grid(const Tensor& theta, IntArrayRef size, bool align_corners = false);
// F.grid_sample: input [N, C, H, W] (or [N, C, D, H, W]) sampled at grid [N, Ho, Wo, 2] ([N, Do, Ho, Wo, 3])
// of (x, y[, z]) in [-1, 1]; mode "bilinear", "nearest" or "bicubic" (4-D only, as torch), padding_mode
// "zeros", "border" or "reflection".
Tensor grid_sample(const Tensor& input, const Tensor& grid, const std::string& mode = "bilinear",
                   const std::string& padding_mode = "zeros", bool align_corners = false);

}  // namespace kiln
