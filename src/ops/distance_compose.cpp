// The distances and norms of include/kiln/ops/nn_loss_extra.h (cosine_similarity, pairwise_distance,
// cdist, normalize, local_response_norm, instance_norm) as compositions of kiln ops, written as
// torch 1.13's composite kernels and Python functions are so their gradients match torch's.
#include <cmath>

#include "kiln/autograd.h"
#include "kiln/ops/nn_loss_extra.h"
#include "ops/nn_util.h"

namespace kiln {

using namespace nn_detail;

namespace {

// value max(w, lo), gradient that of w: torch's in-place clamp under no_grad.
Tensor clamp_min_straight_through(const Tensor& w, double lo) { return w + (clamp_min(w, lo) - w).detach(); }

}  // namespace

Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim, double eps) {
  const char* op = "cosine_similarity";
  KILN_CHECK(x1.defined() && x2.defined(), op, ": x1 and x2 must be defined");
  Tensor both[] = {x1, x2};
  DType ct = result_type(both);
  KILN_CHECK(is_floating_point(ct), op, ": expected common dtype to be floating point, yet common dtype is ", ct);
  Shape s = broadcast_shapes(x1.sizes(), x2.sizes(), op);
  int64_t d = wrap_dim(dim, static_cast<int64_t>(s.size()), op);
  Tensor a = expand(x1.to(ct), s), b = expand(x2.to(ct), s);
  // torch divides each input by max(||x||, eps), clamping the norm in place under no_grad, so the
  // norm's backward sees the clamped value: sqrt of the straight-through clamped square has
  // exactly that gradient, x / max(||x||, eps).
  auto unit = [&](const Tensor& x) {
    Tensor w = sum(x * x, {d}, true);
    return x / sqrt(clamp_min_straight_through(w, eps * eps));
  };
  return sum(unit(a) * unit(b), {d});
}

Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p, double eps, bool keepdim) {
  const char* op = "pairwise_distance";
  KILN_CHECK(x1.defined() && x2.defined(), op, ": x1 and x2 must be defined");
  broadcast_shapes(x1.sizes(), x2.sizes(), op);
  int64_t out_dim = std::max(x1.dim(), x2.dim());
  return norm(x1 - x2 + eps, p, {out_dim - 1}, keepdim);
}

Tensor cdist(const Tensor& x1, const Tensor& x2, double p) {
  const char* op = "cdist";
  KILN_CHECK(x1.defined() && x2.defined(), op, ": x1 and x2 must be defined");
  KILN_CHECK(x1.dim() >= 2, op, ": cdist only supports at least 2D tensors, X1 got: ", x1.dim(), "D");
  KILN_CHECK(x2.dim() >= 2, op, ": cdist only supports at least 2D tensors, X2 got: ", x2.dim(), "D");
  int64_t m = x1.sizes().back();
  KILN_CHECK(m == x2.sizes().back(), op, ": X1 and X2 must have the same number of columns. X1: ", m,
             " X2: ", x2.sizes().back());
  KILN_CHECK(is_floating_point(x1.dtype()), op, ": cdist only supports floating-point dtypes, X1 got: ", x1.dtype());
  KILN_CHECK(is_floating_point(x2.dtype()), op, ": cdist only supports floating-point dtypes, X2 got: ", x2.dtype());
  KILN_CHECK(x1.dtype() == x2.dtype(), op, ": expected X1 and X2 of the same dtype, got ", x1.dtype(), " and ",
             x2.dtype());
  KILN_CHECK(p >= 0, op, ": cdist only supports non-negative p values, got ", p);
  IntArrayRef s1 = x1.sizes(), s2 = x2.sizes();
  Shape batch = broadcast_shapes(IntArrayRef(s1.data(), s1.size() - 2), IntArrayRef(s2.data(), s2.size() - 2), op);
  Shape out = batch;
  out.push_back(s1[s1.size() - 2]);
  out.push_back(s2[s2.size() - 2]);
  if (m == 0) return zeros(out, TensorOptions(x1.dtype()).device(x1.device())) + (sum(x1) + sum(x2)) * 0.0;
  // diff [*, P, R, M]; norm's gradient is 0 at a zero distance, as torch's cdist backward.
  Tensor diff = unsqueeze(x1, -2) - unsqueeze(x2, -3);
  return norm(diff, p, {-1});
}

