// Samples for scaled_dot_product_attention, embedding_bag and interpolate (Note [Op samples]).
#include <algorithm>

#include "dispatch/dispatch.h"
#include "tests/ops/samples_nn_util.h"

namespace kiln::test {
namespace {
using namespace nn;

// ---- scaled_dot_product_attention ----
// q [B..., L, E], k [B..., S, E], v [B..., S, Ev], all with the same batch dims here;
// mask (optional) broadcast to [B..., L, S]: bool (true = keep) or float (added).
Ref ref_attention(const Ref& q, const Ref& k, const Ref& v, const Tensor& mask, bool causal, std::optional<double> scale) {
  int64_t nd = q.dim(), L = q.shape[nd - 2], E = q.shape[nd - 1], S = k.shape[nd - 2], Ev = v.shape[nd - 1];
  int64_t B = q.numel() / (L * E);
  double sc = scale.value_or(1.0 / std::sqrt(static_cast<double>(E)));
  Ref m = mask.defined() ? Ref::of(mask) : Ref();
  bool bool_mask = mask.defined() && mask.dtype() == kBool;
  Shape out_shape = q.shape;
  out_shape[nd - 1] = Ev;
  Ref out(out_shape);
  Shape bshape(q.shape.begin(), q.shape.end() - 2);
  for (int64_t b = 0; b < B; ++b) {
    Shape bidx = unravel(b, bshape);
    for (int64_t i = 0; i < L; ++i) {
      std::vector<double> s(S);
      bool any = false;
      for (int64_t j = 0; j < S; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < E; ++e) dot += q.v[(b * L + i) * E + e] * k.v[(b * S + j) * E + e];
        s[j] = dot * sc;
        bool keep = !causal || j <= i;
        if (mask.defined()) {
          Shape full = bidx;
          full.push_back(i);
          full.push_back(j);
          double mv = m.v[broadcast_index(full, m.shape)];
          if (bool_mask) keep = keep && mv != 0;
          else s[j] += mv;
        }
        if (!keep) s[j] = -std::numeric_limits<double>::infinity();
        any = any || s[j] != -std::numeric_limits<double>::infinity();
      }
      if (any) softmax_row(s, false);
      else std::fill(s.begin(), s.end(), 0.0);  // a row with every key masked gives zeros
      for (int64_t c = 0; c < Ev; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < S; ++j) acc += s[j] * v.v[(b * S + j) * Ev + c];
        out.v[(b * L + i) * Ev + c] = acc;
      }
    }
  }
  return out;
}

