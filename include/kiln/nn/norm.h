// BatchNorm1d/2d, LayerNorm, GroupNorm, RMSNorm with torch's parameter and buffer names.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "kiln/nn/module.h"

namespace kiln::nn {

// torch's _NormBase, shared by BatchNorm and InstanceNorm: parameters weight (1), bias (0) when
// affine; buffers running_mean (0), running_var (1), num_batches_tracked (int64 0-d) when
// track_running_stats, else registered absent (torch's register_buffer(name, None)).
class NormBase : public Module {
 public:
  void reset_running_stats();
  void reset_parameters();
  int64_t num_features;
  double eps;
  bool affine, track_running_stats;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 protected:
  NormBase(const char* type_name, int64_t num_features, double eps, bool affine, bool track_running_stats);
};

// momentum=nullopt uses the cumulative moving average (1/num_batches_tracked), as torch.
class BatchNorm : public NormBase {
 public:
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::optional<double> momentum;

 protected:
  BatchNorm(const char* type_name, int64_t expected_dim_lo, int64_t expected_dim_hi, int64_t num_features, double eps,
            std::optional<double> momentum, bool affine, bool track_running_stats);
  int64_t dim_lo_, dim_hi_;
};

class BatchNorm1d : public BatchNorm {  // input [N, C] or [N, C, L]
 public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true);
};

class BatchNorm2d : public BatchNorm {  // input [N, C, H, W]
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true);
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(IntArrayRef normalized_shape, double eps = 1e-5, bool elementwise_affine = true, bool bias = true);
  // LayerNorm({2, 3}) would otherwise be ambiguous with the (deleted) copy constructor.
  explicit LayerNorm(std::initializer_list<int64_t> normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
                     bool bias = true)
      : LayerNorm(IntArrayRef(normalized_shape), eps, elementwise_affine, bias) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::vector<int64_t> normalized_shape;
  double eps;
  bool elementwise_affine;
  Tensor weight, bias;
};

class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  int64_t num_groups, num_channels;
  double eps;
  bool affine;
  Tensor weight, bias;
};

class RMSNorm : public Module {
 public:
  explicit RMSNorm(IntArrayRef normalized_shape, std::optional<double> eps = std::nullopt,
                   bool elementwise_affine = true);
  explicit RMSNorm(std::initializer_list<int64_t> normalized_shape, std::optional<double> eps = std::nullopt,
                   bool elementwise_affine = true)
      : RMSNorm(IntArrayRef(normalized_shape), eps, elementwise_affine) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::vector<int64_t> normalized_shape;
  std::optional<double> eps;
  bool elementwise_affine;
  Tensor weight;
};

// InstanceNorm1d/2d/3d: torch's defaults affine=false, track_running_stats=false; the same
// parameter and buffer names as BatchNorm (weight, bias, running_mean, running_var,
// num_batches_tracked, the last never counted, as torch). Unbatched input (one dim fewer) works.
class InstanceNorm : public NormBase {
 public:
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double momentum;

 protected:
  InstanceNorm(const char* type_name, int64_t no_batch_dim, int64_t num_features, double eps, double momentum,
               bool affine, bool track_running_stats);
  int64_t no_batch_dim_;  // the dims of an unbatched input
};

class InstanceNorm1d : public InstanceNorm {  // input [N, C, L] or [C, L]
 public:
  explicit InstanceNorm1d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = false,
                          bool track_running_stats = false);
};

class InstanceNorm2d : public InstanceNorm {  // input [N, C, H, W] or [C, H, W]
 public:
  explicit InstanceNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = false,
                          bool track_running_stats = false);
};

class InstanceNorm3d : public InstanceNorm {  // input [N, C, D, H, W] or [C, D, H, W]
 public:
  explicit InstanceNorm3d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = false,
                          bool track_running_stats = false);
};

// Normalisation across neighbouring channels (kiln::local_response_norm).
class LocalResponseNorm : public Module {
 public:
  explicit LocalResponseNorm(int64_t size, double alpha = 1e-4, double beta = 0.75, double k = 1.0);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  int64_t size;
  double alpha, beta, k;
};

}  // namespace kiln::nn
