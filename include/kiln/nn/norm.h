// BatchNorm1d/2d, LayerNorm, GroupNorm, RMSNorm with torch's parameter and buffer names.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "kiln/nn/module.h"

namespace kiln::nn {

// Buffers running_mean (0), running_var (1), num_batches_tracked (int64 0-d). momentum=nullopt
// uses the cumulative moving average (1/num_batches_tracked), as torch.
class BatchNorm : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  void reset_running_stats();
  void reset_parameters();
  int64_t num_features;
  double eps;
  std::optional<double> momentum;
  bool affine, track_running_stats;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 protected:
  BatchNorm(const char* type_name, int64_t expected_dim_lo, int64_t expected_dim_hi, int64_t num_features,
            double eps, std::optional<double> momentum, bool affine, bool track_running_stats);
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
  explicit LayerNorm(IntArrayRef normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
                     bool bias = true);
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

}  // namespace kiln::nn