std::vector<OpSample> sdpa_samples() {
  std::vector<OpSample> out;
  auto add = [&](std::string name, Shape qs, Shape ks, Shape vs, DType t, Tensor mask, bool causal,
                 std::optional<double> scale = std::nullopt, bool nc = false) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {make_input(qs, t, 1, -1, 1, nc), make_input(ks, t, 2), make_input(vs, t, 3), mask};
    s.fn = [=](const TensorList& in) {
      return TensorList{scaled_dot_product_attention(in[0], in[1], in[2], in[3], 0.0, causal, scale)};
    };
    s.reference = [=](const TensorList& in) {
      return TensorList{ref_attention(Ref::of(in[0]), Ref::of(in[1]), Ref::of(in[2]), in[3], causal, scale).to(t)};
    };
    s.grad_inputs = {0, 1, 2};
    if (in_reduced(t)) s.atol = 2e-2;
    out.push_back(s);
  };
  for (DType t : kFloatTypes) add("[2,3,4]x[2,5,4]x[2,5,6] " + dname(t), {2, 3, 4}, {2, 5, 4}, {2, 5, 6}, t, {}, false);
  add("4-D batch, scale 0.3, noncontig q", {2, 2, 3, 4}, {2, 2, 3, 4}, {2, 2, 3, 2}, kFloat64, {}, false, 0.3, true);
  add("causal L=3 S=5", {1, 3, 4}, {1, 5, 4}, {1, 5, 2}, kFloat64, {}, true);
  add("causal L=4 S=4", {2, 4, 3}, {2, 4, 3}, {2, 4, 3}, kFloat32, {}, true);
  add("bool mask [3,5]", {2, 3, 4}, {2, 5, 4}, {2, 5, 2}, kFloat64,
      tensor<bool>({true, false, true, true, false, false, true, true, true, true, true, false, false, false, true},
                   {3, 5}, kBool),
      false);
  add("float mask [2,1,5]", {2, 3, 4}, {2, 5, 4}, {2, 5, 2}, kFloat64, make_input({2, 1, 5}, kFloat64, 9), false);
  add("fully masked row gives zeros", {1, 2, 3}, {1, 3, 3}, {1, 3, 2}, kFloat64,
      tensor<bool>({false, false, false, true, false, true}, {2, 3}, kBool), false);
  {
    // dropout_p: with a fixed generator the output is a deterministic function (gradcheck works);
    // every attention weight is either dropped or scaled by 1/(1-p).
    OpSample s;
    s.name = "dropout_p 0.5 with a fixed generator";
    s.inputs = {make_input({2, 3, 4}, kFloat64, 1), make_input({2, 5, 4}, kFloat64, 2), make_input({2, 5, 2}, kFloat64, 3)};
    s.fn = [](const TensorList& in) {
      Generator g(99);
      return TensorList{scaled_dot_product_attention(in[0], in[1], in[2], {}, 0.5, false, std::nullopt, &g)};
    };
    s.compare_values = false;
    s.check = [in = s.inputs](const TensorList& o) {
      // Identity value matrix: the output is the (dropped, rescaled) attention weights themselves.
      Tensor eye5 = tensor<double>({1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1}, {5, 5},
                                   kFloat64);
      Generator g(5);
      auto w = scaled_dot_product_attention(in[0], in[1], eye5, {}, 0.5, false, std::nullopt, &g).to_vector<double>();
      Ref p = ref_attention(Ref::of(in[0]), Ref::of(in[1]), Ref::of(eye5.unsqueeze(0).expand({2, 5, 5}).contiguous()),
                            {}, false, std::nullopt);
      int64_t dropped = 0;
      for (size_t i = 0; i < w.size(); ++i) {
        if (w[i] == 0) ++dropped;
        else {
          EXPECT_NEAR(w[i], 2 * p.v[i], 1e-12);
        }
      }
      EXPECT_GT(dropped, 0);
      EXPECT_LT(dropped, static_cast<int64_t>(w.size()));
      EXPECT_EQ(o[0].sizes().vec(), (Shape{2, 3, 2}));
    };
    out.push_back(s);
  }
  return out;
}
std::vector<ErrorSample> sdpa_errors() {
  auto q = [] { return make_input({2, 3, 4}, kFloat32, 1); };
  return {
      {"causal with a mask",
       [=] { scaled_dot_product_attention(q(), q(), q(), ones({3, 3}, kBool), 0.0, true); }, "is_causal"},
      {"embedding size", [=] { scaled_dot_product_attention(q(), make_input({2, 3, 5}, kFloat32, 2), q()); },
       "same embedding size"},
      {"dtype mismatch", [=] { scaled_dot_product_attention(q(), q(), make_input({2, 3, 4}, kFloat64, 2)); },
       "same dtype"},
      {"key/value length", [=] { scaled_dot_product_attention(q(), q(), make_input({2, 4, 4}, kFloat32, 2)); },
       "sequence length"},
  };
}
KILN_OP_SAMPLES(scaled_dot_product_attention, sdpa_samples, sdpa_errors);

// ---- _scaled_dot_product_flash_attention (Note [Flash attention]) ----
// The rows' weights P [N, L, S] (explicit softmax, zero where masked) and logsumexp [N, L] of
// the scaled scores, for 3-D q, k.
struct RefWeights {
  Ref p, lse;
};
RefWeights ref_weights(const Ref& q, const Ref& k, bool causal, double scale) {
  int64_t N = q.shape[0], L = q.shape[1], E = q.shape[2], S = k.shape[1];
  RefWeights w{Ref({N, L, S}), Ref({N, L})};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < L; ++i) {
      std::vector<double> s;
      std::vector<int64_t> cols;
      for (int64_t j = 0; j < S && (!causal || j <= i); ++j) {
        double dot = 0;
        for (int64_t e = 0; e < E; ++e) dot += q.v[(n * L + i) * E + e] * k.v[(n * S + j) * E + e];
        s.push_back(dot * scale);
        cols.push_back(j);
      }
      if (s.empty()) {
        w.lse.v[n * L + i] = -kInf;
        continue;
      }
      double m = *std::max_element(s.begin(), s.end()), sum = 0;
      for (double x : s) sum += std::exp(x - m);
      w.lse.v[n * L + i] = m + std::log(sum);
      for (size_t c = 0; c < s.size(); ++c) w.p.v[(n * L + i) * S + cols[c]] = std::exp(s[c] - m) / sum;
    }
  return w;
}

// a [B, L, H, E] as [B, H, L, E] (the heads of a projection, as attention reads them), and back.
Ref swap12(const Ref& a) {
  Ref r({a.shape[0], a.shape[2], a.shape[1], a.shape[3]});
  for (int64_t b = 0; b < a.shape[0]; ++b)
    for (int64_t i = 0; i < a.shape[1]; ++i)
      for (int64_t h = 0; h < a.shape[2]; ++h)
        for (int64_t e = 0; e < a.shape[3]; ++e) r.at({b, h, i, e}) = a.at({b, i, h, e});
  return r;
}
// a [..., rows, E] as [N, rows, E] (or shaped as `like`).
Ref flat3(Ref a) {
  const int64_t n = a.dim();
  a.shape = {a.numel() == 0 ? 0 : a.numel() / (a.shape[n - 2] * a.shape[n - 1]), a.shape[n - 2], a.shape[n - 1]};
  return a;
}
Ref shaped(Ref a, Shape s) {
  a.shape = std::move(s);
  return a;
}

