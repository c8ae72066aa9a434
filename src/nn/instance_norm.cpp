// InstanceNorm1d/2d/3d (parameters and buffers from NormBase in norm.cpp) and LocalResponseNorm:
// torch's forward rules (torch.nn.modules.instancenorm / normalization).
#include "kiln/nn/norm.h"

#include "kiln/ops/nn.h"
#include "nn/nn_util.h"

namespace kiln::nn {

using detail::py_bool;
using detail::py_float;

InstanceNorm::InstanceNorm(const char* type_name, int64_t no_batch_dim, int64_t num_features, double eps,
                           double momentum, bool affine, bool track_running_stats)
    : NormBase(type_name, num_features, eps, affine, track_running_stats),
      momentum(momentum),
      no_batch_dim_(no_batch_dim) {}

Tensor InstanceNorm::forward(const Tensor& x) {
  const std::string& name = type_name();
  KILN_CHECK(x.defined(), name, ": input is undefined");
  KILN_CHECK(x.dim() == no_batch_dim_ || x.dim() == no_batch_dim_ + 1, name, ": expected ", no_batch_dim_, "D or ",
             no_batch_dim_ + 1, "D input (got ", x.dim(), "D input)");
  int64_t feature_dim = x.dim() - no_batch_dim_;
  // torch only warns on a channel mismatch without affine parameters (the stats are per channel anyway).
  KILN_CHECK(!affine || x.sizes()[feature_dim] == num_features, name, ": expected input's size at dim=", feature_dim,
             " to match num_features (", num_features, "), but got: ", x.sizes()[feature_dim], ".");
  bool use_input_stats = is_training() || !track_running_stats;
  if (x.dim() == no_batch_dim_)
    return instance_norm(x.unsqueeze(0), running_mean, running_var, weight, bias, use_input_stats, momentum, eps)
        .squeeze(0);
  return instance_norm(x, running_mean, running_var, weight, bias, use_input_stats, momentum, eps);
}

std::string InstanceNorm::extra_repr() const {
  return std::to_string(num_features) + ", eps=" + py_float(eps) + ", momentum=" + py_float(momentum) +
         ", affine=" + py_bool(affine) + ", track_running_stats=" + py_bool(track_running_stats);
}

InstanceNorm1d::InstanceNorm1d(int64_t num_features, double eps, double momentum, bool affine, bool track_running_stats)
    : InstanceNorm("InstanceNorm1d", 2, num_features, eps, momentum, affine, track_running_stats) {}
InstanceNorm2d::InstanceNorm2d(int64_t num_features, double eps, double momentum, bool affine, bool track_running_stats)
    : InstanceNorm("InstanceNorm2d", 3, num_features, eps, momentum, affine, track_running_stats) {}
InstanceNorm3d::InstanceNorm3d(int64_t num_features, double eps, double momentum, bool affine, bool track_running_stats)
    : InstanceNorm("InstanceNorm3d", 4, num_features, eps, momentum, affine, track_running_stats) {}

LocalResponseNorm::LocalResponseNorm(int64_t size, double alpha, double beta, double k)
    : Module("LocalResponseNorm"), size(size), alpha(alpha), beta(beta), k(k) {}

Tensor LocalResponseNorm::forward(const Tensor& x) { return local_response_norm(x, size, alpha, beta, k); }

std::string LocalResponseNorm::extra_repr() const {
  return std::to_string(size) + ", alpha=" + py_float(alpha) + ", beta=" + py_float(beta) + ", k=" + py_float(k);
}

}  // namespace kiln::nn
