// nn::functional, as torch.nn.functional: the stateless form of every layer, with torch.nn.functional's
// argument order (which differs from the aten op for embedding and embedding_bag).
#pragma once
#include <optional>
#include <string>
#include <tuple>

#include "kiln/ops/activation.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/pointwise.h"
#include "kiln/ops/shape.h"

namespace kiln::nn::functional {

using kiln::adaptive_avg_pool1d;
using kiln::adaptive_avg_pool2d;
using kiln::adaptive_avg_pool3d;
using kiln::adaptive_max_pool1d;
using kiln::adaptive_max_pool1d_with_indices;
using kiln::adaptive_max_pool2d;
using kiln::adaptive_max_pool2d_with_indices;
using kiln::adaptive_max_pool3d;
using kiln::adaptive_max_pool3d_with_indices;
using kiln::affine_grid;
using kiln::alpha_dropout;
using kiln::avg_pool1d;
using kiln::avg_pool2d;
using kiln::avg_pool3d;
using kiln::batch_norm;
using kiln::binary_cross_entropy;
using kiln::binary_cross_entropy_with_logits;
using kiln::cdist;
using kiln::celu;
using kiln::celu_;
using kiln::channel_shuffle;
using kiln::conv1d;
using kiln::conv2d;
using kiln::conv3d;
using kiln::conv_transpose1d;
using kiln::conv_transpose2d;
using kiln::conv_transpose3d;
using kiln::cosine_embedding_loss;
using kiln::cosine_similarity;
using kiln::cross_entropy;
using kiln::ctc_loss;
using kiln::dropout2d;
using kiln::dropout;
using kiln::elu;
using kiln::elu_;
using kiln::feature_alpha_dropout;
using kiln::fractional_max_pool2d;
using kiln::fractional_max_pool2d_with_indices;
using kiln::gaussian_nll_loss;
using kiln::gelu;
using kiln::glu;
using kiln::grid_sample;
using kiln::group_norm;
using kiln::gumbel_softmax;
using kiln::hardshrink;
using kiln::hardsigmoid;
using kiln::hardswish;
using kiln::hardtanh;
using kiln::hardtanh_;
using kiln::hinge_embedding_loss;
using kiln::huber_loss;
using kiln::instance_norm;
using kiln::interpolate;
using kiln::kl_div;
using kiln::l1_loss;
using kiln::layer_norm;
using kiln::leaky_relu;
using kiln::leaky_relu_;
using kiln::linear;
using kiln::local_response_norm;
using kiln::log_softmax;
using kiln::logsigmoid;
using kiln::margin_ranking_loss;
using kiln::max_pool1d;
using kiln::max_pool1d_with_indices;
using kiln::max_pool2d;
using kiln::max_pool2d_with_indices;
using kiln::max_pool3d;
using kiln::max_pool3d_with_indices;
using kiln::max_unpool2d;
using kiln::mish;
using kiln::mse_loss;
using kiln::multi_margin_loss;
using kiln::multilabel_margin_loss;
using kiln::multilabel_soft_margin_loss;
using kiln::nll_loss;
using kiln::normalize;
using kiln::one_hot;
using kiln::pad;
using kiln::pairwise_distance;
using kiln::pixel_shuffle;
using kiln::pixel_unshuffle;
using kiln::poisson_nll_loss;
using kiln::prelu;
using kiln::relu;
using kiln::rms_norm;
using kiln::rrelu;
using kiln::scaled_dot_product_attention;
using kiln::selu;
using kiln::selu_;
using kiln::sigmoid;
using kiln::silu;
using kiln::smooth_l1_loss;
using kiln::soft_margin_loss;
using kiln::softmax;
using kiln::softmin;
using kiln::softplus;
using kiln::softshrink;
using kiln::softsign;
using kiln::tanh;
using kiln::tanhshrink;
using kiln::triplet_margin_loss;

// The activations' `inplace` forms, as torch.nn.functional: inplace = true writes into x (which
// shares its impl with the caller's tensor) and returns it.
Tensor hardtanh(const Tensor& x, const Scalar& min_val, const Scalar& max_val, bool inplace);
Tensor leaky_relu(const Tensor& x, const Scalar& negative_slope, bool inplace);
Tensor elu(const Tensor& x, const Scalar& alpha, bool inplace);
Tensor selu(const Tensor& x, bool inplace);
Tensor celu(const Tensor& x, const Scalar& alpha, bool inplace);
Tensor hardsigmoid(const Tensor& x, bool inplace);
Tensor hardswish(const Tensor& x, bool inplace);
Tensor mish(const Tensor& x, bool inplace);
// F.relu6 = hardtanh(x, 0, 6), as torch: one op, no gradient at 0 and 6, a NaN passes it.
Tensor relu6(const Tensor& x, bool inplace = false);
// F.bilinear: y = x1ᵀ A x2 + b over the last dimension; weight [out, in1, in2].
Tensor bilinear(const Tensor& x1, const Tensor& x2, const Tensor& weight, const Tensor& bias = {});
// F.embedding(input, weight, padding_idx, max_norm, norm_type): torch.nn.functional's order. Given
// max_norm, the rows of weight that input refers to are renormalised IN PLACE (under no_grad) to a
// norm_type-norm of at most max_norm before the lookup, as torch.
Tensor embedding(const Tensor& input, const Tensor& weight, std::optional<int64_t> padding_idx = std::nullopt,
                 std::optional<double> max_norm = std::nullopt, double norm_type = 2.0);
Tensor embedding_bag(const Tensor& input, const Tensor& weight, const Tensor& offsets = {},
                     const std::string& mode = "mean", const Tensor& per_sample_weights = {},
                     bool include_last_offset = false, std::optional<int64_t> padding_idx = std::nullopt);

// F.lp_pool1d / F.lp_pool2d: (sum of x^p over each window)^(1/p), torch's formula
// (avg_pool of x^p times the kernel size, sign(out) * relu(|out|)); stride {} = kernel_size.
Tensor lp_pool1d(const Tensor& x, double norm_type, IntArrayRef kernel_size, IntArrayRef stride = {},
                 bool ceil_mode = false);
Tensor lp_pool2d(const Tensor& x, double norm_type, IntArrayRef kernel_size, IntArrayRef stride = {},
                 bool ceil_mode = false);
// F.unfold (im2col): [N, C, H, W] or [C, H, W] -> [N, C*kH*kW, L] or [C*kH*kW, L].
Tensor unfold(const Tensor& x, IntArrayRef kernel_size, IntArrayRef dilation = 1, IntArrayRef padding = 0,
              IntArrayRef stride = 1);
// F.fold (col2im), unfold's adjoint: overlapping blocks are summed.
Tensor fold(const Tensor& x, IntArrayRef output_size, IntArrayRef kernel_size, IntArrayRef dilation = 1,
            IntArrayRef padding = 0, IntArrayRef stride = 1);

// F.multi_head_attention_forward, torch's arguments in torch's order, for inputs [L, N, E]
// (sequence first) or unbatched [L, E]; returns (output, weights). static_k/static_v replace the
// projected keys/values ([N*num_heads, S, head_dim]). is_causal without attn_mask builds the
// causal mask (torch requires the mask as well).
std::tuple<Tensor, Tensor> multi_head_attention_forward(
    const Tensor& query, const Tensor& key, const Tensor& value, int64_t embed_dim_to_check, int64_t num_heads,
    const Tensor& in_proj_weight, const Tensor& in_proj_bias, const Tensor& bias_k, const Tensor& bias_v,
    bool add_zero_attn, double dropout_p, const Tensor& out_proj_weight, const Tensor& out_proj_bias,
    bool training = true, const Tensor& key_padding_mask = {}, bool need_weights = true, const Tensor& attn_mask = {},
    bool use_separate_proj_weight = false, const Tensor& q_proj_weight = {}, const Tensor& k_proj_weight = {},
    const Tensor& v_proj_weight = {}, const Tensor& static_k = {}, const Tensor& static_v = {},
    bool average_attn_weights = true, bool is_causal = false);

}  // namespace kiln::nn::functional