// C [N, a, b] = A [N, a, k] B [N, k, b], with A or B read transposed ([N, k, a] / [N, b, k]).
Ref ref_bmm(const Ref& A, const Ref& B, bool ta, bool tb) {
  int64_t N = A.shape[0], a = ta ? A.shape[2] : A.shape[1], kk = ta ? A.shape[1] : A.shape[2];
  int64_t b = tb ? B.shape[1] : B.shape[2];
  Ref C({N, a, b});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < a; ++i)
      for (int64_t j = 0; j < b; ++j) {
        double acc = 0;
        for (int64_t t = 0; t < kk; ++t)
          acc += A.at({n, ta ? t : i, ta ? i : t}) * B.at({n, tb ? j : t, tb ? t : j});
        C.at({n, i, j}) = acc;
      }
  return C;
}

std::vector<OpSample> flash_samples() {
  std::vector<OpSample> out;
  auto add = [&](std::string name, Shape qs, Shape ks, Shape vs, DType t, bool causal, double scale, bool nc = false) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {make_input(qs, t, 11, -1, 1, nc), make_input(ks, t, 12), make_input(vs, t, 13)};
    s.fn = [=](const TensorList& in) {
      return call_op(OpId::_scaled_dot_product_flash_attention, {in[0], in[1], in[2]}, {causal, scale});
    };
    s.reference = [=](const TensorList& in) {
      RefWeights w = ref_weights(Ref::of(in[0]), Ref::of(in[1]), causal, scale);
      DType lt = t == kFloat64 ? kFloat64 : kFloat32;
      return TensorList{ref_bmm(w.p, Ref::of(in[2]), false, false).to(t), w.lse.to(lt)};
    };
    s.grad_inputs = {0, 1, 2};
    // Finite differences over the long samples' 7680 inputs took minutes of the CPU op tests;
    // the short ones check the gradient, the backward op's samples the long rows' kernels.
    s.check_grad = qs[1] * ks[1] <= 1024;
    if (in_reduced(t)) s.atol = 2e-2;
    out.push_back(s);
  };
  for (DType t : kFloatTypes) add("[2,3,4]x[2,5,4]x[2,5,6] " + dname(t), {2, 3, 4}, {2, 5, 4}, {2, 5, 6}, t, false, 0.5);
  add("causal L=3 S=5", {1, 3, 4}, {1, 5, 4}, {1, 5, 2}, kFloat64, true, 0.5);
  add("causal L=5 S=3, noncontig q", {2, 5, 3}, {2, 3, 3}, {2, 3, 3}, kFloat64, true, 0.7, true);
  add("causal L=S=4 float32", {2, 4, 3}, {2, 4, 3}, {2, 4, 3}, kFloat32, true, 1.0);
  // Rows longer than one tile of a device kernel (64), head size 16 (a tensor-core tile).
  for (DType t : {kFloat32, DType::BFloat16, DType::Float16})
    add("long causal L=S=80 E=16 " + dname(t), {2, 80, 16}, {2, 80, 16}, {2, 80, 16}, t, true, 0.25);
  add("long L=70 S=130 E=32 bfloat16", {1, 70, 32}, {1, 130, 32}, {1, 130, 32}, DType::BFloat16, false, 0.2);
  // The heads of [B, L, H, E] projections read as [B, H, L, E] views (strided, not copied, where
  // a kernel can), at the tensor-core kernels' head sizes.
  for (DType t : {kFloat64, kFloat32, DType::BFloat16}) {
    OpSample s;
    s.name = "heads [2,70,3,16] viewed [2,3,70,16] causal " + dname(t);
    s.inputs = {make_input({2, 70, 3, 16}, t, 14), make_input({2, 70, 3, 16}, t, 15), make_input({2, 70, 3, 16}, t, 16)};
    s.fn = [](const TensorList& in) {
      return call_op(OpId::_scaled_dot_product_flash_attention,
                     {in[0].transpose(1, 2), in[1].transpose(1, 2), in[2].transpose(1, 2)}, {true, 0.25});
    };
    s.reference = [t](const TensorList& in) {
      Ref q = flat3(swap12(Ref::of(in[0]))), k = flat3(swap12(Ref::of(in[1]))), v = flat3(swap12(Ref::of(in[2])));
      RefWeights w = ref_weights(q, k, true, 0.25);
      DType lt = t == kFloat64 ? kFloat64 : kFloat32;
      return TensorList{shaped(ref_bmm(w.p, v, false, false), {2, 3, 70, 16}).to(t), shaped(w.lse, {2, 3, 70}).to(lt)};
    };
    s.grad_inputs = {0, 1, 2};
    s.check_grad = false;  // 6720 inputs; the backward op's samples check the same kernels
    if (in_reduced(t)) s.atol = 2e-2;
    out.push_back(s);
  }
  {
    OpSample s;
    s.name = "no keys: zeros and -inf";
    s.inputs = {make_input({1, 2, 3}, kFloat64, 1), make_input({1, 0, 3}, kFloat64, 2),
                make_input({1, 0, 2}, kFloat64, 3)};
    s.fn = [](const TensorList& in) {
      return call_op(OpId::_scaled_dot_product_flash_attention, {in[0], in[1], in[2]}, {false, 1.0});
    };
    s.reference = [](const TensorList&) {
      return TensorList{Ref({1, 2, 2}).to(kFloat64), Ref({1, 2}, -kInf).to(kFloat64)};
    };
    s.check_grad = false;
    out.push_back(s);
  }
  return out;
}
std::vector<ErrorSample> flash_errors() {
  auto x = [](Shape s, DType t = kFloat32) { return make_input(s, t, 1); };
  auto call = [](const Tensor& q, const Tensor& k, const Tensor& v) {
    call_op(OpId::_scaled_dot_product_flash_attention, {q, k, v}, {false, 1.0});
  };
  return {
      {"2-D query", [=] { call(x({3, 4}), x({3, 4}), x({3, 4})); }, "expected query, key and value of one dim"},
      {"batch dims", [=] { call(x({1, 2, 3, 4}), x({2, 1, 3, 4}), x({2, 1, 3, 4})); }, "expected q [..., L, E]"},
      {"head sizes", [=] { call(x({2, 3, 4}), x({2, 5, 3}), x({2, 5, 4})); }, "expected q [..., L, E]"},
      {"dtypes", [=] { call(x({2, 3, 4}), x({2, 5, 4}, kFloat64), x({2, 5, 4})); }, "of one dtype"},
  };
}
KILN_OP_SAMPLES(_scaled_dot_product_flash_attention, flash_samples, flash_errors);

