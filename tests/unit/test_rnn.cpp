// RNN, LSTM, GRU and their cells: against an fp64 reference written here with plain loops over time
// steps (layers, directions, projections, variable lengths), gradients against finite differences,
// PyTorch 1.13's outputs through tests/fixtures/torch_rnn.safetensors (made by
// tests/fixtures/make_torch_rnn_fixture.py), compiled against eager, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/nn.h"
#include "tests/unit/expect_error.h"
#include "tests/unit/torch_fixture.h"

namespace kiln {
namespace {

using kiln::testing::expect_error;

std::vector<double> vals(const Tensor& t) { return t.contiguous().to_vector<double>(); }

void expect_close(const Tensor& got, const std::vector<double>& want, double tol, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what;
  auto g = vals(got);
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_NEAR(g[i], want[i], tol * (1 + std::abs(want[i]))) << what << " [" << i << "]";
}

void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_TRUE(want.defined()) << what;
  ASSERT_EQ(got.sizes().vec(), want.sizes().vec()) << what;
  expect_close(got, vals(want), tol, what);
}

// ---------------------------------------------------------------- the fp64 reference

enum class Kind { RnnTanh, RnnRelu, Lstm, Gru };

double sigm(double v) { return 1.0 / (1.0 + std::exp(-v)); }

struct RefWeights {
  std::vector<double> w_ih, w_hh, b_ih, b_hh, w_hr;  // empty biases = none, empty w_hr = no projection
};

// One step for one sequence: x [in], h [h_out], c [hidden] updated in place.
void ref_step(Kind kind, const RefWeights& w, int64_t in, int64_t hidden, const double* x, std::vector<double>& h,
              std::vector<double>& c) {
  int64_t gates = (kind == Kind::Lstm ? 4 : kind == Kind::Gru ? 3 : 1) * hidden;
  int64_t h_out = static_cast<int64_t>(h.size());
  std::vector<double> gi(gates), gh(gates);
  for (int64_t j = 0; j < gates; ++j) {
    double a = w.b_ih.empty() ? 0.0 : w.b_ih[j], b = w.b_hh.empty() ? 0.0 : w.b_hh[j];
    for (int64_t k = 0; k < in; ++k) a += w.w_ih[j * in + k] * x[k];
    for (int64_t k = 0; k < h_out; ++k) b += w.w_hh[j * h_out + k] * h[k];
    gi[j] = a;
    gh[j] = b;
  }
  if (kind == Kind::RnnTanh || kind == Kind::RnnRelu) {
    for (int64_t j = 0; j < hidden; ++j) {
      double v = gi[j] + gh[j];
      h[j] = kind == Kind::RnnTanh ? std::tanh(v) : std::max(v, 0.0);
    }
  } else if (kind == Kind::Gru) {
    std::vector<double> next(hidden);
    for (int64_t j = 0; j < hidden; ++j) {
      double r = sigm(gi[j] + gh[j]), z = sigm(gi[hidden + j] + gh[hidden + j]);
      double n = std::tanh(gi[2 * hidden + j] + r * gh[2 * hidden + j]);
      next[j] = (1 - z) * n + z * h[j];
    }
    h = next;
  } else {
    std::vector<double> o_tanh(hidden);
    for (int64_t j = 0; j < hidden; ++j) {
      auto gate = [&](int q) { return gi[q * hidden + j] + gh[q * hidden + j]; };
      c[j] = sigm(gate(1)) * c[j] + sigm(gate(0)) * std::tanh(gate(2));
      o_tanh[j] = sigm(gate(3)) * std::tanh(c[j]);
    }
    if (w.w_hr.empty()) {
      h = o_tanh;
    } else {
      for (int64_t p = 0; p < h_out; ++p) {
        double s = 0;
        for (int64_t j = 0; j < hidden; ++j) s += w.w_hr[p * hidden + j] * o_tanh[j];
        h[p] = s;
      }
    }
  }
}

RefWeights ref_weights(const nn::RNNBase::LayerWeights& w) {
  auto v = [](const Tensor& t) { return t.defined() ? vals(t) : std::vector<double>{}; };
  return {v(w.w_ih), v(w.w_hh), v(w.b_ih), v(w.b_hh), v(w.w_hr)};
}

struct RefOut {
  std::vector<double> out, h_n, c_n;
};

// x [T][N][in], h0 [L*D][N][h_out], c0 [L*D][N][hidden] (row-major); each sequence n runs over its
// first lengths[n] steps only (all T when lengths is empty), the reverse direction from its last one.
RefOut reference(Kind kind, const nn::RNNBase& m, const std::vector<double>& x, int64_t T, int64_t N,
                 const std::vector<double>& h0, const std::vector<double>& c0, const std::vector<int64_t>& lengths) {
  int64_t H = m.hidden_size, Ho = m.proj_size > 0 ? m.proj_size : H, D = m.bidirectional ? 2 : 1;
  std::vector<double> in = x;
  int64_t width = m.input_size;
  RefOut r;
  r.h_n.assign(static_cast<size_t>(m.num_layers * D * N * Ho), 0.0);
  r.c_n.assign(static_cast<size_t>(m.num_layers * D * N * H), 0.0);
  for (int64_t l = 0; l < m.num_layers; ++l) {
    std::vector<double> next(static_cast<size_t>(T * N * D * Ho), 0.0);
    for (int64_t d = 0; d < D; ++d) {
      RefWeights w = ref_weights(m.weights(l, d == 1));
      int64_t sd = l * D + d;
      for (int64_t n = 0; n < N; ++n) {
        int64_t len = lengths.empty() ? T : lengths[n];
        std::vector<double> h(h0.begin() + (sd * N + n) * Ho, h0.begin() + (sd * N + n + 1) * Ho);
        std::vector<double> c(static_cast<size_t>(H), 0.0);
        if (kind == Kind::Lstm) c.assign(c0.begin() + (sd * N + n) * H, c0.begin() + (sd * N + n + 1) * H);
        for (int64_t s = 0; s < len; ++s) {
          int64_t t = d == 1 ? len - 1 - s : s;
          ref_step(kind, w, width, H, &in[(t * N + n) * width], h, c);
          for (int64_t j = 0; j < Ho; ++j) next[(t * N + n) * D * Ho + d * Ho + j] = h[j];
        }
        for (int64_t j = 0; j < Ho; ++j) r.h_n[(sd * N + n) * Ho + j] = h[j];
        for (int64_t j = 0; j < H; ++j) r.c_n[(sd * N + n) * H + j] = c[j];
      }
    }
    in = next;
    width = D * Ho;
  }
  r.out = in;
  return r;
}

// Any of the three through one signature: (output, h_n, c_n), c_n undefined unless LSTM.
std::tuple<Tensor, Tensor, Tensor> call(nn::RNNBase& m, const Tensor& x, const Tensor& h0 = {}, const Tensor& c0 = {},
                                        const Tensor& lengths = {}) {
  if (auto* lstm = dynamic_cast<nn::LSTM*>(&m)) {
    auto [out, hc] = lstm->forward(x, {h0, c0}, lengths);
    return {out, std::get<0>(hc), std::get<1>(hc)};
  }
  if (auto* rnn = dynamic_cast<nn::RNN*>(&m)) {
    auto [out, h] = rnn->forward(x, h0, lengths);
    return {out, h, Tensor()};
  }
  auto [out, h] = dynamic_cast<nn::GRU&>(m).forward(x, h0, lengths);
  return {out, h, Tensor()};
}

Kind kind_of(const nn::RNNBase& m) {
  switch (m.mode) {
    case nn::RNNBase::Mode::RNN_TANH:
      return Kind::RnnTanh;
    case nn::RNNBase::Mode::RNN_RELU:
      return Kind::RnnRelu;
    case nn::RNNBase::Mode::LSTM:
      return Kind::Lstm;
    default:
      return Kind::Gru;
  }
}

// Runs m (in float64) on random input against the reference; batch_first input is a transposed
// (non-contiguous) view. Returns the module's output for further checks.
Tensor check_reference(nn::RNNBase& m, int64_t T, int64_t N, bool give_state, const std::vector<int64_t>& lengths = {},
                       const Tensor& x_tn_given = {}) {
  m.to(kFloat64);
  int64_t H = m.hidden_size, Ho = m.proj_size > 0 ? m.proj_size : H, LD = m.num_layers * (m.bidirectional ? 2 : 1);
  Tensor x = x_tn_given.defined() ? x_tn_given : randn({T, N, m.input_size}, kFloat64);
  Tensor h0 = randn({LD, N, Ho}, kFloat64), c0 = randn({LD, N, H}, kFloat64);
  bool lstm = m.mode == nn::RNNBase::Mode::LSTM;
  RefOut want = reference(kind_of(m), m, vals(x), T, N, give_state ? vals(h0) : std::vector<double>(LD * N * Ho, 0.0),
                          give_state && lstm ? vals(c0) : std::vector<double>(LD * N * H, 0.0), lengths);
  Tensor len = lengths.empty() ? Tensor() : tensor(lengths);
  auto [out, hn, cn] = call(m, m.batch_first ? x.transpose(0, 1) : x, give_state ? h0 : Tensor(),
                            give_state && lstm ? c0 : Tensor(), len);
  EXPECT_EQ(out.sizes().vec(),
            (m.batch_first ? std::vector<int64_t>{N, T, out.sizes()[2]} : std::vector<int64_t>{T, N, out.sizes()[2]}));
  EXPECT_EQ(out.sizes()[2], (m.bidirectional ? 2 : 1) * Ho);
  EXPECT_EQ(hn.sizes().vec(), (std::vector<int64_t>{LD, N, Ho}));
  Tensor out_tn = m.batch_first ? out.transpose(0, 1) : out;
  expect_close(out_tn, want.out, 1e-10, m.repr() + " output");
  expect_close(hn, want.h_n, 1e-10, m.repr() + " h_n");
  if (lstm) {
    EXPECT_EQ(cn.sizes().vec(), (std::vector<int64_t>{LD, N, H}));
    expect_close(cn, want.c_n, 1e-10, m.repr() + " c_n");
  } else {
    EXPECT_FALSE(cn.defined());
  }
  return out_tn;
}

TEST(Rnn, ModulesMatchTheFp64Reference) {
  manual_seed(1);
  for (bool give_state : {false, true}) {
    SCOPED_TRACE(give_state ? "with h_0" : "zero h_0");
    nn::RNN rnn(3, 4);
    check_reference(rnn, 5, 2, give_state);
    nn::RNN rnn2(3, 4, 2, "relu", false, /*batch_first=*/true, 0.0, /*bidirectional=*/true);
    check_reference(rnn2, 5, 3, give_state);
    nn::LSTM lstm(3, 4, 2, true, false, 0.0, /*bidirectional=*/true);
    check_reference(lstm, 4, 2, give_state);
    nn::LSTM proj({.input_size = 3,
                   .hidden_size = 5,
                   .num_layers = 2,
                   .bias = false,
                   .batch_first = true,
                   .bidirectional = true,
                   .proj_size = 2});
    check_reference(proj, 4, 3, give_state);
    nn::GRU gru(3, 4, 2, true, /*batch_first=*/true, 0.0, /*bidirectional=*/true);
    check_reference(gru, 5, 2, give_state);
    nn::GRU gru1(2, 3, 1, /*bias=*/false);
    check_reference(gru1, 3, 1, give_state);
  }
}

// lengths: as pack_padded_sequence → module → pad_packed_sequence (the reference runs each
// sequence over its own length only). Padded steps output exactly zero, and NaN there never leaks.
TEST(Rnn, LengthsLeavePaddedStepsOut) {
  manual_seed(2);
  std::vector<int64_t> lengths = {5, 2, 1, 4};
  int64_t T = 5, N = 4;
  nn::LSTM lstm({.input_size = 3, .hidden_size = 4, .num_layers = 2, .batch_first = true, .bidirectional = true});
  nn::GRU gru(3, 4, 1, true, false, 0.0, true);
  nn::RNN rnn(3, 4, 2);
  nn::LSTM proj({.input_size = 3, .hidden_size = 4, .bidirectional = true, .proj_size = 2});
  for (nn::RNNBase* m : std::vector<nn::RNNBase*>{&lstm, &gru, &rnn, &proj}) {
    SCOPED_TRACE(m->repr());
    for (bool give_state : {false, true}) {
      Tensor x = randn({T, N, 3}, kFloat64);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t t = lengths[n]; t < T; ++t) x.select(0, t).select(0, n).fill_(std::nan(""));
      Tensor out = check_reference(*m, T, N, give_state, lengths, x);
      auto o = vals(out);
      int64_t w = out.sizes()[2];
      for (int64_t t = 0; t < T; ++t)
        for (int64_t n = 0; n < N; ++n)
          for (int64_t j = 0; j < w; ++j) {
            double v = o[(t * N + n) * w + j];
            if (t >= lengths[n])
              EXPECT_EQ(v, 0.0) << "t=" << t << " n=" << n;
            else
              EXPECT_TRUE(std::isfinite(v));
          }
    }
  }
  // Each sequence alone, truncated to its length, gives the same h_n as the padded batch.
  lstm.to(kFloat64);
  Tensor x = randn({N, T, 3}, kFloat64);
  auto [out, hc] = lstm.forward(x, {}, tensor(lengths));
  for (int64_t n = 0; n < N; ++n) {
    auto [o1, hc1] = lstm.forward(x.narrow(0, n, 1).narrow(1, 0, lengths[n]));
    expect_close(std::get<0>(hc1), std::get<0>(hc).narrow(1, n, 1), 1e-12, "h_n of sequence " + std::to_string(n));
    expect_close(std::get<1>(hc1), std::get<1>(hc).narrow(1, n, 1), 1e-12, "c_n of sequence " + std::to_string(n));
    expect_close(o1, out.narrow(0, n, 1).narrow(1, 0, lengths[n]), 1e-12, "output of sequence " + std::to_string(n));
  }
}

