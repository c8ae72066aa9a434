// RNN, LSTM, GRU and their cells, with torch's parameter names, registration order, gate order and
// init. Each step is a few kiln ops, so autograd and compile need nothing of their own.
#include "kiln/nn/rnn.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/tensor_impl.h"
#include "kiln/compile.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/init.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/reduction.h"
#include "nn/nn_util.h"

namespace kiln::nn {

using detail::py_float;

namespace {

int64_t gate_count(RNNBase::Mode mode) {
  switch (mode) {
    case RNNBase::Mode::LSTM:
      return 4;
    case RNNBase::Mode::GRU:
      return 3;
    default:
      return 1;
  }
}

// torch's rule for every recurrent weight and bias: U(-1/√hidden_size, 1/√hidden_size).
void init_uniform_hidden(const std::vector<Tensor>& params, int64_t hidden_size) {
  double stdv = hidden_size > 0 ? 1.0 / std::sqrt(static_cast<double>(hidden_size)) : 0.0;
  for (Tensor p : params) init::uniform_(p, -stdv, stdv);
}

// One step of each kind, given the input projection gi = x W_ihᵀ + b_ih (computed for every time
// step at once by the sequence modules).
Tensor rnn_step(const Tensor& gi, const Tensor& h, const Tensor& w_hh, const Tensor& b_hh, bool relu) {
  Tensor pre = gi + linear(h, w_hh, b_hh);
  return relu ? pre.relu() : pre.tanh();
}

// Gates in torch's order i, f, g, o; with w_hr (proj_size) h' = (o * tanh(c')) W_hrᵀ.
std::tuple<Tensor, Tensor> lstm_step(const Tensor& gi, const Tensor& h, const Tensor& c, const Tensor& w_hh,
                                     const Tensor& b_hh, const Tensor& w_hr) {
  std::vector<Tensor> g = (gi + linear(h, w_hh, b_hh)).chunk(4, -1);
  Tensor c_new = g[1].sigmoid() * c + g[0].sigmoid() * g[2].tanh();
  Tensor h_new = g[3].sigmoid() * c_new.tanh();
  if (w_hr.defined()) h_new = linear(h_new, w_hr);
  return {h_new, c_new};
}

// Gates r, z, n; n = tanh(W_in x + b_in + r * (W_hn h + b_hn)), h' = (1 - z) * n + z * h.
Tensor gru_step(const Tensor& gi, const Tensor& h, const Tensor& w_hh, const Tensor& b_hh) {
  std::vector<Tensor> i = gi.chunk(3, -1);
  std::vector<Tensor> hh = linear(h, w_hh, b_hh).chunk(3, -1);
  Tensor r = (i[0] + hh[0]).sigmoid();
  Tensor z = (i[1] + hh[1]).sigmoid();
  Tensor n = (i[2] + r * hh[2]).tanh();
  return n + z * (h - n);
}

void check_common_args(const char* who, int64_t input_size, int64_t hidden_size, int64_t num_layers, double dropout) {
  KILN_CHECK(input_size >= 0, who, ": input_size must be non-negative, got ", input_size);
  KILN_CHECK(hidden_size > 0, who, ": hidden_size must be greater than zero, got ", hidden_size);
  KILN_CHECK(num_layers > 0, who, ": num_layers must be greater than zero, got ", num_layers);
  KILN_CHECK(dropout >= 0 && dropout <= 1, who,
             ": dropout should be a number in range [0, 1] representing the probability of an element being "
             "zeroed, got ",
             dropout);
}

RNNBase::Mode rnn_mode(const std::string& nonlinearity) {
  KILN_CHECK(nonlinearity == "tanh" || nonlinearity == "relu", "RNN: unknown nonlinearity '", nonlinearity,
             "'. Select from 'tanh' or 'relu'.");
  return nonlinearity == "tanh" ? RNNBase::Mode::RNN_TANH : RNNBase::Mode::RNN_RELU;
}

}  // namespace

// ---------------------------------------------------------------- PackedSequence

namespace utils::rnn {

namespace {

// Time-major padded [T, N, *] (original batch order) to the packed data of `batch_sizes` and `sorted`.
Tensor pack_data(const Tensor& padded, const std::vector<int64_t>& batch_sizes, const Tensor& sorted) {
  Tensor x = sorted.defined() ? padded.index_select(1, sorted.to(padded.device())) : padded;
  std::vector<Tensor> steps;
  for (size_t t = 0; t < batch_sizes.size(); ++t)
    steps.push_back(x.select(0, static_cast<int64_t>(t)).narrow(0, 0, batch_sizes[t]));
  return cat(steps, 0);
}

}  // namespace

PackedSequence pack_padded_sequence(const Tensor& input, const Tensor& lengths, bool batch_first, bool enforce_sorted) {
  KILN_CHECK(input.defined() && lengths.defined(), "pack_padded_sequence: input and lengths must be defined");
  KILN_CHECK(input.dim() >= 2, "pack_padded_sequence: expected input of at least 2 dimensions ([T, N, *]), got shape ",
             shape_str(input.sizes()));
  Tensor x = batch_first ? input.transpose(0, 1) : input;
  int64_t steps = x.sizes()[0], batch = x.sizes()[1];
  KILN_CHECK(lengths.dim() == 1 && lengths.sizes()[0] == batch && lengths.dtype() == kInt64,
             "pack_padded_sequence: expected int64 lengths of shape [", batch, "] for input of shape ",
             shape_str(input.sizes()), (batch_first ? " (batch_first)" : ""), ", got ", lengths.dtype(), " ",
             shape_str(lengths.sizes()));
  std::vector<int64_t> len = lengths.cpu().contiguous().to_vector<int64_t>();
  for (int64_t v : len)
    KILN_CHECK(v > 0 && v <= steps, "pack_padded_sequence: every length must be in [1, ", steps,
               "] (the sequence length of input of shape ", shape_str(input.sizes()), "), got ", v);
  std::vector<int64_t> order(static_cast<size_t>(batch));
  std::iota(order.begin(), order.end(), 0);
  PackedSequence out;
  if (enforce_sorted) {
    KILN_CHECK(std::is_sorted(len.rbegin(), len.rend()),
               "pack_padded_sequence: `lengths` array must be sorted in decreasing order when `enforce_sorted` is "
               "True; pass enforce_sorted=false to sort the batch");
  } else {
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return len[a] > len[b]; });
    std::vector<int64_t> inverse(order.size());
    for (size_t i = 0; i < order.size(); ++i) inverse[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
    out.sorted_indices = tensor(order);
    out.unsorted_indices = tensor(inverse);
  }
  std::vector<int64_t> batch_sizes;
  for (int64_t t = 0; batch > 0 && t < len[static_cast<size_t>(order[0])]; ++t) {
    int64_t running = 0;
    for (int64_t v : len) running += v > t ? 1 : 0;
    batch_sizes.push_back(running);
  }
  KILN_CHECK(!batch_sizes.empty(), "pack_padded_sequence: expected a non-empty batch, got input of shape ",
             shape_str(input.sizes()));
  out.data = pack_data(x, batch_sizes, out.sorted_indices);
  out.batch_sizes = tensor(batch_sizes);
  return out;
}

std::tuple<Tensor, Tensor> pad_packed_sequence(const PackedSequence& sequence, bool batch_first, double padding_value,
                                               std::optional<int64_t> total_length) {
  const PackedSequence& p = sequence;
  KILN_CHECK(p.data.defined() && p.batch_sizes.defined() && p.data.dim() >= 1 && p.batch_sizes.dim() == 1 &&
                 p.batch_sizes.dtype() == kInt64,
             "pad_packed_sequence: expected a PackedSequence with data and int64 1-D batch_sizes");
  std::vector<int64_t> bs = p.batch_sizes.cpu().contiguous().to_vector<int64_t>();
  int64_t steps = static_cast<int64_t>(bs.size()), batch = steps > 0 ? bs[0] : 0;
  int64_t total = 0;
  for (int64_t b : bs) total += b;
  KILN_CHECK(total == p.data.sizes()[0], "pad_packed_sequence: batch_sizes sum to ", total, " but data has shape ",
             shape_str(p.data.sizes()));
  int64_t out_steps = total_length.value_or(steps);
  KILN_CHECK(out_steps >= steps,
             "pad_packed_sequence: expected total_length to be at least the length of the longest sequence in the "
             "input, but got total_length=",
             out_steps, " and max sequence length being ", steps);
  std::vector<int64_t> row(p.data.sizes().begin() + 1, p.data.sizes().end());
  std::vector<int64_t> pad_shape = {batch};
  pad_shape.insert(pad_shape.end(), row.begin(), row.end());
  std::vector<Tensor> rows;
  int64_t offset = 0;
  for (int64_t t = 0; t < out_steps; ++t) {
    int64_t b = t < steps ? bs[static_cast<size_t>(t)] : 0;
    Tensor chunk = p.data.narrow(0, offset, b);
    offset += b;
    if (b < batch) {
      pad_shape[0] = batch - b;
      chunk = cat({chunk, full(pad_shape, padding_value, p.data.options())}, 0);
    }
    rows.push_back(chunk);
  }
  Tensor padded = stack(rows, 0);  // [T, N, *] in sorted order
  std::vector<int64_t> len(static_cast<size_t>(batch), 0);
  for (int64_t b : bs)
    for (int64_t n = 0; n < b; ++n) ++len[static_cast<size_t>(n)];
  Tensor lengths = tensor(len);
  if (p.unsorted_indices.defined()) {
    padded = padded.index_select(1, p.unsorted_indices.to(padded.device()));
    lengths = lengths.index_select(0, p.unsorted_indices.cpu());
  }
  return {batch_first ? padded.transpose(0, 1) : padded, lengths};
}

}  // namespace utils::rnn