// The backward op against the explicit weights: dV = P^T dO, dS = P * (dO V^T - D) with
// D = rowsum(dO * O) - grad_logsumexp, dQ = scale dS K, dK = scale dS^T Q.
std::vector<OpSample> flash_backward_samples() {
  std::vector<OpSample> out;
  auto add = [&](std::string name, Shape qs, Shape ks, Shape vs, DType t, bool causal, double scale, bool glse) {
    OpSample s;
    s.name = std::move(name);
    Tensor q = make_input(qs, t, 21, -1, 1), k = make_input(ks, t, 22), v = make_input(vs, t, 23);
    std::vector<Tensor> f = call_op(OpId::_scaled_dot_product_flash_attention, {q, k, v}, {causal, scale});
    Tensor go = make_input(f[0].sizes().vec(), t, 24);
    Tensor gl = glse ? make_input(f[1].sizes().vec(), f[1].dtype(), 25) : Tensor();
    s.inputs = {go, q, k, v, f[0], f[1], gl};
    s.fn = [=](const TensorList& in) {
      return call_op(OpId::_scaled_dot_product_flash_attention_backward, in, {causal, scale});
    };
    s.reference = [=](const TensorList& in) {
      Ref dO = Ref::of(in[0]), Q = Ref::of(in[1]), K = Ref::of(in[2]), V = Ref::of(in[3]), O = Ref::of(in[4]);
      RefWeights w = ref_weights(Q, K, causal, scale);
      Ref dP = ref_bmm(dO, V, false, true);  // [N, L, S]
      int64_t N = qs[0], L = qs[1], S = ks[1], Ev = vs[2];
      Ref dS({N, L, S});
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < L; ++i) {
          double D = glse ? -Ref::of(in[6]).v[n * L + i] : 0.0;
          for (int64_t c = 0; c < Ev; ++c) D += dO.at({n, i, c}) * O.at({n, i, c});
          for (int64_t j = 0; j < S; ++j) dS.at({n, i, j}) = w.p.at({n, i, j}) * (dP.at({n, i, j}) - D) * scale;
        }
      return TensorList{ref_bmm(dS, K, false, false).to(t), ref_bmm(dS, Q, true, false).to(t),
                        ref_bmm(w.p, dO, true, false).to(t)};
    };
    s.check_grad = false;
    if (in_reduced(t)) s.atol = 3e-2;
    out.push_back(s);
  };
  for (DType t : kFloatTypes)
    add("[2,3,4]x[2,5,4]x[2,5,6] " + dname(t), {2, 3, 4}, {2, 5, 4}, {2, 5, 6}, t, false, 0.5, false);
  add("causal L=5 S=3 with grad_logsumexp", {2, 5, 3}, {2, 3, 3}, {2, 3, 3}, kFloat64, true, 0.7, true);
  for (DType t : {kFloat32, DType::BFloat16, DType::Float16})
    add("long causal L=S=80 E=16 " + dname(t), {2, 80, 16}, {2, 80, 16}, {2, 80, 16}, t, true, 0.25, false);
  add("long L=70 S=130 E=32 bfloat16", {1, 70, 32}, {1, 130, 32}, {1, 130, 32}, DType::BFloat16, false, 0.2, true);
  return out;
}
KILN_OP_SAMPLES(_scaled_dot_product_flash_attention_backward, flash_backward_samples, nullptr);