TEST(Rnn, UnbatchedInputIsABatchOfOne) {
  manual_seed(3);
  nn::LSTM lstm(3, 4, 2, true, false, 0.0, true);
  Tensor x = randn({5, 3}), h0 = randn({4, 4}), c0 = randn({4, 4});
  auto [out, hc] = lstm.forward(x, {h0, c0});
  auto [out1, hc1] = lstm.forward(x.unsqueeze(1), {h0.unsqueeze(1), c0.unsqueeze(1)});
  EXPECT_EQ(out.sizes().vec(), (std::vector<int64_t>{5, 8}));
  EXPECT_EQ(std::get<0>(hc).sizes().vec(), (std::vector<int64_t>{4, 4}));
  expect_close(out, out1.squeeze(1), 1e-6, "output");
  expect_close(std::get<1>(hc), std::get<1>(hc1).squeeze(1), 1e-6, "c_n");
  nn::GRU gru(3, 4, 1, true, /*batch_first=*/true);  // batch_first does not apply to unbatched input
  auto [g, gh] = gru.forward(x);
  auto [g1, gh1] = gru.forward(x.unsqueeze(0));
  expect_close(g, g1.squeeze(0), 1e-6, "gru output");
  EXPECT_EQ(gh.sizes().vec(), (std::vector<int64_t>{1, 4}));
}