// ---------------------------------------------------------------- RNNBase

RNNBase::RNNBase(const char* type_name, Mode mode, int64_t input_size, int64_t hidden_size, int64_t num_layers,
                 bool bias, bool batch_first, double dropout, bool bidirectional, int64_t proj_size)
    : Module(type_name),
      mode(mode),
      input_size(input_size),
      hidden_size(hidden_size),
      num_layers(num_layers),
      bias(bias),
      batch_first(batch_first),
      dropout(dropout),
      bidirectional(bidirectional),
      proj_size(proj_size) {
  check_common_args(type_name, input_size, hidden_size, num_layers, dropout);
  KILN_CHECK(proj_size >= 0, type_name, ": proj_size should be a positive integer or zero to disable projections, got ",
             proj_size);
  KILN_CHECK(proj_size < hidden_size, type_name,
             ": proj_size has to be smaller than hidden_size, got proj_size=", proj_size,
             " and hidden_size=", hidden_size);
  KILN_CHECK(proj_size == 0 || mode == Mode::LSTM, type_name,
             ": proj_size argument is only supported for LSTM, not RNN or GRU");
  // (torch also warns when dropout > 0 with one layer: there is no layer after the last to drop into.)
  int64_t gates = gate_count(mode) * hidden_size;
  int64_t h_out = proj_size > 0 ? proj_size : hidden_size;
  int64_t dirs = bidirectional ? 2 : 1;
  // torch's registration order, which is its state_dict order: per layer, per direction,
  // w_ih, w_hh, b_ih, b_hh, w_hr; without bias the bias names are not registered at all.
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    for (int64_t dir = 0; dir < dirs; ++dir) {
      std::string sfx = std::to_string(layer) + (dir == 1 ? "_reverse" : "");
      int64_t in = layer == 0 ? input_size : h_out * dirs;
      LayerWeights w;
      w.w_ih = register_parameter("weight_ih_l" + sfx, empty({gates, in}));
      w.w_hh = register_parameter("weight_hh_l" + sfx, empty({gates, h_out}));
      if (bias) {
        w.b_ih = register_parameter("bias_ih_l" + sfx, empty({gates}));
        w.b_hh = register_parameter("bias_hh_l" + sfx, empty({gates}));
      }
      if (proj_size > 0) w.w_hr = register_parameter("weight_hr_l" + sfx, empty({proj_size, hidden_size}));
      all_weights.push_back(w);
    }
  }
  reset_parameters();
}