// ---- embedding_bag ----
std::vector<OpSample> embedding_bag_samples() {
  std::vector<OpSample> out;
  // bags: list of index lists; psw: per-index weights (flat) or empty.
  auto add = [&](std::string name, Tensor idx, Tensor offs, std::string mode, Tensor psw, bool last, int64_t pad,
                 std::vector<std::vector<int64_t>> bags_pos) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {make_input({10, 3}, kFloat64, 1), idx, offs, psw};
    s.fn = [=](const TensorList& in) {
      return TensorList{embedding_bag(in[0], in[1], in[2], mode, in[3], last, pad)};
    };
    s.reference = [=](const TensorList& in) {
      Ref w = Ref::of(in[0]), ix = Ref::of(in[1]);
      Ref pw = in[3].defined() ? Ref::of(in[3]) : Ref();
      int64_t B = static_cast<int64_t>(bags_pos.size()), D = 3;
      Ref o({B, D});
      for (int64_t b = 0; b < B; ++b) {
        int64_t cnt = 0;
        for (int64_t d = 0; d < D; ++d) o.v[b * D + d] = mode == "max" ? -INFINITY : 0;
        for (int64_t pos : bags_pos[b]) {
          int64_t r = static_cast<int64_t>(ix.v[pos]);
          if (r == pad) continue;
          ++cnt;
          for (int64_t d = 0; d < D; ++d) {
            double e = w.v[r * D + d] * (in[3].defined() ? pw.v[pos] : 1.0);
            double& acc = o.v[b * D + d];
            acc = mode == "max" ? std::max(acc, e) : acc + e;
          }
        }
        for (int64_t d = 0; d < D; ++d) {
          double& acc = o.v[b * D + d];
          if (cnt == 0) acc = 0;
          else if (mode == "mean") acc /= cnt;
        }
      }
      return TensorList{o.to(kFloat64)};
    };
    s.grad_inputs = {0, 3};
    out.push_back(s);
  };
  Tensor idx2 = tensor<int64_t>({1, 2, 4, 5, 4, 3, 2, 9}, {2, 4}, kInt64);
  std::vector<std::vector<int64_t>> bags2{{0, 1, 2, 3}, {4, 5, 6, 7}};
  Tensor idx1 = tensor<int64_t>({1, 2, 4, 5, 4, 3, 2, 9, 7}, {9}, kInt64);
  Tensor offs = tensor<int64_t>({0, 2, 2, 5}, {4}, kInt64);
  std::vector<std::vector<int64_t>> bags1{{0, 1}, {}, {2, 3, 4}, {5, 6, 7, 8}};
  for (std::string mode : {"sum", "mean", "max"}) {
    add("2-D " + mode, idx2, {}, mode, {}, false, -1, bags2);
    add("1-D offsets, empty bag " + mode, idx1, offs, mode, {}, false, -1, bags1);
    add("1-D include_last_offset " + mode, idx1, tensor<int64_t>({0, 2, 2, 5, 8}, {5}, kInt64), mode, {}, true, -1,
        {{0, 1}, {}, {2, 3, 4}, {5, 6, 7}});
    add("padding_idx 4 " + mode, idx1, offs, mode, {}, false, 4, bags1);
  }
  add("per_sample_weights sum", idx1, offs, "sum", make_input({9}, kFloat64, 5), false, -1, bags1);
  add("per_sample_weights 2-D", idx2, {}, "sum", make_input({2, 4}, kFloat64, 6), false, 2, bags2);
  add("int32 indices", tensor<int64_t>({3, 3, 0}, {3}, kInt64).to(kInt32), tensor<int64_t>({0, 1}, {2}, kInt64).to(kInt32),
      "mean", {}, false, -1, {{0}, {1, 2}});
  return out;
}
std::vector<ErrorSample> embedding_bag_errors() {
  auto w = [] { return make_input({10, 3}, kFloat32, 1); };
  auto i1 = [] { return tensor<int64_t>({1, 2, 3}, {3}, kInt64); };
  return {
      {"bad mode", [=] { embedding_bag(w(), i1(), tensor<int64_t>({0}, {1}, kInt64), "min"); }, "mode"},
      {"1-D without offsets", [=] { embedding_bag(w(), i1()); }, "offsets"},
      {"2-D with offsets",
       [=] {
         embedding_bag(w(), i1().view({1, 3}), tensor<int64_t>({0}, {1}, kInt64));
       },
       "offsets"},
      {"per_sample_weights with mean",
       [=] { embedding_bag(w(), i1(), tensor<int64_t>({0}, {1}, kInt64), "mean", ones({3})); }, "per_sample_weights"},
      {"float indices", [=] { embedding_bag(w(), ones({3}), tensor<int64_t>({0}, {1}, kInt64)); }, "integer indices"},
      // torch's value checks on offsets and indices.
      {"offsets not from 0",
       [=] {
         embedding_bag(w(), i1(), tensor<int64_t>({1, 2}, {2}, kInt64));
       },
       "embedding_bag: offsets[0] has to be 0"},
      {"decreasing offsets",
       [=] {
         embedding_bag(w(), i1(), tensor<int64_t>({0, 2, 1}, {3}, kInt64));
       },
       "embedding_bag: offsets must be non-decreasing, got offsets[2] = 1 after offsets[1] = 2"},
      {"offsets past the indices",
       [=] {
         embedding_bag(w(), i1(), tensor<int64_t>({0, 5}, {2}, kInt64));
       },
       "offsets[-1] can not be greater than input's length 3"},
      {"negative index",
       [=] {
         embedding_bag(w(), tensor<int64_t>({1, -1, 3}, {3}, kInt64), tensor<int64_t>({0}, {1}, kInt64));
       },
       "embedding_bag: index -1 is out of bounds for dimension 0 with size 10"},
      {"negative index 2-D",
       [=] {
         embedding_bag(w(), tensor<int64_t>({1, -2}, {1, 2}, kInt64));
       },
       "embedding_bag: index -2 is out of bounds"},
      {"index too large",
       [=] { embedding_bag(w(), tensor<int64_t>({10}, {1}, kInt64), tensor<int64_t>({0}, {1}, kInt64)); },
       "embedding_bag: index 10 is out of bounds"},
  };
}
KILN_OP_SAMPLES(embedding_bag, embedding_bag_samples, embedding_bag_errors);