TEST(Rnn, EmptyBatch) {
  nn::LSTM lstm(3, 4, 2, true, false, 0.0, true);
  auto [out, hc] = lstm.forward(empty({5, 0, 3}));
  EXPECT_EQ(out.sizes().vec(), (std::vector<int64_t>{5, 0, 8}));
  EXPECT_EQ(std::get<1>(hc).sizes().vec(), (std::vector<int64_t>{4, 0, 4}));
  auto [g, gh] = nn::GRU(3, 4).forward(empty({5, 0, 3}), Tensor(), tensor(std::vector<int64_t>{}));
  EXPECT_EQ(gh.sizes().vec(), (std::vector<int64_t>{1, 0, 4}));
  EXPECT_EQ(nn::GRUCell(3, 4).forward(empty({0, 3})).sizes().vec(), (std::vector<int64_t>{0, 4}));
}

// ---------------------------------------------------------------- cells

TEST(Rnn, CellsMatchTheFp64Reference) {
  manual_seed(4);
  int64_t N = 3, I = 4, H = 5;
  Tensor x = randn({N, I}, kFloat64), h = randn({N, H}, kFloat64), c = randn({N, H}, kFloat64);
  auto weights = [](const nn::RNNCellBase& cell) {
    nn::RNNBase::LayerWeights w{cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh, Tensor()};
    return ref_weights(w);
  };
  auto ref = [&](Kind kind, const nn::RNNCellBase& cell, bool give_state) {
    RefWeights w = weights(cell);
    std::vector<double> xs = vals(x), hs = vals(h), cs = vals(c), out_h, out_c;
    for (int64_t n = 0; n < N; ++n) {
      std::vector<double> hn(static_cast<size_t>(H), 0.0), cn(static_cast<size_t>(H), 0.0);
      if (give_state) {
        hn.assign(hs.begin() + n * H, hs.begin() + (n + 1) * H);
        cn.assign(cs.begin() + n * H, cs.begin() + (n + 1) * H);
      }
      ref_step(kind, w, I, H, &xs[n * I], hn, cn);
      out_h.insert(out_h.end(), hn.begin(), hn.end());
      out_c.insert(out_c.end(), cn.begin(), cn.end());
    }
    return std::make_pair(out_h, out_c);
  };
  for (bool give_state : {false, true}) {
    Tensor hx = give_state ? h : Tensor(), cx = give_state ? c : Tensor();
    nn::RNNCell tanh_cell(I, H), relu_cell(I, H, false, "relu");
    for (nn::RNNCell* cell : {&tanh_cell, &relu_cell}) {
      cell->to(kFloat64);
      expect_close(cell->forward(x, hx),
                   ref(cell->nonlinearity == "relu" ? Kind::RnnRelu : Kind::RnnTanh, *cell, give_state).first, 1e-12,
                   cell->repr());
    }
    nn::LSTMCell lstm(I, H);
    lstm.to(kFloat64);
    auto [h1, c1] = lstm.forward(x, {hx, cx});
    auto want = ref(Kind::Lstm, lstm, give_state);
    expect_close(h1, want.first, 1e-12, "LSTMCell h");
    expect_close(c1, want.second, 1e-12, "LSTMCell c");
    nn::GRUCell gru(I, H, false);
    gru.to(kFloat64);
    expect_close(gru.forward(x, hx), ref(Kind::Gru, gru, give_state).first, 1e-12, "GRUCell");
    // Unbatched: one row.
    auto [hu, cu] = lstm.forward(x.select(0, 1), {give_state ? h.select(0, 1) : Tensor(), Tensor()});
    EXPECT_EQ(hu.sizes().vec(), (std::vector<int64_t>{H}));
    if (!give_state) expect_close(hu, std::get<0>(lstm.forward(x)).select(0, 1), 1e-12, "unbatched LSTMCell");
  }
}