void RNNBase::reset_parameters() { init_uniform_hidden(parameters(/*recurse=*/false), hidden_size); }

const RNNBase::LayerWeights& RNNBase::weights(int64_t layer, bool reverse) const {
  int64_t dirs = bidirectional ? 2 : 1;
  KILN_CHECK(layer >= 0 && layer < num_layers && (!reverse || bidirectional), type_name(), ": no weights for layer ",
             layer, reverse ? " (reverse)" : "", " in a ", num_layers, "-layer ",
             bidirectional ? "bidirectional" : "unidirectional", " module");
  return all_weights[static_cast<size_t>(layer * dirs + (reverse ? 1 : 0))];
}

// torch's RNNBase.extra_repr.
std::string RNNBase::extra_repr() const {
  std::string s = std::to_string(input_size) + ", " + std::to_string(hidden_size);
  if (proj_size != 0) s += ", proj_size=" + std::to_string(proj_size);
  if (num_layers != 1) s += ", num_layers=" + std::to_string(num_layers);
  if (!bias) s += ", bias=False";
  if (batch_first) s += ", batch_first=True";
  if (dropout != 0) s += ", dropout=" + py_float(dropout);
  if (bidirectional) s += ", bidirectional=True";
  return s;
}

std::tuple<Tensor, Tensor, Tensor> RNNBase::run(const Tensor& input, const Tensor& hx, const Tensor& cx,
                                                const Tensor& lengths) {
  const std::string& who = type_name();
  KILN_CHECK(input.defined(), who, ": input is undefined");
  KILN_CHECK(input.dim() == 2 || input.dim() == 3, who, ": expected input to be 2-D (unbatched) or 3-D, got ",
             input.dim(), "-D input of shape ", shape_str(input.sizes()));
  KILN_CHECK(input.sizes().back() == input_size, who, ": input.size(-1) must be equal to input_size. Expected ",
             input_size, ", got ", input.sizes().back(), " (input of shape ", shape_str(input.sizes()), ")");
  DType dtype = all_weights[0].w_ih.dtype();
  KILN_CHECK(input.dtype() == dtype, who, ": input must have the parameters' dtype ", dtype, ", got ", input.dtype());
  bool batched = input.dim() == 3;
  // Internally always [T, N, features].
  Tensor x = !batched ? input.unsqueeze(1) : batch_first ? input.transpose(0, 1) : input;
  int64_t steps = x.sizes()[0], batch = x.sizes()[1];
  KILN_CHECK(steps > 0, who, ": expected sequence length to be larger than 0, got input of shape ",
             shape_str(input.sizes()));
  bool lstm = mode == Mode::LSTM;
  int64_t dirs = bidirectional ? 2 : 1;
  int64_t h_out = proj_size > 0 ? proj_size : hidden_size;

  auto initial_state = [&](const Tensor& s, int64_t width, const char* name) {
    std::vector<int64_t> want = {num_layers * dirs, batch, width};
    if (!s.defined()) return zeros(want, x.options());
    KILN_CHECK(s.dim() == (batched ? 3 : 2), who, ": for ", batched ? "batched 3-D" : "unbatched 2-D", " input, ", name,
               " should be ", batched ? 3 : 2, "-D, got ", s.dim(), "-D tensor of shape ", shape_str(s.sizes()));
    KILN_CHECK(s.dtype() == dtype, who, ": ", name, " must have the parameters' dtype ", dtype, ", got ", s.dtype());
    Tensor s3 = batched ? s : s.unsqueeze(1);
    KILN_CHECK(s3.sizes() == IntArrayRef(want), who, ": expected ", name, " of shape ",
               shape_str(batched ? want : std::vector<int64_t>{want[0], want[2]}), ", got ", shape_str(s.sizes()),
               " (input of shape ", shape_str(input.sizes()), ")");
    return s3;
  };
  Tensor h0 = initial_state(hx, h_out, lstm ? "h_0" : "hx");
  Tensor c0 = lstm ? initial_state(cx, hidden_size, "c_0") : Tensor();

  // mask[t, n] = t < lengths[n], shaped [T, N, 1] to broadcast over features.
  Tensor mask;
  if (lengths.defined()) {
    KILN_CHECK(batched, who, ": lengths needs batched 3-D input, got input of shape ", shape_str(input.sizes()));
    KILN_CHECK(lengths.dim() == 1 && lengths.sizes()[0] == batch, who, ": expected lengths of shape [", batch,
               "] (one per sequence), got ", shape_str(lengths.sizes()));
    KILN_CHECK(lengths.dtype() == kInt64, who, ": expected int64 lengths, got dtype ", lengths.dtype());
    // Reading the values needs real data: while compiling they are trusted (a graph break per call otherwise).
    if (!compiler::is_compiling() && batch > 0) {
      int64_t lo = lengths.min().item<int64_t>(), hi = lengths.max().item<int64_t>();
      KILN_CHECK(lo >= 1 && hi <= steps, who, ": expected every length in [1, ", steps,
                 "] (the sequence length of input of shape ", shape_str(input.sizes()), "), got lengths in [", lo, ", ",
                 hi, "]");
    }
    Tensor t = arange(steps, TensorOptions(lengths.dtype()).device(x.device()));
    mask = (t.unsqueeze(1) < lengths.to(x.device()).unsqueeze(0)).unsqueeze(2);
  }

  Tensor layer_in = x;
  std::vector<Tensor> h_n, c_n;
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    std::vector<Tensor> dir_out;
    for (int64_t dir = 0; dir < dirs; ++dir) {
      const LayerWeights& w = all_weights[static_cast<size_t>(layer * dirs + dir)];
      Tensor h = h0.select(0, layer * dirs + dir);
      Tensor c = lstm ? c0.select(0, layer * dirs + dir) : Tensor();
      // The input projections of every step in one matmul; only the recurrent part is per step.
      Tensor gi = linear(layer_in, w.w_ih, w.b_ih);
      std::vector<Tensor> outs(static_cast<size_t>(steps));
      for (int64_t s = 0; s < steps; ++s) {
        int64_t t = dir == 1 ? steps - 1 - s : s;
        Tensor g = gi.select(0, t);
        Tensor h_new, c_new;
        if (lstm) {
          std::tie(h_new, c_new) = lstm_step(g, h, c, w.w_hh, w.b_hh, w.w_hr);
        } else if (mode == Mode::GRU) {
          h_new = gru_step(g, h, w.w_hh, w.b_hh);
        } else {
          h_new = rnn_step(g, h, w.w_hh, w.b_hh, mode == Mode::RNN_RELU);
        }
        if (mask.defined()) {
          // A padded step keeps the state and outputs zero (where, not a multiply: NaN-safe).
          Tensor m = mask.select(0, t);
          outs[static_cast<size_t>(t)] = where(m, h_new, 0.0);
          h = where(m, h_new, h);
          if (lstm) c = where(m, c_new, c);
        } else {
          outs[static_cast<size_t>(t)] = h_new;
          h = h_new;
          c = c_new;
        }
      }
      dir_out.push_back(stack(outs, 0));
      h_n.push_back(h);
      if (lstm) c_n.push_back(c);
    }
    layer_in = dirs == 2 ? cat(dir_out, 2) : dir_out[0];
    // torch drops out between layers, never after the last one.
    if (dropout > 0 && is_training() && layer + 1 < num_layers) layer_in = functional::dropout(layer_in, dropout, true);
  }
  Tensor out = layer_in, hn = stack(h_n, 0), cn = lstm ? stack(c_n, 0) : Tensor();
  if (!batched) {
    out = out.squeeze(1);
    hn = hn.squeeze(1);
    if (lstm) cn = cn.squeeze(1);
  } else if (batch_first) {
    out = out.transpose(0, 1);
  }
  return {out, hn, cn};
}