Tensor normalize(const Tensor& input, double p, int64_t dim, double eps) {
  const char* op = "normalize";
  KILN_CHECK(input.defined(), op, ": input must be defined");
  int64_t d = wrap_dim(dim, input.dim(), op);
  return input / expand_as(clamp_min(norm(input, p, {d}, true), eps), input);
}

Tensor local_response_norm(const Tensor& input, int64_t size, double alpha, double beta, double k) {
  const char* op = "local_response_norm";
  KILN_CHECK(input.defined(), op, ": input must be defined");
  KILN_CHECK(input.dim() >= 3, op, ": Expected 3D or higher dimensionality input (got ", input.dim(), " dimensions)");
  KILN_CHECK(size > 0, op, ": size must be positive, got ", size);
  if (input.numel() == 0) return input;
  const int64_t nd = input.dim(), C = input.sizes()[1];
  // torch's avg_pool over `size` channels, zero-padded (size/2 before, (size-1)/2 after) and
  // divided by size: the sum of `size` shifted channel windows.
  std::vector<int64_t> pads(static_cast<size_t>(2 * (nd - 1)), 0);
  pads[pads.size() - 2] = size / 2;
  pads[pads.size() - 1] = (size - 1) / 2;
  Tensor sq = pad(input * input, pads);
  Tensor acc = narrow(sq, 1, 0, C);
  for (int64_t j = 1; j < size; ++j) acc = acc + narrow(sq, 1, j, C);
  Tensor div = pow(acc * (alpha / static_cast<double>(size)) + k, Scalar(beta));
  return input / div;
}

Tensor instance_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                     const Tensor& bias, bool use_input_stats, double momentum, double eps) {
  const char* op = "instance_norm";
  KILN_CHECK(input.defined(), op, ": input must be defined");
  KILN_CHECK(input.dim() >= 2, op, ": expected input of shape [N, C, *], got shape ", shape_str(input.sizes()));
  const int64_t N = input.sizes()[0], C = input.sizes()[1];
  if (use_input_stats) {
    int64_t spatial = 1;
    for (int64_t i = 2; i < input.dim(); ++i) spatial *= input.sizes()[i];
    KILN_CHECK(spatial != 1, op, ": Expected more than 1 spatial element when training, got input size ",
               shape_str(input.sizes()));
  } else {
    KILN_CHECK(running_mean.defined() && running_var.defined(), op,
               ": Expected running_mean and running_var to be defined when use_input_stats is false");
  }
  const char* names[] = {"running_mean", "running_var", "weight", "bias"};
  const Tensor* given[] = {&running_mean, &running_var, &weight, &bias};
  Tensor per_sample[4];
  for (int i = 0; i < 4; ++i) {
    const Tensor& t = *given[i];
    if (!t.defined()) continue;
    KILN_CHECK(t.dim() == 1 && t.sizes()[0] == C, op, ": expected ", names[i], " of shape [", C, "], got shape ",
               shape_str(t.sizes()));
    per_sample[i] = repeat(t, {N});  // [N*C]: batch_norm updates these copies
  }
  std::vector<int64_t> shape = input.sizes().vec();
  shape[0] = 1;
  shape[1] = N * C;
  Tensor out = batch_norm(reshape(contiguous(input), shape), per_sample[0], per_sample[1], per_sample[2], per_sample[3],
                          use_input_stats, momentum, eps);
  // The running stats become the batch mean of the per-sample updates (torch writes them through an alias).
  for (int i = 0; i < 2; ++i) {
    if (!given[i]->defined()) continue;
    NoGradGuard no_grad;
    Tensor target = *given[i];
    target.copy_(mean(reshape(per_sample[i], {N, C}), {0}));
  }
  return reshape(out, input.sizes().vec());
}

}  // namespace kiln