// ---------------------------------------------------------------- gradients

// gradcheck perturbs copies of its inputs, so the module reads them: all_weights is what forward
// uses (the test puts the registered handles back afterwards).
void gradcheck_module(nn::RNNBase& m, int64_t T, int64_t N, const Tensor& lengths = {}) {
  SCOPED_TRACE(m.repr());
  m.to(kFloat64);
  int64_t H = m.hidden_size, Ho = m.proj_size > 0 ? m.proj_size : H, LD = m.num_layers * (m.bidirectional ? 2 : 1);
  bool lstm = m.mode == nn::RNNBase::Mode::LSTM;
  std::vector<Tensor> inputs = {randn({T, N, m.input_size}, kFloat64).requires_grad_(),
                                randn({LD, N, Ho}, kFloat64).requires_grad_(),
                                randn({LD, N, H}, kFloat64).requires_grad_(lstm)};
  auto saved = m.all_weights;
  for (auto& w : m.all_weights)
    for (Tensor* p : {&w.w_ih, &w.w_hh, &w.b_ih, &w.b_hh, &w.w_hr})
      if (p->defined()) inputs.push_back(*p);
  auto fn = [&](const std::vector<Tensor>& in) {
    size_t k = 3;
    for (auto& w : m.all_weights)
      for (Tensor* p : {&w.w_ih, &w.w_hh, &w.b_ih, &w.b_hh, &w.w_hr})
        if (p->defined()) *p = in[k++];
    auto [out, hn, cn] =
        call(m, m.batch_first ? in[0].transpose(0, 1) : in[0], in[1], lstm ? in[2] : Tensor(), lengths);
    std::vector<Tensor> outs = {out, hn};
    if (lstm) outs.push_back(cn);
    return outs;
  };
  EXPECT_TRUE(gradcheck(fn, inputs));
  m.all_weights = saved;
}

TEST(Rnn, GradientsMatchFiniteDifferences) {
  manual_seed(5);
  nn::RNN rnn(2, 2, 1, "tanh", true, false, 0.0, true);
  gradcheck_module(rnn, 3, 2);
  nn::LSTM lstm(
      {.input_size = 2, .hidden_size = 3, .num_layers = 2, .batch_first = true, .bidirectional = true, .proj_size = 2});
  gradcheck_module(lstm, 3, 2);
  nn::GRU gru(2, 2, 2, true, false, 0.0, true);
  gradcheck_module(gru, 3, 2);
  nn::LSTM packed(2, 2, 1, true, false, 0.0, true);
  gradcheck_module(packed, 3, 2, tensor(std::vector<int64_t>{3, 1}));
  // Through a PackedSequence: pack, the module, pad.
  namespace R = nn::utils::rnn;
  nn::GRU gru_p({.input_size = 2, .hidden_size = 2, .batch_first = true, .bidirectional = true});
  gru_p.to(kFloat64);
  Tensor x = randn({3, 3, 2}, kFloat64).requires_grad_(), h0 = randn({2, 3, 2}, kFloat64).requires_grad_();
  EXPECT_TRUE(gradcheck(
      [&](const std::vector<Tensor>& in) {
        R::PackedSequence p = R::pack_padded_sequence(in[0], tensor(std::vector<int64_t>{1, 3, 2}), true, false);
        auto [out, h] = gru_p.forward(p, in[1]);
        return std::vector<Tensor>{std::get<0>(R::pad_packed_sequence(out, true)), h};
      },
      {x, h0}));
}