std::tuple<utils::rnn::PackedSequence, Tensor, Tensor> RNNBase::run_packed(const utils::rnn::PackedSequence& input,
                                                                           const Tensor& hx, const Tensor& cx) {
  auto [padded, lengths] = utils::rnn::pad_packed_sequence(input);
  // run() reads batch_first; hand it the layout it expects.
  auto [out, hn, cn] = run(batch_first ? padded.transpose(0, 1) : padded, hx, cx, lengths);
  Tensor out_tn = batch_first ? out.transpose(0, 1) : out;
  utils::rnn::PackedSequence packed = input;
  packed.data =
      utils::rnn::pack_data(out_tn, input.batch_sizes.cpu().contiguous().to_vector<int64_t>(), input.sorted_indices);
  return {packed, hn, cn};
}

// ---------------------------------------------------------------- RNN, LSTM, GRU

RNN::RNN(int64_t input_size, int64_t hidden_size, int64_t num_layers, const std::string& nonlinearity, bool bias,
         bool batch_first, double dropout, bool bidirectional)
    : RNNBase("RNN", rnn_mode(nonlinearity), input_size, hidden_size, num_layers, bias, batch_first, dropout,
              bidirectional, 0),
      nonlinearity(nonlinearity) {}

RNN::RNN(const RNNOptions& o)
    : RNN(o.input_size, o.hidden_size, o.num_layers, o.nonlinearity, o.bias, o.batch_first, o.dropout,
          o.bidirectional) {}

