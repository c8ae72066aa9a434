// NormBase (BatchNorm's and InstanceNorm's parameters and buffers), BatchNorm1d/2d, LayerNorm,
// GroupNorm, RMSNorm: torch's parameters, buffers and forward rules.
#include "kiln/nn/norm.h"

#include "core/tensor_impl.h"
#include "kiln/autograd.h"
#include "kiln/nn/init.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/nn.h"
#include "nn/nn_util.h"

namespace kiln::nn {

using detail::py_bool;
using detail::py_float;
using detail::py_tuple;

NormBase::NormBase(const char* type_name, int64_t num_features, double eps, bool affine, bool track_running_stats)
    : Module(type_name),
      num_features(num_features),
      eps(eps),
      affine(affine),
      track_running_stats(track_running_stats) {
  KILN_CHECK(num_features > 0, type_name, ": num_features must be positive, got ", num_features);
  weight = register_parameter("weight", affine ? empty({num_features}) : Tensor());
  bias = register_parameter("bias", affine ? empty({num_features}) : Tensor());
  // Without running stats the buffers are registered absent, as torch's register_buffer(name, None).
  running_mean = register_buffer("running_mean", track_running_stats ? zeros({num_features}) : Tensor());
  running_var = register_buffer("running_var", track_running_stats ? ones({num_features}) : Tensor());
  num_batches_tracked =
      register_buffer("num_batches_tracked", track_running_stats ? zeros({}, TensorOptions(kInt64)) : Tensor());
  reset_parameters();
}

void NormBase::reset_running_stats() {
  if (!track_running_stats) return;
  NoGradGuard no_grad;
  running_mean.zero_();
  running_var.fill_(1);
  num_batches_tracked.zero_();
}

void NormBase::reset_parameters() {
  reset_running_stats();
  if (!affine) return;
  init::ones_(weight);
  init::zeros_(bias);
}

BatchNorm::BatchNorm(const char* type_name, int64_t expected_dim_lo, int64_t expected_dim_hi, int64_t num_features,
                     double eps, std::optional<double> momentum, bool affine, bool track_running_stats)
    : NormBase(type_name, num_features, eps, affine, track_running_stats),
      momentum(momentum),
      dim_lo_(expected_dim_lo),
      dim_hi_(expected_dim_hi) {}

Tensor BatchNorm::forward(const Tensor& x) {
  const std::string& name = type_name();
  KILN_CHECK(x.defined(), name, ": input is undefined");
  if (dim_lo_ == dim_hi_)
    KILN_CHECK(x.dim() == dim_lo_, name, ": expected ", dim_lo_, "D input (got ", x.dim(), "D input of shape ",
               shape_str(x.sizes()), ")");
  else
    KILN_CHECK(x.dim() >= dim_lo_ && x.dim() <= dim_hi_, name, ": expected ", dim_lo_, "D or ", dim_hi_,
               "D input (got ", x.dim(), "D input of shape ", shape_str(x.sizes()), ")");
  KILN_CHECK(x.sizes()[1] == num_features, name, ": expected input with ", num_features,
             " channels in dim 1, got shape ", shape_str(x.sizes()));

  // torch's _BatchNorm.forward: count the batch, then momentum or (momentum=None) the cumulative
  // average 1/num_batches_tracked.
  double factor = momentum.value_or(0.0);
  bool training = is_training();
  if (training && track_running_stats && num_batches_tracked.defined()) {
    {
      NoGradGuard no_grad;
      num_batches_tracked.add_(1);
    }
    if (!momentum) factor = 1.0 / static_cast<double>(num_batches_tracked.item<int64_t>());
  }
  // Batch statistics in training, and in eval mode too when there are no running stats.
  bool use_batch_stats = training || (!running_mean.defined() && !running_var.defined());
  bool pass_running = !training || track_running_stats;
  return batch_norm(x, pass_running ? running_mean : Tensor(), pass_running ? running_var : Tensor(), weight, bias,
                    use_batch_stats, factor, eps);
}

std::string BatchNorm::extra_repr() const {
  return std::to_string(num_features) + ", eps=" + py_float(eps) +
         ", momentum=" + (momentum ? py_float(*momentum) : std::string("None")) + ", affine=" + py_bool(affine) +
         ", track_running_stats=" + py_bool(track_running_stats);
}

BatchNorm1d::BatchNorm1d(int64_t num_features, double eps, std::optional<double> momentum, bool affine,
                         bool track_running_stats)
    : BatchNorm("BatchNorm1d", 2, 3, num_features, eps, momentum, affine, track_running_stats) {}

BatchNorm2d::BatchNorm2d(int64_t num_features, double eps, std::optional<double> momentum, bool affine,
                         bool track_running_stats)
    : BatchNorm("BatchNorm2d", 4, 4, num_features, eps, momentum, affine, track_running_stats) {}

LayerNorm::LayerNorm(IntArrayRef normalized_shape, double eps, bool elementwise_affine, bool bias)
    : Module("LayerNorm"), normalized_shape(normalized_shape.vec()), eps(eps), elementwise_affine(elementwise_affine) {
  KILN_CHECK(!normalized_shape.empty(), "LayerNorm: normalized_shape must have at least one dim");
  for (int64_t s : normalized_shape)
    KILN_CHECK(s >= 0, "LayerNorm: normalized_shape must be non-negative, got ", py_tuple(normalized_shape));
  weight = register_parameter("weight", elementwise_affine ? ones(normalized_shape.vec()) : Tensor());
  this->bias = register_parameter("bias", elementwise_affine && bias ? zeros(normalized_shape.vec()) : Tensor());
}

Tensor LayerNorm::forward(const Tensor& x) { return layer_norm(x, normalized_shape, weight, bias, eps); }

std::string LayerNorm::extra_repr() const {
  return py_tuple(normalized_shape) + ", eps=" + py_float(eps) + ", elementwise_affine=" + py_bool(elementwise_affine);
}

GroupNorm::GroupNorm(int64_t num_groups, int64_t num_channels, double eps, bool affine)
    : Module("GroupNorm"), num_groups(num_groups), num_channels(num_channels), eps(eps), affine(affine) {
  KILN_CHECK(num_groups > 0, "GroupNorm: num_groups must be positive, got ", num_groups);
  KILN_CHECK(num_channels % num_groups == 0, "GroupNorm: num_channels (", num_channels,
             ") must be divisible by num_groups (", num_groups, ")");
  weight = register_parameter("weight", affine ? ones({num_channels}) : Tensor());
  bias = register_parameter("bias", affine ? zeros({num_channels}) : Tensor());
}

Tensor GroupNorm::forward(const Tensor& x) {
  KILN_CHECK(x.defined() && x.dim() >= 2 && x.sizes()[1] == num_channels, "GroupNorm: expected input of shape [N, ",
             num_channels, ", *], got ", x.defined() ? shape_str(x.sizes()) : std::string("an undefined tensor"));
  return group_norm(x, num_groups, weight, bias, eps);
}

std::string GroupNorm::extra_repr() const {
  return std::to_string(num_groups) + ", " + std::to_string(num_channels) + ", eps=" + py_float(eps) +
         ", affine=" + py_bool(affine);
}

RMSNorm::RMSNorm(IntArrayRef normalized_shape, std::optional<double> eps, bool elementwise_affine)
    : Module("RMSNorm"), normalized_shape(normalized_shape.vec()), eps(eps), elementwise_affine(elementwise_affine) {
  KILN_CHECK(!normalized_shape.empty(), "RMSNorm: normalized_shape must have at least one dim");
  for (int64_t s : normalized_shape)
    KILN_CHECK(s >= 0, "RMSNorm: normalized_shape must be non-negative, got ", py_tuple(normalized_shape));
  weight = register_parameter("weight", elementwise_affine ? ones(normalized_shape.vec()) : Tensor());
}

Tensor RMSNorm::forward(const Tensor& x) { return rms_norm(x, normalized_shape, weight, eps); }

std::string RMSNorm::extra_repr() const {
  return py_tuple(normalized_shape) + ", eps=" + (eps ? py_float(*eps) : std::string("None")) +
         ", elementwise_affine=" + py_bool(elementwise_affine);
}

}  // namespace kiln::nn