TEST(Rnn, CellGradientsMatchFiniteDifferences) {
  manual_seed(6);
  Tensor x = randn({2, 3}, kFloat64).requires_grad_(), h = randn({2, 2}, kFloat64).requires_grad_();
  Tensor c = randn({2, 2}, kFloat64).requires_grad_();
  nn::LSTMCell lstm(3, 2);
  lstm.to(kFloat64);
  EXPECT_TRUE(gradcheck(
      [&](const std::vector<Tensor>& in) {
        nn::LSTMCell& m = lstm;
        m.weight_ih = in[3], m.weight_hh = in[4], m.bias_ih = in[5], m.bias_hh = in[6];
        auto [h1, c1] = m.forward(in[0], {in[1], in[2]});
        return std::vector<Tensor>{h1, c1};
      },
      {x, h, c, lstm.weight_ih, lstm.weight_hh, lstm.bias_ih, lstm.bias_hh}));
  nn::GRUCell gru(3, 2);
  gru.to(kFloat64);
  EXPECT_TRUE(gradcheck(
      [&](const std::vector<Tensor>& in) {
        gru.weight_ih = in[2], gru.weight_hh = in[3], gru.bias_ih = in[4], gru.bias_hh = in[5];
        return std::vector<Tensor>{gru.forward(in[0], in[1])};
      },
      {x, h, gru.weight_ih, gru.weight_hh, gru.bias_ih, gru.bias_hh}));
  nn::RNNCell rnn(3, 2, false, "relu");
  rnn.to(kFloat64);
  EXPECT_TRUE(gradcheck(
      [&](const std::vector<Tensor>& in) {
        rnn.weight_ih = in[2], rnn.weight_hh = in[3];
        return std::vector<Tensor>{rnn.forward(in[0], in[1])};
      },
      {x, h, rnn.weight_ih, rnn.weight_hh}));
}

// ---------------------------------------------------------------- construction

std::vector<std::string> names_of(const nn::Module& m) {
  std::vector<std::string> out;
  for (const auto& [n, t] : m.named_parameters()) {
    std::string s = n + "[";
    for (int64_t d = 0; d < t.dim(); ++d) s += (d ? ", " : "") + std::to_string(t.sizes()[d]);
    out.push_back(s + "]");
  }
  return out;
}

TEST(Rnn, ParameterNamesShapesAndInit) {
  nn::LSTM lstm({.input_size = 8, .hidden_size = 16, .num_layers = 2, .batch_first = true});
  EXPECT_EQ(lstm.num_layers, 2);
  EXPECT_TRUE(lstm.batch_first);
  EXPECT_EQ(names_of(lstm), (std::vector<std::string>{"weight_ih_l0[64, 8]", "weight_hh_l0[64, 16]", "bias_ih_l0[64]",
                                                      "bias_hh_l0[64]", "weight_ih_l1[64, 16]", "weight_hh_l1[64, 16]",
                                                      "bias_ih_l1[64]", "bias_hh_l1[64]"}));
  EXPECT_EQ(lstm.repr(), "LSTM(8, 16, num_layers=2, batch_first=True)");
  nn::LSTM proj(4, 6, 1, true, false, 0.25, true, 3);
  EXPECT_EQ(names_of(proj), (std::vector<std::string>{
                                "weight_ih_l0[24, 4]", "weight_hh_l0[24, 3]", "bias_ih_l0[24]", "bias_hh_l0[24]",
                                "weight_hr_l0[3, 6]", "weight_ih_l0_reverse[24, 4]", "weight_hh_l0_reverse[24, 3]",
                                "bias_ih_l0_reverse[24]", "bias_hh_l0_reverse[24]", "weight_hr_l0_reverse[3, 6]"}));
  EXPECT_EQ(proj.repr(), "LSTM(4, 6, proj_size=3, dropout=0.25, bidirectional=True)");
  nn::GRU gru(4, 3, 2, /*bias=*/false, false, 0.0, true);
  EXPECT_EQ(names_of(gru),
            (std::vector<std::string>{"weight_ih_l0[9, 4]", "weight_hh_l0[9, 3]", "weight_ih_l0_reverse[9, 4]",
                                      "weight_hh_l0_reverse[9, 3]", "weight_ih_l1[9, 6]", "weight_hh_l1[9, 3]",
                                      "weight_ih_l1_reverse[9, 6]", "weight_hh_l1_reverse[9, 3]"}));
  EXPECT_TRUE(gru.weights(1, true).w_ih.is_same(gru.parameter("weight_ih_l1_reverse")));
  nn::RNN rnn({.input_size = 4, .hidden_size = 3, .nonlinearity = "relu", .bias = false});
  EXPECT_EQ(rnn.nonlinearity, "relu");
  EXPECT_EQ(rnn.repr(), "RNN(4, 3, bias=False)");  // torch's RNN repr leaves nonlinearity out
  EXPECT_EQ(nn::RNNCell(4, 3, false, "relu").repr(), "RNNCell(4, 3, bias=False, nonlinearity=relu)");
  EXPECT_EQ(names_of(nn::GRUCell(4, 3)),
            (std::vector<std::string>{"weight_ih[9, 4]", "weight_hh[9, 3]", "bias_ih[9]", "bias_hh[9]"}));
  EXPECT_EQ(nn::LSTMCell(4, 3).repr(), "LSTMCell(4, 3)");
  // Every weight and bias U(-1/√hidden, 1/√hidden): inside the bound, and filling it.
  manual_seed(7);
  nn::LSTM big(64, 100, 1, true, false, 0.0, true, 20);
  nn::GRUCell big_cell(50, 100);
  for (const nn::Module* m : std::vector<const nn::Module*>{&big, &big_cell})
    for (const auto& [n, p] : m->named_parameters()) {
      double mx = p.abs().max().item<double>();
      EXPECT_LE(mx, 0.1 * (1 + 1e-6)) << n;
      EXPECT_GT(mx, 0.09) << n;
      EXPECT_TRUE(p.requires_grad()) << n;
    }
}

