// The remaining torch.nn.functional losses, distances and norms (issue 9): compositions of kiln ops,
// as torch's CompositeImplicitAutograd and Python functions are, so their gradients come from the ops
// they call (src/ops/loss_compose.cpp, src/ops/distance_compose.cpp). torch.nn.functional's names,
// argument order and defaults; reduction is "mean", "sum" or "none" (kl_div also "batchmean").
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

// ---- losses ----
// "mean" averages over every element (torch's documented pitfall); "batchmean" divides the sum by
// input.size(0). log_target: target holds log-probabilities.
Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
              bool log_target = false);
Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean", double delta = 1.0);
Tensor soft_margin_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
// input [N, C] (or [C]); target of the same shape in {0, 1}; weight [C] broadcast over the classes.
Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                                   const std::string& reduction = "mean");
Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target, double margin = 0.0,
                           const std::string& reduction = "mean");
Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target, double margin = 1.0,
                            const std::string& reduction = "mean");
// input1/input2 [N, D] with target [N], or [D] with a 0-d target; target in {1, -1}.
Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target, double margin = 0.0,
                             const std::string& reduction = "mean");
// input [N, C], [C] or 0-d; target int64 class indices [N] (or [1] / 0-d); p 1 or 2; weight [C].
Tensor multi_margin_loss(const Tensor& input, const Tensor& target, int64_t p = 1, double margin = 1.0,
                         const Tensor& weight = {}, const std::string& reduction = "mean");
// target int64 [N, C] (or [C]): each row's class indices, ended by the first -1.
Tensor multilabel_margin_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative, double margin = 1.0,
                           double p = 2, double eps = 1e-6, bool swap = false, const std::string& reduction = "mean");
Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, bool log_input = true, bool full = false,
                        double eps = 1e-8, const std::string& reduction = "mean");
// var: input's shape, input's shape without its last dim, or that with a last dim of 1; entries
// below eps are clamped for the value only (the gradient passes through, as torch's no_grad clamp).
Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var, bool full = false,
                         double eps = 1e-6, const std::string& reduction = "mean");
// log_probs [T, N, C] (or unbatched [T, C]); targets padded [N, S] or concatenated [sum(target_lengths)];
// lengths integral [N] (read on the host, src/ops/ctc_loss.cpp). "mean" divides each loss by its target
// length (at least 1) and averages. Impossible alignments give inf, or 0 with zero_infinity.
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, int64_t blank = 0, const std::string& reduction = "mean",
                bool zero_infinity = false);
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const std::vector<int64_t>& input_lengths,
                const std::vector<int64_t>& target_lengths, int64_t blank = 0, const std::string& reduction = "mean",
                bool zero_infinity = false);

// ---- distances ----
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim = 1, double eps = 1e-8);
// ||x1 - x2 + eps||_p over the last dim (x1 and x2 broadcast).
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p = 2, double eps = 1e-6, bool keepdim = false);
// x1 [*, P, M], x2 [*, R, M] -> [*, P, R], batch dims broadcast; p >= 0 (0, 1, 2, inf or any other).
Tensor cdist(const Tensor& x1, const Tensor& x2, double p = 2);

// ---- normalisation ----
// input / max(||input||_p over dim, eps).
Tensor normalize(const Tensor& input, double p = 2, int64_t dim = 1, double eps = 1e-12);
// Across channels (dim 1) of an [N, C, *] input: x / (k + alpha * avg over `size` channels of x^2)^beta.
Tensor local_response_norm(const Tensor& input, int64_t size, double alpha = 1e-4, double beta = 0.75, double k = 1.0);
// batch_norm of the input viewed as [1, N*C, *]: each sample's channels normalised on their own.
// Given running stats [C] are updated in place (the mean over the batch of the per-sample updates).
Tensor instance_norm(const Tensor& input, const Tensor& running_mean = {}, const Tensor& running_var = {},
                     const Tensor& weight = {}, const Tensor& bias = {}, bool use_input_stats = true,
                     double momentum = 0.1, double eps = 1e-5);

}  // namespace kiln