std::tuple<Tensor, Tensor> RNN::forward(const Tensor& input, const Tensor& hx, const Tensor& lengths) {
  auto [out, hn, cn] = run(input, hx, Tensor(), lengths);
  return {out, hn};
}

std::tuple<utils::rnn::PackedSequence, Tensor> RNN::forward(const utils::rnn::PackedSequence& input, const Tensor& hx) {
  auto [out, hn, cn] = run_packed(input, hx, Tensor());
  return {out, hn};
}

LSTM::LSTM(int64_t input_size, int64_t hidden_size, int64_t num_layers, bool bias, bool batch_first, double dropout,
           bool bidirectional, int64_t proj_size)
    : RNNBase("LSTM", Mode::LSTM, input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
              proj_size) {}

LSTM::LSTM(const LSTMOptions& o)
    : LSTM(o.input_size, o.hidden_size, o.num_layers, o.bias, o.batch_first, o.dropout, o.bidirectional, o.proj_size) {}

std::tuple<Tensor, std::tuple<Tensor, Tensor>> LSTM::forward(const Tensor& input, const std::tuple<Tensor, Tensor>& hx,
                                                             const Tensor& lengths) {
  auto [out, hn, cn] = run(input, std::get<0>(hx), std::get<1>(hx), lengths);
  return {out, {hn, cn}};
}