TEST(Rnn, DropoutBetweenLayersInTrainingOnly) {
  manual_seed(8);
  nn::LSTM drop(3, 4, 2, true, false, 0.5);
  nn::LSTM plain(3, 4, 2);
  plain.load_state_dict(drop.state_dict());
  Tensor x = randn({5, 2, 3});
  auto out_of = [&](nn::LSTM& m) { return std::get<0>(m.forward(x)); };
  drop.eval();
  plain.eval();
  expect_close(out_of(drop), out_of(plain), 0, "eval: no dropout");
  drop.train();
  EXPECT_GT((out_of(drop) - out_of(plain)).abs().max().item<double>(), 1e-4) << "training: dropout between layers";
  // Never after the last layer: one layer with dropout is the plain module.
  nn::GRU one(3, 4, 1, true, false, 0.5);
  Tensor a = std::get<0>(one.forward(x));
  one.eval();
  expect_close(a, std::get<0>(one.forward(x)), 0, "one layer");
}

TEST(Rnn, PackAndPadRoundTrip) {
  namespace R = nn::utils::rnn;
  manual_seed(10);
  Tensor x = randn({3, 4, 2}).requires_grad_();  // batch_first: 3 sequences of up to 4 steps
  Tensor lengths = tensor(std::vector<int64_t>{2, 4, 2});
  R::PackedSequence p = R::pack_padded_sequence(x, lengths, true, false);
  EXPECT_EQ(p.data.sizes().vec(), (std::vector<int64_t>{8, 2}));
  EXPECT_EQ(vals(p.batch_sizes), (std::vector<double>{3, 3, 1, 1}));
  EXPECT_EQ(vals(p.sorted_indices), (std::vector<double>{1, 0, 2}));  // stable among equal lengths
  EXPECT_EQ(vals(p.unsorted_indices), (std::vector<double>{1, 0, 2}));
  // The packed rows are x's rows, step by step, longest first.
  expect_close(p.data.narrow(0, 0, 3), x.select(1, 0).index_select(0, p.sorted_indices), 0, "step 0");
  expect_close(p.data.narrow(0, 6, 1), x.select(1, 2).narrow(0, 1, 1), 0, "step 2");
  auto [padded, len] = R::pad_packed_sequence(p, true, -1.0, 5);
  EXPECT_EQ(padded.sizes().vec(), (std::vector<int64_t>{3, 5, 2}));
  EXPECT_EQ(vals(len), vals(lengths));
  auto xs = vals(x), ps = vals(padded);
  auto ls = lengths.to_vector<int64_t>();
  for (int64_t n = 0; n < 3; ++n)
    for (int64_t t = 0; t < 5; ++t)
      for (int64_t f = 0; f < 2; ++f)
        EXPECT_EQ(ps[(n * 5 + t) * 2 + f], t < ls[n] ? xs[(n * 4 + t) * 2 + f] : -1.0) << n << " " << t;
  // Gradients reach the valid steps only.
  padded.sum().backward();
  auto g = vals(x.grad());
  for (int64_t n = 0; n < 3; ++n)
    for (int64_t t = 0; t < 4; ++t) EXPECT_EQ(g[(n * 4 + t) * 2], t < ls[n] ? 1.0 : 0.0);
  // enforce_sorted keeps the order (no indices) and wants decreasing lengths.
  R::PackedSequence s = R::pack_padded_sequence(x.detach(), tensor(std::vector<int64_t>{4, 2, 2}), true);
  EXPECT_FALSE(s.sorted_indices.defined());
  expect_error([&] { R::pack_padded_sequence(x, lengths, true); }, {"pack_padded_sequence", "decreasing order"});
  expect_error(
      [&] {
        R::pack_padded_sequence(x, tensor(std::vector<int64_t>{2, 5, 1}), true, false);
      },
      {"pack_padded_sequence", "[1, 4]", "got 5"});
  expect_error(
      [&] {
        R::pack_padded_sequence(x, tensor(std::vector<int64_t>{2, 0, 1}), true, false);
      },
      {"pack_padded_sequence", "got 0"});
  expect_error(
      [&] {
        R::pack_padded_sequence(x, tensor(std::vector<int64_t>{2, 2}), true, false);
      },
      {"pack_padded_sequence", "lengths of shape [3]", "[2]"});
  expect_error([&] { R::pad_packed_sequence(p, true, 0.0, 3); }, {"pad_packed_sequence", "total_length=3", "4"});
}

// ---------------------------------------------------------------- bad input

