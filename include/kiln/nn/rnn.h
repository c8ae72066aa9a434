// RNN, LSTM, GRU and RNNCell, LSTMCell, GRUCell, as torch.nn: arguments in torch's order, torch's
// gate order (LSTM i, f, g, o; GRU r, z, n), parameter names (weight_ih_l0, ..._reverse) and init
// (every weight and bias U(-1/√hidden_size, 1/√hidden_size)), so a PyTorch state_dict loads.
//
//   nn::LSTM lstm({.input_size = 8, .hidden_size = 16, .num_layers = 2, .batch_first = true});
//   auto [out, hc] = lstm.forward(x);        // x [N, T, 8]; out [N, T, 16]
//   auto [h_n, c_n] = hc;                    // [2, N, 16] each
//
// Written with kiln ops (linear, sigmoid, tanh, where, stack, cat), so autograd and compile see
// ordinary op graphs. Variable-length batches: a PackedSequence (utils::rnn::pack_padded_sequence),
// as torch, or a padded batch with forward's `lengths` (see RNNBase::run). Packing reads the
// lengths on the host (a graph break under compile, as in torch); `lengths` reads no values while
// compiling, so a padded batch compiles into one graph. kiln::compile(lstm) gives a module whose
// forward returns what LSTM's does.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/nn/module.h"

namespace kiln::nn {

namespace utils::rnn {

// torch.nn.utils.rnn.PackedSequence: the valid steps of a batch of sequences, time-major, the
// longest sequence first at each step.
struct PackedSequence {
  Tensor data;              // [sum(lengths), *]
  Tensor batch_sizes;       // int64 [T_max] (CPU): how many sequences are still running at each step
  Tensor sorted_indices;    // int64 [N]: batch index of each packed column; undefined = identity
  Tensor unsorted_indices;  // its inverse; undefined = identity
};

// input [T, N, *] ([N, T, *] with batch_first), lengths int64 [N] with every value in [1, T];
// enforce_sorted requires decreasing lengths, otherwise the batch is sorted (stably).
PackedSequence pack_padded_sequence(const Tensor& input, const Tensor& lengths, bool batch_first = false,
                                    bool enforce_sorted = true);
// (padded [T, N, *] or [N, T, *], lengths int64 [N]) in the original batch order; T = total_length
// when given (at least the longest length).
std::tuple<Tensor, Tensor> pad_packed_sequence(const PackedSequence& sequence, bool batch_first = false,
                                               double padding_value = 0.0,
                                               std::optional<int64_t> total_length = std::nullopt);

}  // namespace utils::rnn

// Options in torch's argument order, for designated initializers.
struct RNNOptions {
  int64_t input_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 1;
  std::string nonlinearity = "tanh";  // "tanh" | "relu"
  bool bias = true;
  bool batch_first = false;
  double dropout = 0.0;  // between layers, in training mode only
  bool bidirectional = false;
};

struct LSTMOptions {
  int64_t input_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = false;
  double dropout = 0.0;
  bool bidirectional = false;
  int64_t proj_size = 0;  // > 0: h = W_hr (o * tanh(c)), h has proj_size features
};

struct GRUOptions {
  int64_t input_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = false;
  double dropout = 0.0;
  bool bidirectional = false;
};

// The shared part of RNN, LSTM and GRU (torch's RNNBase). Parameters per layer and direction, in
// torch's order: weight_ih_l{k}[_reverse] [G*H, in], weight_hh_l{k} [G*H, H_out], bias_ih_l{k},
// bias_hh_l{k} [G*H], weight_hr_l{k} [proj_size, H] (LSTM with proj_size); G = 1, 4, 3 for RNN,
// LSTM, GRU; H_out = proj_size or hidden_size; a later layer's input is D * H_out wide.
class RNNBase : public Module {
 public:
  enum class Mode { RNN_TANH, RNN_RELU, LSTM, GRU };

  std::string extra_repr() const override;
  void reset_parameters();
  // The parameters of layer `layer`, direction `reverse`, in torch's order (undefined when absent).
  struct LayerWeights {
    Tensor w_ih, w_hh, b_ih, b_hh, w_hr;
  };
  const LayerWeights& weights(int64_t layer, bool reverse) const;
  // What forward reads (torch's all_weights): layer-major, the forward direction first. The
  // handles are the registered parameters.
  std::vector<LayerWeights> all_weights;

  Mode mode;
  int64_t input_size, hidden_size, num_layers;
  bool bias, batch_first;
  double dropout;
  bool bidirectional;
  int64_t proj_size;