std::tuple<utils::rnn::PackedSequence, std::tuple<Tensor, Tensor>> LSTM::forward(
    const utils::rnn::PackedSequence& input, const std::tuple<Tensor, Tensor>& hx) {
  auto [out, hn, cn] = run_packed(input, std::get<0>(hx), std::get<1>(hx));
  return {out, {hn, cn}};
}

GRU::GRU(int64_t input_size, int64_t hidden_size, int64_t num_layers, bool bias, bool batch_first, double dropout,
         bool bidirectional)
    : RNNBase("GRU", Mode::GRU, input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0) {}

GRU::GRU(const GRUOptions& o)
    : GRU(o.input_size, o.hidden_size, o.num_layers, o.bias, o.batch_first, o.dropout, o.bidirectional) {}

std::tuple<Tensor, Tensor> GRU::forward(const Tensor& input, const Tensor& hx, const Tensor& lengths) {
  auto [out, hn, cn] = run(input, hx, Tensor(), lengths);
  return {out, hn};
}

std::tuple<utils::rnn::PackedSequence, Tensor> GRU::forward(const utils::rnn::PackedSequence& input, const Tensor& hx) {
  auto [out, hn, cn] = run_packed(input, hx, Tensor());
  return {out, hn};
}

// ---------------------------------------------------------------- cells

RNNCellBase::RNNCellBase(const char* type_name, int64_t input_size, int64_t hidden_size, bool bias, int64_t num_chunks)
    : Module(type_name), input_size(input_size), hidden_size(hidden_size), bias(bias) {
  check_common_args(type_name, input_size, hidden_size, 1, 0.0);
  weight_ih = register_parameter("weight_ih", empty({num_chunks * hidden_size, input_size}));
  weight_hh = register_parameter("weight_hh", empty({num_chunks * hidden_size, hidden_size}));
  if (bias) {
    bias_ih = register_parameter("bias_ih", empty({num_chunks * hidden_size}));
    bias_hh = register_parameter("bias_hh", empty({num_chunks * hidden_size}));
  }
  reset_parameters();
}

void RNNCellBase::reset_parameters() { init_uniform_hidden(parameters(/*recurse=*/false), hidden_size); }

std::string RNNCellBase::extra_repr() const {
  std::string s = std::to_string(input_size) + ", " + std::to_string(hidden_size);
  if (!bias) s += ", bias=False";
  return s;
}