TEST(Rnn, BadInputNamesTheModuleAndShapes) {
  nn::LSTM lstm(3, 4, 2);
  expect_error([&] { lstm.forward(randn({5, 2, 7})); }, {"LSTM", "input_size", "Expected 3, got 7", "[5, 2, 7]"});
  expect_error([&] { lstm.forward(randn({5, 2, 3, 1})); }, {"LSTM", "2-D (unbatched) or 3-D", "[5, 2, 3, 1]"});
  expect_error(
      [&] {
        lstm.forward(randn({5, 2, 3}), {randn({2, 3, 4}), Tensor()});
      },
      {"LSTM", "h_0", "[2, 2, 4]", "got [2, 3, 4]"});
  expect_error(
      [&] {
        lstm.forward(randn({5, 2, 3}), {Tensor(), randn({1, 2, 4})});
      },
      {"LSTM", "c_0", "[2, 2, 4]", "got [1, 2, 4]"});
  expect_error(
      [&] {
        lstm.forward(randn({5, 3}), {randn({2, 1, 4}), Tensor()});
      },
      {"LSTM", "unbatched 2-D", "h_0", "[2, 1, 4]"});
  expect_error([&] { lstm.forward(randn({0, 2, 3})); }, {"LSTM", "sequence length", "[0, 2, 3]"});
  expect_error([&] { lstm.forward(randn({5, 2, 3}, kFloat64)); }, {"LSTM", "dtype float32", "got float64"});
  expect_error(
      [&] {
        lstm.forward(randn({5, 2, 3}), {randn({2, 2, 4}, kFloat64), Tensor()});
      },
      {"LSTM", "h_0", "dtype float32", "got float64"});
  nn::GRU gru(3, 4);
  expect_error([&] { gru.forward(randn({5, 2, 3}), randn({1, 2, 5})); }, {"GRU", "hx", "[1, 2, 4]", "[1, 2, 5]"});
  Tensor x = randn({5, 2, 3});
  expect_error(
      [&] {
        gru.forward(x, Tensor(), tensor(std::vector<int64_t>{5, 6}));
      },
      {"GRU", "every length in [1, 5]", "[5, 2, 3]", "got lengths in [5, 6]"});
  expect_error([&] { gru.forward(x, Tensor(), tensor(std::vector<int64_t>{0, 3})); }, {"GRU", "got lengths in [0, 3]"});
  expect_error(
      [&] {
        gru.forward(x, Tensor(), tensor(std::vector<int64_t>{5, 5, 5}));
      },
      {"GRU", "lengths of shape [2]", "[3]"});
  expect_error([&] { gru.forward(x, Tensor(), tensor(std::vector<float>{5, 5})); }, {"GRU", "int64 lengths"});
  expect_error([&] { gru.forward(randn({5, 3}), Tensor(), tensor(std::vector<int64_t>{5})); }, {"GRU", "batched 3-D"});
  expect_error([] { nn::RNN(3, 4, 1, "sigmoid"); }, {"RNN", "nonlinearity 'sigmoid'"});
  expect_error([] { nn::LSTM(3, 4, 1, true, false, 1.5); }, {"LSTM", "dropout", "1.5"});
  expect_error([] { nn::LSTM(3, 4, 1, true, false, 0.0, false, 4); },
               {"LSTM", "proj_size", "smaller than hidden_size"});
  expect_error([] { nn::GRU(3, 0); }, {"GRU", "hidden_size"});
  expect_error([] { nn::RNN({.input_size = 3, .hidden_size = 2, .num_layers = 0}); }, {"RNN", "num_layers"});
  nn::LSTMCell cell(3, 4);
  expect_error([&] { cell.forward(randn({2, 2, 3})); }, {"LSTMCell", "1-D or 2-D", "[2, 2, 3]"});
  expect_error([&] { cell.forward(randn({2, 5})); }, {"LSTMCell", "input_size: got 5 expected 3"});
  expect_error(
      [&] {
        cell.forward(randn({2, 3}), {randn({3, 4}), Tensor()});
      },
      {"LSTMCell", "batch size 2", "hidden0 batch size 3"});
  expect_error(
      [&] {
        cell.forward(randn({2, 3}), {Tensor(), randn({2, 5})});
      },
      {"LSTMCell", "hidden1", "hidden_size: got 5, expected 4"});
  expect_error([&] { nn::GRUCell(3, 4).forward(randn({3}), randn({2, 4})); }, {"GRUCell", "1-D", "[2, 4]"});
  expect_error([&] { nn::RNNCell(3, 4).forward(randn({2, 3}, kFloat64)); }, {"RNNCell", "dtype float32", "float64"});
}

// ---------------------------------------------------------------- compiled

TEST(Rnn, CompiledLstmForwardAndBackwardMatchEager) {
  manual_seed(9);
  auto m = std::make_shared<nn::LSTM>(
      nn::LSTMOptions{.input_size = 3, .hidden_size = 4, .num_layers = 2, .batch_first = true, .bidirectional = true});
  manual_seed(9);
  auto ref = std::make_shared<nn::LSTM>(
      nn::LSTMOptions{.input_size = 3, .hidden_size = 4, .num_layers = 2, .batch_first = true, .bidirectional = true});
  auto loss_of = [](nn::LSTM& lstm, const Tensor& x, const Tensor& lengths) {
    auto [out, hc] = lstm.forward(x, {}, lengths);
    return out.square().mean() + std::get<0>(hc).sum() * 0.5 + std::get<1>(hc).sum() * 0.25;
  };
  auto fast = compile([&](const Tensor& x, const Tensor& lengths) { return loss_of(*m, x, lengths); });
  Tensor lengths = tensor(std::vector<int64_t>{5, 3});
  for (int call = 0; call < 2; ++call) {
    SCOPED_TRACE("call " + std::to_string(call));
    Tensor x = randn({2, 5, 3}).requires_grad_(), x2 = x.detach().clone().requires_grad_();
    m->zero_grad();
    ref->zero_grad();
    Tensor got = fast(x, lengths), want = loss_of(*ref, x2, lengths);
    EXPECT_NEAR(got.item<double>(), want.item<double>(), 1e-5);
    got.backward();
    want.backward();
    expect_close(x.grad(), x2.grad(), 1e-4, "input gradient");
    auto pa = m->named_parameters(), pb = ref->named_parameters();
    ASSERT_EQ(pa.size(), pb.size());
    for (size_t i = 0; i < pa.size(); ++i) {
      ASSERT_TRUE(pa[i].second.grad().defined()) << pa[i].first;
      expect_close(pa[i].second.grad(), pb[i].second.grad(), 1e-4, pa[i].first);
    }
  }
  EXPECT_TRUE(fast.stats().breaks.empty()) << "the lengths check reads no values while compiling";
  EXPECT_EQ(fast.stats().graphs_compiled, 1);
}

// ---------------------------------------------------------------- PyTorch 1.13

const kiln::testing::TorchCases fixture("torch_rnn.safetensors");

std::vector<Tensor> flat(const std::tuple<Tensor, Tensor>& r) { return {std::get<0>(r), std::get<1>(r)}; }
std::vector<Tensor> flat(const std::tuple<Tensor, std::tuple<Tensor, Tensor>>& r) {
  return {std::get<0>(r), std::get<0>(std::get<1>(r)), std::get<1>(std::get<1>(r))};
}