 protected:
  RNNBase(const char* type_name, Mode mode, int64_t input_size, int64_t hidden_size, int64_t num_layers, bool bias,
          bool batch_first, double dropout, bool bidirectional, int64_t proj_size);
  // Runs every layer over the sequence. input [T, N, in] ([N, T, in] with batch_first) or
  // unbatched [T, in]; hx / cx [L*D, N, H_out] / [L*D, N, H] ([L*D, H_*] unbatched), undefined =
  // zeros; cx is used by LSTM only. `lengths` (int64 [N], each in [1, T]), when given, makes a
  // padded batch behave as torch's pack_padded_sequence → module → pad_packed_sequence: steps at
  // t >= lengths[n] leave sequence n's state alone and output zeros, the reverse direction starts
  // at each sequence's last valid step, and h_n / c_n are the states after the last valid step.
  // Returns (output, h_n, c_n); c_n undefined unless LSTM.
  std::tuple<Tensor, Tensor, Tensor> run(const Tensor& input, const Tensor& hx, const Tensor& cx,
                                         const Tensor& lengths);
  // A PackedSequence in, one with the same batch_sizes and order out: unpacked, run with lengths,
  // packed again. h_n / c_n in the original batch order, as torch.
  std::tuple<utils::rnn::PackedSequence, Tensor, Tensor> run_packed(const utils::rnn::PackedSequence& input,
                                                                    const Tensor& hx, const Tensor& cx);
};

class RNN : public RNNBase {
 public:
  RNN(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, const std::string& nonlinearity = "tanh",
      bool bias = true, bool batch_first = false, double dropout = 0.0, bool bidirectional = false);
  explicit RNN(const RNNOptions& o);
  // (output, h_n): output [T, N, D*H] ([N, T, D*H] with batch_first, [T, D*H] unbatched), h_n [L*D, N, H].
  std::tuple<Tensor, Tensor> forward(const Tensor& input, const Tensor& hx = {}, const Tensor& lengths = {});
  std::tuple<Tensor, Tensor> operator()(const Tensor& input, const Tensor& hx = {}, const Tensor& lengths = {}) {
    return forward(input, hx, lengths);
  }
  std::tuple<utils::rnn::PackedSequence, Tensor> forward(const utils::rnn::PackedSequence& input,
                                                         const Tensor& hx = {});
  std::string nonlinearity;
};

class LSTM : public RNNBase {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, bool bias = true, bool batch_first = false,
       double dropout = 0.0, bool bidirectional = false, int64_t proj_size = 0);
  explicit LSTM(const LSTMOptions& o);
  // (output, (h_n, c_n)); hx = (h_0, c_0), either undefined = zeros. output's last dim is D*H_out,
  // h_n [L*D, N, H_out], c_n [L*D, N, H].
  std::tuple<Tensor, std::tuple<Tensor, Tensor>> forward(const Tensor& input, const std::tuple<Tensor, Tensor>& hx = {},
                                                         const Tensor& lengths = {});
  std::tuple<Tensor, std::tuple<Tensor, Tensor>> operator()(const Tensor& input,
                                                            const std::tuple<Tensor, Tensor>& hx = {},
                                                            const Tensor& lengths = {}) {
    return forward(input, hx, lengths);
  }
  std::tuple<utils::rnn::PackedSequence, std::tuple<Tensor, Tensor>> forward(const utils::rnn::PackedSequence& input,
                                                                             const std::tuple<Tensor, Tensor>& hx = {});
};

class GRU : public RNNBase {
 public:
  GRU(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, bool bias = true, bool batch_first = false,
      double dropout = 0.0, bool bidirectional = false);
  explicit GRU(const GRUOptions& o);
  std::tuple<Tensor, Tensor> forward(const Tensor& input, const Tensor& hx = {}, const Tensor& lengths = {});
  std::tuple<Tensor, Tensor> operator()(const Tensor& input, const Tensor& hx = {}, const Tensor& lengths = {}) {
    return forward(input, hx, lengths);
  }
  std::tuple<utils::rnn::PackedSequence, Tensor> forward(const utils::rnn::PackedSequence& input,
                                                         const Tensor& hx = {});
};

// ---- single steps: input [N, input_size] or unbatched [input_size]; hx undefined = zeros ----
// Parameters weight_ih [G*H, in], weight_hh [G*H, H], bias_ih, bias_hh [G*H]; same init as above.
class RNNCellBase : public Module {
 public:
  std::string extra_repr() const override;
  void reset_parameters();
  int64_t input_size, hidden_size;
  bool bias;
  Tensor weight_ih, weight_hh, bias_ih, bias_hh;

 protected:
  RNNCellBase(const char* type_name, int64_t input_size, int64_t hidden_size, bool bias, int64_t num_chunks);
  // The input and hidden states made 2-D (unbatched ones unsqueezed), after torch's checks;
  // undefined states become zeros. Returns whether the input was batched.
  bool prepare(Tensor& x, std::vector<Tensor*> states) const;
};

class RNNCell : public RNNCellBase {
 public:
  RNNCell(int64_t input_size, int64_t hidden_size, bool bias = true, const std::string& nonlinearity = "tanh");
  Tensor forward(const Tensor& input) override { return forward(input, Tensor()); }
  Tensor forward(const Tensor& input, const Tensor& hx);
  Tensor operator()(const Tensor& input, const Tensor& hx = {}) { return forward(input, hx); }
  std::string extra_repr() const override;
  std::string nonlinearity;
};

class LSTMCell : public RNNCellBase {
 public:
  LSTMCell(int64_t input_size, int64_t hidden_size, bool bias = true);
  // (h', c'); hx = (h, c), either undefined = zeros.
  std::tuple<Tensor, Tensor> forward(const Tensor& input, const std::tuple<Tensor, Tensor>& hx = {});
  std::tuple<Tensor, Tensor> operator()(const Tensor& input, const std::tuple<Tensor, Tensor>& hx = {}) {
    return forward(input, hx);
  }
};

class GRUCell : public RNNCellBase {
 public:
  GRUCell(int64_t input_size, int64_t hidden_size, bool bias = true);
  Tensor forward(const Tensor& input) override { return forward(input, Tensor()); }
  Tensor forward(const Tensor& input, const Tensor& hx);
  Tensor operator()(const Tensor& input, const Tensor& hx = {}) { return forward(input, hx); }
};

}  // namespace kiln::nn