bool RNNCellBase::prepare(Tensor& x, std::vector<Tensor*> states) const {
  const std::string& who = type_name();
  std::vector<int64_t> in_shape = x.defined() ? x.sizes().vec() : std::vector<int64_t>{};
  KILN_CHECK(x.defined(), who, ": input is undefined");
  KILN_CHECK(x.dim() == 1 || x.dim() == 2, who, ": expected input to be 1-D or 2-D, got ", x.dim(),
             "-D input of shape ", shape_str(x.sizes()));
  KILN_CHECK(x.sizes().back() == input_size, who, ": input has inconsistent input_size: got ", x.sizes().back(),
             " expected ", input_size, " (input of shape ", shape_str(x.sizes()), ")");
  KILN_CHECK(x.dtype() == weight_ih.dtype(), who, ": input must have the parameters' dtype ", weight_ih.dtype(),
             ", got ", x.dtype());
  bool batched = x.dim() == 2;
  if (!batched) x = x.unsqueeze(0);
  int64_t batch = x.sizes()[0];
  for (size_t i = 0; i < states.size(); ++i) {
    Tensor& s = *states[i];
    if (!s.defined()) {
      s = zeros({batch, hidden_size}, x.options());
      continue;
    }
    KILN_CHECK(s.dim() == static_cast<int64_t>(in_shape.size()), who, ": expected hidden", i, " to be ",
               in_shape.size(), "-D like the ", batched ? "batched" : "unbatched", " input, got shape ",
               shape_str(s.sizes()), " (input of shape ", shape_str(in_shape), ")");
    if (!batched) s = s.unsqueeze(0);
    KILN_CHECK(s.dtype() == x.dtype(), who, ": hidden", i, " must have the parameters' dtype ", x.dtype(), ", got ",
               s.dtype());
    KILN_CHECK(s.sizes()[0] == batch, who, ": input batch size ", batch, " doesn't match hidden", i, " batch size ",
               s.sizes()[0]);
    KILN_CHECK(s.sizes()[1] == hidden_size, who, ": hidden", i, " has inconsistent hidden_size: got ", s.sizes()[1],
               ", expected ", hidden_size);
  }
  return batched;
}

RNNCell::RNNCell(int64_t input_size, int64_t hidden_size, bool bias, const std::string& nonlinearity)
    : RNNCellBase("RNNCell", input_size, hidden_size, bias, 1), nonlinearity(nonlinearity) {
  KILN_CHECK(nonlinearity == "tanh" || nonlinearity == "relu", "RNNCell: unknown nonlinearity '", nonlinearity,
             "'. Select from 'tanh' or 'relu'.");
}

std::string RNNCell::extra_repr() const {
  std::string s = RNNCellBase::extra_repr();
  if (nonlinearity != "tanh") s += ", nonlinearity=" + nonlinearity;
  return s;
}

Tensor RNNCell::forward(const Tensor& input, const Tensor& hx) {
  Tensor x = input, h = hx;
  bool batched = prepare(x, {&h});
  Tensor out = rnn_step(linear(x, weight_ih, bias_ih), h, weight_hh, bias_hh, nonlinearity == "relu");
  return batched ? out : out.squeeze(0);
}

LSTMCell::LSTMCell(int64_t input_size, int64_t hidden_size, bool bias)
    : RNNCellBase("LSTMCell", input_size, hidden_size, bias, 4) {}

std::tuple<Tensor, Tensor> LSTMCell::forward(const Tensor& input, const std::tuple<Tensor, Tensor>& hx) {
  Tensor x = input, h = std::get<0>(hx), c = std::get<1>(hx);
  bool batched = prepare(x, {&h, &c});
  auto [h_new, c_new] = lstm_step(linear(x, weight_ih, bias_ih), h, c, weight_hh, bias_hh, Tensor());
  if (!batched) return {h_new.squeeze(0), c_new.squeeze(0)};
  return {h_new, c_new};
}

GRUCell::GRUCell(int64_t input_size, int64_t hidden_size, bool bias)
    : RNNCellBase("GRUCell", input_size, hidden_size, bias, 3) {}

Tensor GRUCell::forward(const Tensor& input, const Tensor& hx) {
  Tensor x = input, h = hx;
  bool batched = prepare(x, {&h});
  Tensor out = gru_step(linear(x, weight_ih, bias_ih), h, weight_hh, bias_hh);
  return batched ? out : out.squeeze(0);
}

}  // namespace kiln::nn