// ---- interpolate ----
// torch's source indices and weights (UpSample.h, UpSampleBicubic2d.cpp, AdaptiveAveragePooling.cpp),
// as (source index, weight) taps of one output index along one dim; the reference multiplies
// them over the dims. nearest modes compute in float, as torch.
using Taps = std::vector<std::pair<int64_t, double>>;
Taps ref_taps(const std::string& mode, int64_t o, int64_t in, int64_t out, bool ac, std::optional<double> sf) {
  if (mode == "nearest") {
    if (out == in) return {{o, 1.0}};
    if (out == 2 * in) return {{o >> 1, 1.0}};
    float scale = sf ? static_cast<float>(1.0 / *sf) : static_cast<float>(in) / static_cast<float>(out);
    return {{std::min(static_cast<int64_t>(std::floor(static_cast<float>(o) * scale)), in - 1), 1.0}};
  }
  if (mode == "nearest-exact") {
    float scale = sf ? static_cast<float>(1.0 / *sf) : static_cast<float>(in) / static_cast<float>(out);
    return {{std::min(static_cast<int64_t>(std::floor((static_cast<float>(o) + 0.5f) * scale)), in - 1), 1.0}};
  }
  if (mode == "area") {
    const int64_t start = (o * in) / out, end = ((o + 1) * in + out - 1) / out;
    Taps t;
    for (int64_t i = start; i < end; ++i) t.push_back({i, 1.0 / static_cast<double>(end - start)});
    return t;
  }
  if (in == out) return {{o, 1.0}};
  double scale = ac ? (out > 1 ? double(in - 1) / double(out - 1) : 0.0) : (sf ? 1.0 / *sf : double(in) / double(out));
  if (mode == "bicubic") {
    const double real = ac ? scale * o : scale * (o + 0.5) - 0.5, A = -0.75;
    const int64_t base = std::min(static_cast<int64_t>(std::floor(real)), in - 1);
    const double t = std::min(std::max(real - static_cast<double>(base), 0.0), 1.0);
    auto c1 = [&](double x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };
    auto c2 = [&](double x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };
    const double w[4] = {c2(t + 1), c1(t), c1(1 - t), c2(2 - t)};
    Taps taps;
    for (int k = 0; k < 4; ++k) taps.push_back({std::clamp<int64_t>(base - 1 + k, 0, in - 1), w[k]});
    return taps;
  }
  double src = ac ? scale * o : std::max(scale * (o + 0.5) - 0.5, 0.0);
  int64_t i0 = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
  double l1 = std::min(std::max(src - i0, 0.0), 1.0);
  return {{i0, 1 - l1}, {i0 + (i0 < in - 1 ? 1 : 0), l1}};
}

