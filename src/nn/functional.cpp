// nn::functional entries that are compositions rather than single ops: bilinear, embedding and
// embedding_bag in torch.nn.functional's argument order, and multi_head_attention_forward.
#include "kiln/nn/functional.h"

#include <cmath>
#include <limits>

#include "core/tensor_impl.h"
#include "kiln/autograd.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/pointwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"

namespace kiln::nn::functional {

namespace {

std::string shape_of(const Tensor& t) { return t.defined() ? shape_str(t.sizes()) : std::string("undefined"); }

// F.embedding's padding_idx: within [-num_embeddings, num_embeddings), negatives from the end; the
// op takes -1 for "none".
int64_t op_padding_idx(const char* fn, std::optional<int64_t> padding_idx, const Tensor& weight) {
  if (!padding_idx) return -1;
  KILN_CHECK(weight.defined() && weight.dim() == 2, fn, ": expected a 2-D weight, got shape ", shape_of(weight));
  int64_t n = weight.sizes()[0], p = *padding_idx;
  KILN_CHECK(p >= -n && p < n, fn, ": padding_idx must be within num_embeddings (", n, "), got ", p);
  return p < 0 ? p + n : p;
}

}  // namespace

namespace {
// inplace = true runs `in_place` on a handle sharing x's impl, so the caller's tensor is written.
template <class Out, class In>
Tensor maybe_inplace(const Tensor& x, bool inplace, const Out& out_of_place, const In& in_place) {
  if (!inplace) return out_of_place(x);
  Tensor y = x;
  in_place(y);
  return y;
}
}  // namespace

Tensor hardtanh(const Tensor& x, const Scalar& min_val, const Scalar& max_val, bool inplace) {
  return maybe_inplace(
      x, inplace, [&](const Tensor& t) { return kiln::hardtanh(t, min_val, max_val); },
      [&](Tensor& t) { kiln::hardtanh_(t, min_val, max_val); });
}
Tensor leaky_relu(const Tensor& x, const Scalar& negative_slope, bool inplace) {
  return maybe_inplace(
      x, inplace, [&](const Tensor& t) { return kiln::leaky_relu(t, negative_slope); },
      [&](Tensor& t) { kiln::leaky_relu_(t, negative_slope); });
}
Tensor elu(const Tensor& x, const Scalar& alpha, bool inplace) {
  return maybe_inplace(
      x, inplace, [&](const Tensor& t) { return kiln::elu(t, alpha); }, [&](Tensor& t) { kiln::elu_(t, alpha); });
}
Tensor selu(const Tensor& x, bool inplace) {
  return maybe_inplace(
      x, inplace, [](const Tensor& t) { return kiln::selu(t); }, [](Tensor& t) { kiln::selu_(t); });
}
Tensor celu(const Tensor& x, const Scalar& alpha, bool inplace) {
  return maybe_inplace(
      x, inplace, [&](const Tensor& t) { return kiln::celu(t, alpha); }, [&](Tensor& t) { kiln::celu_(t, alpha); });
}
Tensor hardsigmoid(const Tensor& x, bool inplace) {
  return maybe_inplace(
      x, inplace, [](const Tensor& t) { return kiln::hardsigmoid(t); }, [](Tensor& t) { kiln::hardsigmoid_(t); });
}
Tensor hardswish(const Tensor& x, bool inplace) {
  return maybe_inplace(
      x, inplace, [](const Tensor& t) { return kiln::hardswish(t); }, [](Tensor& t) { kiln::hardswish_(t); });
}
Tensor mish(const Tensor& x, bool inplace) {
  return maybe_inplace(
      x, inplace, [](const Tensor& t) { return kiln::mish(t); }, [](Tensor& t) { kiln::mish_(t); });
}

Tensor relu6(const Tensor& x, bool inplace) { return hardtanh(x, 0.0, 6.0, inplace); }

Tensor bilinear(const Tensor& x1, const Tensor& x2, const Tensor& weight, const Tensor& bias) {
  const char* fn = "bilinear";
  KILN_CHECK(x1.defined() && x2.defined() && weight.defined(), fn, ": input1, input2 and weight must be defined");
  KILN_CHECK(weight.dim() == 3, fn, ": expected a 3-D weight [out, in1, in2], got shape ", shape_of(weight));
  int64_t out = weight.sizes()[0], in1 = weight.sizes()[1], in2 = weight.sizes()[2];
  KILN_CHECK(x1.dim() >= 1 && x1.sizes().back() == in1, fn, ": expected input1 of shape [*, ", in1,
             "] for weight of shape ", shape_of(weight), ", got ", shape_of(x1));
  KILN_CHECK(x2.dim() >= 1 && x2.sizes().back() == in2, fn, ": expected input2 of shape [*, ", in2,
             "] for weight of shape ", shape_of(weight), ", got ", shape_of(x2));
  std::vector<int64_t> batch(x1.sizes().begin(), x1.sizes().end() - 1);
  KILN_CHECK(batch == std::vector<int64_t>(x2.sizes().begin(), x2.sizes().end() - 1), fn,
             ": input1 and input2 must have the same batch dimensions, got shapes ", shape_of(x1), " and ",
             shape_of(x2));
  KILN_CHECK(!bias.defined() || (bias.dim() == 1 && bias.sizes()[0] == out), fn, ": expected bias of shape [", out,
             "], got ", shape_of(bias));
  int64_t b = 1;
  for (int64_t s : batch) b *= s;
  // t[b, o, j] = Σ_i x1[b, i] W[o, i, j] as one matmul, then y[b, o] = Σ_j t[b, o, j] x2[b, j].
  Tensor w = weight.permute({1, 0, 2}).reshape({in1, out * in2});
  Tensor t = matmul(x1.reshape({b, in1}), w).reshape({b, out, in2});
  Tensor y = (t * x2.reshape({b, 1, in2})).sum({2});
  if (bias.defined()) y = y + bias;
  batch.push_back(out);
  return y.reshape(batch);
}

namespace {

// torch's embedding_renorm_: each referenced row whose norm exceeds max_norm is scaled by
// max_norm / (norm + 1e-7). A repeated index rescales its row once (every copy writes the same row).
void embedding_renorm_(const Tensor& weight, const Tensor& input, double max_norm, double norm_type) {
  KILN_CHECK(weight.defined() && weight.dim() == 2, "embedding: expected a 2-D weight, got shape ", shape_of(weight));
  KILN_CHECK(input.defined() && is_integral(input.dtype(), false), "embedding: expected integer indices, got ",
             input.defined() ? std::string(dtype_name(input.dtype())) : std::string("an undefined tensor"));
  if (input.numel() == 0) return;
  NoGradGuard no_grad;
  Tensor idx = input.contiguous().flatten().to(kInt64);
  Tensor rows = index_select(weight, 0, idx);
  Tensor norms = norm(rows, norm_type, {1}, true);
  Tensor scale = where(gt(norms, Scalar(max_norm)), max_norm / (norms + 1e-7), Scalar(1.0));
  Tensor w = weight;
  index_put_(w, {idx}, (rows * scale).to(weight.dtype()));
}

}  // namespace

Tensor embedding(const Tensor& input, const Tensor& weight, std::optional<int64_t> padding_idx,
                 std::optional<double> max_norm, double norm_type) {
  int64_t pi = op_padding_idx("embedding", padding_idx, weight);
  if (max_norm) embedding_renorm_(weight, input, *max_norm, norm_type);
  return kiln::embedding(weight, input, pi);
}

Tensor embedding_bag(const Tensor& input, const Tensor& weight, const Tensor& offsets, const std::string& mode,
                     const Tensor& per_sample_weights, bool include_last_offset, std::optional<int64_t> padding_idx) {
  return kiln::embedding_bag(weight, input, offsets, mode, per_sample_weights, include_last_offset,
                             op_padding_idx("embedding_bag", padding_idx, weight));
}

namespace {

constexpr const char* kMha = "multi_head_attention_forward";

// torch's _canonical_mask: a bool mask becomes an additive float mask (-inf where true); a float
// mask is added as given (cast to the query's dtype).
Tensor canonical_mask(const Tensor& mask, const char* name, DType dtype) {
  if (!mask.defined()) return mask;
  KILN_CHECK(mask.dtype() == kBool || mask.is_floating_point(), kMha, ": only bool and floating types of ", name,
             " are supported, got dtype ", mask.dtype());
  if (mask.dtype() != kBool) return mask.to(dtype);
  return where(mask, Scalar(-std::numeric_limits<double>::infinity()),
               zeros({}, TensorOptions(dtype).device(mask.device())));
}

// torch's _mha_shape_check: whether the inputs are batched ([L, N, E]) or unbatched ([L, E]).
bool mha_is_batched(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& kpm, const Tensor& mask,
                    int64_t num_heads) {
  KILN_CHECK(q.defined() && k.defined() && v.defined(), kMha, ": query, key and value must be defined");
  if (q.dim() == 3) {
    KILN_CHECK(k.dim() == 3 && v.dim() == 3, kMha, ": for batched (3-D) query, expected key and value to be 3-D, got ",
               k.dim(), "-D and ", v.dim(), "-D");
    KILN_CHECK(!kpm.defined() || kpm.dim() == 2, kMha,
               ": for batched (3-D) query, expected key_padding_mask to be undefined or 2-D, got ", kpm.dim(), "-D");
    KILN_CHECK(!mask.defined() || mask.dim() == 2 || mask.dim() == 3, kMha,
               ": for batched (3-D) query, expected attn_mask to be undefined, 2-D or 3-D, got ", mask.dim(), "-D");
    return true;
  }
  KILN_CHECK(q.dim() == 2, kMha, ": query should be unbatched 2-D or batched 3-D, got shape ", shape_of(q));
  KILN_CHECK(k.dim() == 2 && v.dim() == 2, kMha, ": for unbatched (2-D) query, expected key and value to be 2-D, got ",
             k.dim(), "-D and ", v.dim(), "-D");
  KILN_CHECK(!kpm.defined() || kpm.dim() == 1, kMha,
             ": for unbatched (2-D) query, expected key_padding_mask to be undefined or 1-D, got ", kpm.dim(), "-D");
  if (mask.defined()) {
    KILN_CHECK(mask.dim() == 2 || mask.dim() == 3, kMha,
               ": for unbatched (2-D) query, expected attn_mask to be undefined, 2-D or 3-D, got ", mask.dim(), "-D");
    if (mask.dim() == 3) {
      std::vector<int64_t> want{num_heads, q.sizes()[0], k.sizes()[0]};
      KILN_CHECK(mask.sizes() == IntArrayRef(want), kMha, ": expected a 3-D attn_mask of shape ", shape_str(want),
                 " for unbatched input, got ", shape_of(mask));
    }
  }
  return false;
}

// Appends one column to a [.., S] mask (torch pads with 0: the extra key stays visible).
Tensor pad_last(const Tensor& mask) { return mask.defined() ? pad(mask, {0, 1}) : mask; }

}  // namespace

std::tuple<Tensor, Tensor> multi_head_attention_forward(
    const Tensor& query_in, const Tensor& key_in, const Tensor& value_in, int64_t embed_dim_to_check, int64_t num_heads,
    const Tensor& in_proj_weight, const Tensor& in_proj_bias, const Tensor& bias_k, const Tensor& bias_v,
    bool add_zero_attn, double dropout_p, const Tensor& out_proj_weight, const Tensor& out_proj_bias, bool training,
    const Tensor& key_padding_mask, bool need_weights, const Tensor& attn_mask, bool use_separate_proj_weight,
    const Tensor& q_proj_weight, const Tensor& k_proj_weight, const Tensor& v_proj_weight, const Tensor& static_k,
    const Tensor& static_v, bool average_attn_weights, bool is_causal) {
  bool batched = mha_is_batched(query_in, key_in, value_in, key_padding_mask, attn_mask, num_heads);
  Tensor query = query_in, key = key_in, value = value_in, kpm = key_padding_mask;
  if (!batched) {
    // Keep shared handles shared: the packed projection below runs once for self-attention.
    query = query_in.unsqueeze(1);
    key = key_in.is_same(query_in) ? query : key_in.unsqueeze(1);
    value = value_in.is_same(key_in) ? key : value_in.is_same(query_in) ? query : value_in.unsqueeze(1);
    if (kpm.defined()) kpm = kpm.unsqueeze(0);
  }
  int64_t L = query.sizes()[0], N = query.sizes()[1], E = query.sizes()[2];
  int64_t S = key.sizes()[0];
  KILN_CHECK(E == embed_dim_to_check, kMha, ": was expecting embedding dimension of ", embed_dim_to_check,
             ", but got query of shape ", shape_of(query_in));
  KILN_CHECK(num_heads > 0 && E % num_heads == 0, kMha, ": embed_dim ", E, " not divisible by num_heads ", num_heads);
  int64_t H = num_heads, hd = E / num_heads;
  if (use_separate_proj_weight) {
    KILN_CHECK(key.sizes()[0] == value.sizes()[0] && key.sizes()[1] == value.sizes()[1], kMha,
               ": key's sequence and batch dims ", shape_of(key_in), " do not match value's ", shape_of(value_in));
  } else {
    KILN_CHECK(key.sizes() == value.sizes(), kMha, ": key shape ", shape_of(key_in), " does not match value shape ",
               shape_of(value_in));
  }
  KILN_CHECK(key.sizes()[1] == N, kMha, ": expected key and value with batch size ", N, ", got key of shape ",
             shape_of(key_in));
  DType dt = query.dtype();

  // Masks become additive float masks; is_causal alone becomes a causal mask unless SDPA's own
  // causal path is taken (no padding mask, no weights returned), as torch.
  Tensor mask = attn_mask;
  bool sdpa_causal = false;
  kpm = canonical_mask(kpm, "key_padding_mask", dt);
  if (is_causal && !kpm.defined() && !need_weights) {
    mask = Tensor();
    sdpa_causal = true;
  } else {
    if (is_causal && !mask.defined()) mask = triu(ones({L, S}, TensorOptions(kBool).device(query.device())), 1);
    mask = canonical_mask(mask, "attn_mask", dt);
  }

  // In-projection: one packed matmul for self-attention, else the three row blocks separately.
  Tensor q, k, v;
  if (!use_separate_proj_weight) {
    KILN_CHECK(in_proj_weight.defined() && in_proj_weight.dim() == 2 && in_proj_weight.sizes()[0] == 3 * E &&
                   in_proj_weight.sizes()[1] == E,
               kMha, ": expected in_proj_weight of shape [", 3 * E, ", ", E, "], got ", shape_of(in_proj_weight));
    if (query.is_same(key) && key.is_same(value)) {
      std::vector<Tensor> qkv = linear(query, in_proj_weight, in_proj_bias).chunk(3, -1);
      q = qkv[0], k = qkv[1], v = qkv[2];
    } else {
      std::vector<Tensor> w = in_proj_weight.chunk(3, 0), b(3);
      if (in_proj_bias.defined()) b = in_proj_bias.chunk(3, 0);
      q = linear(query, w[0], b[0]), k = linear(key, w[1], b[1]), v = linear(value, w[2], b[2]);
    }
  } else {
    KILN_CHECK(q_proj_weight.defined() && k_proj_weight.defined() && v_proj_weight.defined(), kMha,
               ": use_separate_proj_weight is true but q_proj_weight, k_proj_weight or v_proj_weight is undefined");
    KILN_CHECK(q_proj_weight.sizes() == IntArrayRef(std::vector<int64_t>{E, E}) &&
                   k_proj_weight.sizes() == IntArrayRef(std::vector<int64_t>{E, key.sizes()[2]}) &&
                   v_proj_weight.sizes() == IntArrayRef(std::vector<int64_t>{E, value.sizes()[2]}),
               kMha, ": expected q/k/v_proj_weight of shapes [", E, ", ", E, "], [", E, ", ", key.sizes()[2], "], [", E,
               ", ", value.sizes()[2], "], got ", shape_of(q_proj_weight), ", ", shape_of(k_proj_weight), ", ",
               shape_of(v_proj_weight));
    std::vector<Tensor> b(3);
    if (in_proj_bias.defined()) b = in_proj_bias.chunk(3, 0);
    q = linear(query, q_proj_weight, b[0]), k = linear(key, k_proj_weight, b[1]),
    v = linear(value, v_proj_weight, b[2]);
  }

  if (mask.defined()) {
    if (mask.dim() == 2) {
      KILN_CHECK(mask.sizes()[0] == L && mask.sizes()[1] == S, kMha, ": the shape of the 2-D attn_mask is ",
                 shape_of(mask), ", but should be ", shape_str(std::vector<int64_t>{L, S}));
      mask = mask.unsqueeze(0);
    } else {
      std::vector<int64_t> want{N * H, L, S};
      KILN_CHECK(mask.sizes() == IntArrayRef(want), kMha, ": the shape of the 3-D attn_mask is ", shape_of(mask),
                 ", but should be ", shape_str(want));
    }
  }

  if (bias_k.defined() || bias_v.defined()) {
    KILN_CHECK(bias_k.defined() && bias_v.defined(), kMha,
               ": bias_k and bias_v must both be given or both be undefined");
    KILN_CHECK(!static_k.defined() && !static_v.defined(), kMha, ": bias cannot be added to static key or value");
    k = cat({k, bias_k.reshape({1, 1, E}).expand({1, N, E})}, 0);
    v = cat({v, bias_v.reshape({1, 1, E}).expand({1, N, E})}, 0);
    mask = pad_last(mask);
    kpm = pad_last(kpm);
  }

  // Heads: [L, N, E] → [N*H, L, hd].
  q = q.reshape({L, N * H, hd}).transpose(0, 1);
  auto heads = [&](const Tensor& x, const Tensor& fixed, const char* name) {
    if (!fixed.defined()) return x.reshape({x.sizes()[0], N * H, hd}).transpose(0, 1);
    KILN_CHECK(fixed.dim() == 3 && fixed.sizes()[0] == N * H && fixed.sizes()[2] == hd, kMha, ": expected ", name,
               " of shape [", N * H, ", S, ", hd, "], got ", shape_of(fixed));
    return fixed;
  };
  k = heads(k, static_k, "static_k");
  v = heads(v, static_v, "static_v");
  KILN_CHECK(k.sizes()[1] == v.sizes()[1], kMha, ": keys and values have different lengths (", k.sizes()[1], " vs ",
             v.sizes()[1], ")");
  if (add_zero_attn) {
    Tensor z = zeros({N * H, 1, hd}, TensorOptions(k.dtype()).device(k.device()));
    k = cat({k, z}, 1);
    v = cat({v, z}, 1);
    mask = pad_last(mask);
    kpm = pad_last(kpm);
  }
  int64_t Sk = k.sizes()[1];

  if (kpm.defined()) {
    KILN_CHECK(kpm.sizes()[0] == N && kpm.sizes()[1] == Sk, kMha, ": expecting key_padding_mask shape of [", N, ", ",
               Sk, "], but got ", shape_of(key_padding_mask));
    kpm = kpm.reshape({N, 1, 1, Sk}).expand({N, H, 1, Sk}).reshape({N * H, 1, Sk});
    mask = mask.defined() ? mask + kpm : kpm;
  }
  double p = training ? dropout_p : 0.0;

  Tensor out, weights;
  if (need_weights) {
    // The explicit path: the weights are an output.
    Tensor scores = bmm(q * std::sqrt(1.0 / static_cast<double>(hd)), k.transpose(-2, -1));
    if (mask.defined()) scores = scores + mask;
    weights = softmax(scores, -1);
    if (p > 0) weights = dropout(weights, p);
    out = bmm(weights, v).transpose(0, 1).reshape({L * N, E});
    weights = weights.reshape({N, H, L, Sk});
    if (average_attn_weights) weights = weights.mean({1});
  } else {
    if (mask.defined()) mask = (mask.sizes()[0] == 1) ? mask.unsqueeze(0) : mask.reshape({N, H, -1, Sk});
    Tensor o = scaled_dot_product_attention(q.reshape({N, H, L, hd}), k.reshape({N, H, Sk, hd}),
                                            v.reshape({N, H, Sk, hd}), mask, p, sdpa_causal);
    out = o.permute({2, 0, 1, 3}).reshape({L * N, E});
  }
  out = linear(out, out_proj_weight, out_proj_bias);
  out = out.reshape({L, N, out.sizes()[1]});
  if (!batched) {
    out = out.squeeze(1);
    if (weights.defined()) weights = weights.squeeze(0);
  }
  return {out, weights};
}

}  // namespace kiln::nn::functional