TEST(Rnn, TorchFixture) {
  nn::RNN rnn(4, 5, 2, "relu", true, false, 0.0, true);
  fixture.check_module("rnn_relu_bi2", rnn,
                       [&] { return flat(rnn(fixture.in("rnn_relu_bi2", 0), fixture.in("rnn_relu_bi2", 1))); });
  nn::RNN rnn_bf({.input_size = 4, .hidden_size = 5, .bias = false, .batch_first = true});
  fixture.check_module("rnn_tanh_bf_nobias", rnn_bf, [&] { return flat(rnn_bf(fixture.in("rnn_tanh_bf_nobias", 0))); });
  nn::LSTM lstm({.input_size = 4, .hidden_size = 5, .num_layers = 2, .batch_first = true, .bidirectional = true});
  fixture.check_module("lstm_bi2_bf", lstm, [&] {
    return flat(lstm(fixture.in("lstm_bi2_bf", 0), {fixture.in("lstm_bi2_bf", 1), fixture.in("lstm_bi2_bf", 2)}));
  });
  nn::LSTM proj({.input_size = 4, .hidden_size = 6, .num_layers = 2, .proj_size = 3});
  fixture.check_module("lstm_proj2", proj, [&] {
    return flat(proj(fixture.in("lstm_proj2", 0), {fixture.in("lstm_proj2", 1), fixture.in("lstm_proj2", 2)}));
  });
  nn::GRU gru({.input_size = 4, .hidden_size = 5, .num_layers = 2, .batch_first = true, .bidirectional = true});
  fixture.check_module("gru_bi2_bf", gru,
                       [&] { return flat(gru(fixture.in("gru_bi2_bf", 0), fixture.in("gru_bi2_bf", 1))); });
  nn::GRU gru_u(4, 5);
  fixture.check_module("gru_unbatched", gru_u,
                       [&] { return flat(gru_u(fixture.in("gru_unbatched", 0), fixture.in("gru_unbatched", 1))); });
  nn::RNNCell rnn_cell(4, 5, true, "relu");
  fixture.check_module("rnn_cell", rnn_cell, [&] {
    return std::vector<Tensor>{rnn_cell(fixture.in("rnn_cell", 0), fixture.in("rnn_cell", 1))};
  });
  nn::LSTMCell lstm_cell(4, 5);
  fixture.check_module("lstm_cell", lstm_cell, [&] {
    return flat(lstm_cell(fixture.in("lstm_cell", 0), {fixture.in("lstm_cell", 1), fixture.in("lstm_cell", 2)}));
  });
  nn::GRUCell gru_cell(4, 5);
  fixture.check_module("gru_cell", gru_cell, [&] {
    return std::vector<Tensor>{gru_cell(fixture.in("gru_cell", 0), fixture.in("gru_cell", 1))};
  });
}

// pack_padded_sequence → module → pad_packed_sequence in PyTorch; forward's lengths, and the same
// through kiln's PackedSequence.
TEST(Rnn, TorchFixturePackedSequences) {
  namespace R = nn::utils::rnn;
  {
    SCOPED_TRACE("pack");
    R::PackedSequence p = R::pack_padded_sequence(fixture.in("pack", 0), fixture.in("pack", 1), /*batch_first=*/true,
                                                  /*enforce_sorted=*/false);
    expect_close(p.data, fixture.out("pack"), 0, "data");
    EXPECT_EQ(vals(p.batch_sizes), vals(fixture.out("pack", 1)));
    EXPECT_EQ(vals(p.sorted_indices), vals(fixture.out("pack", 2)));
    EXPECT_EQ(vals(p.unsorted_indices), vals(fixture.out("pack", 3)));
  }
  for (const char* name : {"lstm_packed_bi2_bf", "gru_packed_bi"}) {
    bool lstm_case = std::string(name).rfind("lstm", 0) == 0;
    nn::LSTM lstm({.input_size = 4, .hidden_size = 5, .num_layers = 2, .batch_first = true, .bidirectional = true});
    nn::GRU gru({.input_size = 4, .hidden_size = 5, .bidirectional = true});
    nn::RNNBase& m = lstm_case ? static_cast<nn::RNNBase&>(lstm) : gru;
    fixture.check_module(std::string(name), m, [&] {
      const Tensor x = fixture.in(name, 0);  // a copy of the handle: GCC 13 sees a reference into a temporary
      R::PackedSequence packed = R::pack_padded_sequence(x, fixture.in(name, 1), m.batch_first, false);
      std::vector<Tensor> outs;
      R::PackedSequence out_packed;
      if (lstm_case) {
        auto [o, hc] = lstm.forward(packed);
        out_packed = o;
        outs = {Tensor(), std::get<0>(hc), std::get<1>(hc)};
      } else {
        auto [o, h] = gru.forward(packed);
        out_packed = o;
        outs = {Tensor(), h};
      }
      EXPECT_TRUE(out_packed.batch_sizes.is_same(packed.batch_sizes));
      auto [padded, lengths] = R::pad_packed_sequence(out_packed, m.batch_first, 0.0, x.sizes()[m.batch_first ? 1 : 0]);
      EXPECT_EQ(vals(lengths), vals(fixture.in(name, 1)));
      EXPECT_EQ(padded.dtype(), kFloat32) << "padded steps keep the input's dtype";
      outs[0] = padded;
      return outs;
    });
  }
  nn::LSTM lstm({.input_size = 4, .hidden_size = 5, .num_layers = 2, .batch_first = true, .bidirectional = true});
  fixture.check_module("lstm_packed_bi2_bf", lstm, [&] {
    return flat(lstm(fixture.in("lstm_packed_bi2_bf", 0), {}, fixture.in("lstm_packed_bi2_bf", 1)));
  });
  nn::GRU gru({.input_size = 4, .hidden_size = 5, .bidirectional = true});
  fixture.check_module("gru_packed_bi", gru,
                       [&] { return flat(gru(fixture.in("gru_packed_bi", 0), {}, fixture.in("gru_packed_bi", 1))); });
}

}  // namespace
}  // namespace kiln