std::vector<OpSample> interpolate_samples() {
  std::vector<OpSample> out;
  auto add = [&](std::string name, Tensor x, std::optional<std::vector<int64_t>> size,
                 std::optional<std::vector<double>> sf, std::string mode, std::optional<bool> ac) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {x};
    s.fn = [=](const TensorList& in) { return TensorList{interpolate(in[0], size, sf, mode, ac)}; };
    s.reference = [=](const TensorList& in) {
      Ref a = Ref::of(in[0]);
      int64_t sd = a.dim() - 2;
      Shape os{a.shape[0], a.shape[1]};
      for (int64_t i = 0; i < sd; ++i) {
        int64_t v = size ? (*size)[size->size() == 1 ? 0 : i]
                         : static_cast<int64_t>(std::floor(double(a.shape[i + 2]) * (*sf)[sf->size() == 1 ? 0 : i]));
        os.push_back(v);
      }
      auto sfi = [&](int64_t i) {
        return sf ? std::optional<double>((*sf)[sf->size() == 1 ? 0 : i]) : std::nullopt;
      };
      Ref o(os);
      for (int64_t f = 0; f < o.numel(); ++f) {
        Shape idx = unravel(f, os);
        std::vector<Taps> taps;
        for (int64_t i = 0; i < sd; ++i)
          taps.push_back(ref_taps(mode, idx[i + 2], a.shape[i + 2], os[i + 2], ac.value_or(false), sfi(i)));
        // Sum over every combination of one tap per dim.
        std::vector<size_t> pick(static_cast<size_t>(sd), 0);
        double acc = 0;
        for (;;) {
          Shape src = idx;
          double w = 1;
          for (int64_t i = 0; i < sd; ++i) {
            src[i + 2] = taps[i][pick[i]].first;
            w *= taps[i][pick[i]].second;
          }
          acc += w * a.at(src);
          int64_t i = sd - 1;
          while (i >= 0 && ++pick[i] == taps[i].size()) pick[i--] = 0;
          if (i < 0) break;
        }
        o.v[f] = acc;
      }
      return TensorList{o.to(in[0].dtype())};
    };
    if (in_reduced(x.dtype())) s.atol = 2e-2;
    out.push_back(s);
  };
  using IV = std::vector<int64_t>;
  using DV = std::vector<double>;
  for (DType t : kFloatTypes) {
    add("nearest 4-D size [5,3] " + dname(t), make_input({1, 2, 3, 4}, t, 1), IV{5, 3}, std::nullopt, "nearest", std::nullopt);
    add("bilinear size [5,7] " + dname(t), make_input({1, 2, 3, 4}, t, 2), IV{5, 7}, std::nullopt, "bilinear", std::nullopt);
    add("bicubic size [5,7] " + dname(t), make_input({1, 2, 3, 4}, t, 12), IV{5, 7}, std::nullopt, "bicubic", std::nullopt);
  }
  add("nearest uint8 x2", make_input({1, 1, 2, 3}, kUInt8, 3, 0, 200), std::nullopt, DV{2.0}, "nearest", std::nullopt);
  add("nearest scale 1.7", make_input({2, 1, 3, 4}, kFloat64, 4), std::nullopt, DV{1.7, 0.6}, "nearest", std::nullopt);
  add("nearest 3-D size 7", make_input({2, 2, 5}, kFloat64, 5, -2, 2, true), IV{7}, std::nullopt, "nearest", std::nullopt);
  add("nearest 3-D scale 0.5", make_input({1, 2, 6}, kFloat32, 6), std::nullopt, DV{0.5}, "nearest", std::nullopt);
  add("nearest 5-D size [3,2,5]", make_input({1, 2, 2, 3, 4}, kFloat64, 13), IV{3, 2, 5}, std::nullopt, "nearest",
      std::nullopt);
  add("bilinear align_corners", make_input({1, 2, 3, 4}, kFloat64, 7), IV{5, 7}, std::nullopt, "bilinear", true);
  add("bilinear scale 1.5 (scale used as given)", make_input({1, 1, 4, 4}, kFloat64, 8), std::nullopt, DV{1.5}, "bilinear",
      false);
  add("bilinear downsample scale 0.4", make_input({1, 1, 5, 6}, kFloat64, 9, -2, 2, true), std::nullopt, DV{0.4, 0.7},
      "bilinear", std::nullopt);
  add("bilinear align_corners to 1x1", make_input({1, 1, 3, 3}, kFloat64, 10), IV{1, 1}, std::nullopt, "bilinear", true);
  add("bilinear same size", make_input({1, 1, 3, 3}, kFloat64, 11), IV{3, 3}, std::nullopt, "bilinear", std::nullopt);
  // PyTorch 2's modes and ranks beyond nearest/bilinear (issue #30).
  add("nearest-exact 4-D size [5,3]", make_input({1, 2, 3, 4}, kFloat64, 14), IV{5, 3}, std::nullopt, "nearest-exact",
      std::nullopt);
  add("nearest-exact 3-D scale 0.6", make_input({2, 1, 7}, kFloat32, 15), std::nullopt, DV{0.6}, "nearest-exact",
      std::nullopt);
  add("nearest-exact uint8 5-D", make_input({1, 1, 2, 2, 3}, kUInt8, 16, 0, 200), IV{3, 3, 4}, std::nullopt,
      "nearest-exact", std::nullopt);
  add("linear 3-D size 9", make_input({2, 3, 4}, kFloat64, 17, -2, 2, true), IV{9}, std::nullopt, "linear", std::nullopt);
  add("linear 3-D align_corners scale 0.5", make_input({1, 2, 8}, kFloat64, 18), std::nullopt, DV{0.5}, "linear", true);
  add("trilinear size [3,4,5]", make_input({1, 2, 2, 3, 4}, kFloat64, 19), IV{3, 4, 5}, std::nullopt, "trilinear",
      std::nullopt);
  add("trilinear align_corners", make_input({1, 1, 3, 2, 3}, kFloat32, 20), IV{4, 4, 2}, std::nullopt, "trilinear", true);
  add("bicubic align_corners", make_input({1, 1, 4, 3}, kFloat64, 21), IV{6, 5}, std::nullopt, "bicubic", true);
  add("bicubic downsample scale 0.5", make_input({1, 2, 6, 8}, kFloat64, 22, -2, 2, true), std::nullopt, DV{0.5},
      "bicubic", std::nullopt);
  add("bicubic one dim kept", make_input({1, 1, 3, 4}, kFloat64, 23), IV{3, 7}, std::nullopt, "bicubic", std::nullopt);
  add("area 4-D size [2,3]", make_input({1, 2, 5, 7}, kFloat64, 24, -2, 2, true), IV{2, 3}, std::nullopt, "area",
      std::nullopt);
  add("area 3-D scale 0.5", make_input({2, 2, 7}, kFloat32, 25), std::nullopt, DV{0.5}, "area", std::nullopt);
  add("area 5-D upsample", make_input({1, 1, 2, 2, 3}, kFloat64, 26), IV{3, 4, 3}, std::nullopt, "area", std::nullopt);
  return out;
}
std::vector<ErrorSample> interpolate_errors() {
  auto x = [] { return make_input({1, 1, 3, 3}, kFloat32, 1); };
  return {
      {"size and scale", [=] { interpolate(x(), std::vector<int64_t>{4, 4}, std::vector<double>{2.0}); }, "only one"},
      {"neither", [=] { interpolate(x(), std::nullopt); }, "either size or scale_factor"},
      {"align_corners with nearest", [=] { interpolate(x(), std::vector<int64_t>{4, 4}, std::nullopt, "nearest", true); },
       "align_corners"},
      {"align_corners with area", [=] { interpolate(x(), std::vector<int64_t>{2, 2}, std::nullopt, "area", false); },
       "align_corners"},
      {"bilinear on 3-D", [] { interpolate(make_input({1, 1, 3}, kFloat32, 1), std::vector<int64_t>{4}, std::nullopt, "bilinear"); },
       "bilinear mode needs a 4-D"},
      {"linear on 4-D", [=] { interpolate(x(), std::vector<int64_t>{4, 4}, std::nullopt, "linear"); },
       "linear mode needs a 3-D"},
      {"trilinear on 4-D", [=] { interpolate(x(), std::vector<int64_t>{4, 4}, std::nullopt, "trilinear"); },
       "trilinear mode needs a 5-D"},
      {"bicubic on 5-D",
       [] { interpolate(make_input({1, 1, 2, 2, 2}, kFloat32, 1), std::vector<int64_t>{3, 3, 3}, std::nullopt, "bicubic"); },
       "bicubic mode needs a 4-D"},
      {"area of an integer tensor",
       [] { interpolate(make_input({1, 1, 4, 4}, kInt64, 1), std::vector<int64_t>{2, 2}, std::nullopt, "area"); },
       "area mode expects a floating input"},
      {"nearest on 2-D", [] { interpolate(make_input({3, 3}, kFloat32, 1), std::vector<int64_t>{4}, std::nullopt); },
       "3-D (N, C, L), 4-D"},
      {"bad mode", [=] { interpolate(x(), std::vector<int64_t>{4, 4}, std::nullopt, "cubic"); }, "mode must be one of"},
  };
}
KILN_OP_SAMPLES(interpolate, interpolate_samples, interpolate_errors);

}  // namespace
}  // namespace kiln::test
