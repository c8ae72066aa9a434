// scaled_dot_product_attention, embedding_bag and interpolate: public
// functions, meta functions and decompositions.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/philox.h"
#include "kiln/autograd.h"
#include "ops/indexing.h"
#include "ops/nn_util.h"

namespace kiln {

using namespace nn_detail;

namespace {

Shape batch_dims(const Tensor& t, int64_t keep) {
  Shape s = t.sizes().vec();
  s.resize(static_cast<size_t>(std::max<int64_t>(0, t.dim() - keep)));
  return s;
}

// ---- scaled_dot_product_attention: (q, k, v, attn_mask?; dropout_p, is_causal, scale?, seed, offset) ----
// Sizes of the attention weights [..., L, S] (batch dims of q, k and the mask broadcast).
Shape attn_weight_shape(const Tensor& q, const Tensor& k, const Tensor& mask, const char* op) {
  Shape b = broadcast_shapes(batch_dims(q, 2), batch_dims(k, 2), op);
  Shape s = b;
  s.push_back(q.sizes()[q.dim() - 2]);
  s.push_back(k.sizes()[k.dim() - 2]);
  if (mask.defined()) s = broadcast_shapes(s, mask.sizes(), op);
  return s;
}

std::vector<TensorMeta> meta_sdpa(const OpCall& c) {
  const Tensor &q = c.in(0), &k = c.in(1), &v = c.in(2), &mask = c.in(3);
  const char* op = c.name();
  KILN_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, op,
             ": expected query, key and value with at least 2 dims, got shapes ", shape_str(q.sizes()), ", ",
             shape_str(k.sizes()), ", ", shape_str(v.sizes()));
  KILN_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype(), op,
             ": expected query, key and value to have the same dtype, got ", q.dtype(), ", ", k.dtype(), " and ",
             v.dtype());
  KILN_CHECK(is_floating_point(q.dtype()), op, ": expected floating query/key/value, got dtype ", q.dtype());
  KILN_CHECK(q.sizes().back() == k.sizes().back(), op,
             ": expected query and key to have the same embedding size, got shapes ", shape_str(q.sizes()), " and ",
             shape_str(k.sizes()));
  KILN_CHECK(k.sizes()[k.dim() - 2] == v.sizes()[v.dim() - 2], op,
             ": expected key and value to have the same sequence length, got shapes ", shape_str(k.sizes()), " and ",
             shape_str(v.sizes()));
  double p = c.attrs.f(0);
  KILN_CHECK(p >= 0 && p < 1, op, ": dropout_p must be in [0, 1), got ", p);
  if (mask.defined()) {
    KILN_CHECK(!c.attrs.b(1), op, ": explicit attn_mask should not be set when is_causal=true");
    KILN_CHECK(mask.dtype() == kBool || mask.dtype() == q.dtype(), op,
               ": expected attn_mask of dtype bool or the query's dtype ", q.dtype(), ", got ", mask.dtype());
  }
  attn_weight_shape(q, k, mask, op);
  Shape out = broadcast_shapes(broadcast_shapes(batch_dims(q, 2), batch_dims(k, 2), op), batch_dims(v, 2), op);
  out.push_back(q.sizes()[q.dim() - 2]);
  out.push_back(v.sizes().back());
  return one_output(out, q.dtype(), q.device());
}
KILN_REGISTER_META(scaled_dot_product_attention, meta_sdpa);

// Note [Flash attention]
// _scaled_dot_product_flash_attention computes softmax(q k^T * scale) v for q [..., L, E],
// k [..., S, E], v [..., S, Ev] (one or more batch dims, the same for all three; a kernel may read
// each operand through its strides, as the heads of a [B, L, H, E] projection viewed as
// [B, H, L, E], so attention needs no copies of them), with `is_causal` keeping key j for query i when j <= i (top-left
// aligned, as scaled_dot_product_attention), without the L x S weights: it returns the output and
// each query row's logsumexp of its scaled scores, in the opmath dtype. The backward op recomputes
// the weights from q, k and the logsumexp, so neither pass stores more than O(L) per row. The
// decomposition below routes an attention to it on devices whose kernel is faster than the
// matmul path (flash_eligible); every device has a kernel, so the op itself runs anywhere.
std::vector<TensorMeta> meta_flash(const OpCall& c) {
  const Tensor &q = c.in(0), &k = c.in(1), &v = c.in(2);
  const char* op = c.name();
  KILN_CHECK(q.dim() >= 3 && k.dim() == q.dim() && v.dim() == q.dim(), op,
             ": expected query, key and value of one dim, at least 3 (batch dims, rows, head), got shapes ",
             shape_str(q.sizes()), ", ", shape_str(k.sizes()), ", ", shape_str(v.sizes()));
  KILN_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype() && is_floating_point(q.dtype()), op,
             ": expected floating query, key and value of one dtype, got ", q.dtype(), ", ", k.dtype(), " and ",
             v.dtype());
  const int64_t n = q.dim();
  bool same = q.sizes()[n - 1] == k.sizes()[n - 1] && k.sizes()[n - 2] == v.sizes()[n - 2];
  for (int64_t d = 0; d < n - 2; ++d) same = same && k.sizes()[d] == q.sizes()[d] && v.sizes()[d] == q.sizes()[d];
  KILN_CHECK(same, op, ": expected q [..., L, E], k [..., S, E] and v [..., S, Ev], got shapes ", shape_str(q.sizes()),
             ", ", shape_str(k.sizes()), ", ", shape_str(v.sizes()));
  Device d = output_device(c.inputs);
  TensorMeta out, lse;
  out.sizes = q.sizes().vec();
  out.sizes.back() = v.sizes()[n - 1];
  out.dtype = q.dtype();
  out.device = d;
  lse.sizes = q.sizes().vec();
  lse.sizes.pop_back();
  lse.dtype = opmath(q.dtype());
  lse.device = d;
  return {out, lse};
}
KILN_REGISTER_META(_scaled_dot_product_flash_attention, meta_flash);

// (grad_out, q, k, v, out, logsumexp, grad_logsumexp?) -> (grad_q, grad_k, grad_v), shaped as q, k
// and v. With P the weights, dS = P * (dO v^T - D) where D = rowsum(dO * out) - grad_logsumexp.
std::vector<TensorMeta> meta_flash_backward(const OpCall& c) {
  const Tensor &go = c.in(0), &q = c.in(1), &k = c.in(2), &v = c.in(3), &o = c.in(4), &lse = c.in(5);
  const char* op = c.name();
  OpCall fwd{OpId::_scaled_dot_product_flash_attention, c.inputs.subspan(1, 3), c.attrs};
  std::vector<TensorMeta> f = meta_flash(fwd);
  KILN_CHECK(go.sizes() == IntArrayRef(f[0].sizes) && o.sizes() == IntArrayRef(f[0].sizes) &&
                 lse.sizes() == IntArrayRef(f[1].sizes),
             op, ": expected grad_out and out of shape ", shape_str(f[0].sizes), " and logsumexp of shape ",
             shape_str(f[1].sizes), ", got ", shape_str(go.sizes()), ", ", shape_str(o.sizes()), " and ",
             shape_str(lse.sizes()));
  const Tensor& glse = c.in(6);
  KILN_CHECK(!glse.defined() || (glse.sizes() == lse.sizes() && glse.dtype() == lse.dtype()), op,
             ": expected grad_logsumexp shaped and typed as logsumexp ", shape_str(lse.sizes()), " ", lse.dtype(),
             ", got ", shape_str(glse.sizes()), " ", glse.dtype());
  KILN_CHECK(go.dtype() == q.dtype() && o.dtype() == q.dtype() && lse.dtype() == f[1].dtype, op,
             ": expected grad_out and out of dtype ", q.dtype(), " and logsumexp of dtype ", f[1].dtype, ", got ",
             go.dtype(), ", ", o.dtype(), " and ", lse.dtype());
  Device d = output_device(c.inputs);
  std::vector<TensorMeta> r(3);
  const Tensor* in[3] = {&q, &k, &v};
  for (int i = 0; i < 3; ++i) {
    r[i].sizes = in[i]->sizes().vec();
    r[i].dtype = q.dtype();
    r[i].device = d;
  }
  return r;
}
KILN_REGISTER_META(_scaled_dot_product_flash_attention_backward, meta_flash_backward);

// Whether an attention goes to the fused op: where its kernel beats the matmul path (CUDA, head
// sizes its tensor-core tiles take: float16/bfloat16 a multiple of 16 up to 128, float32 a
// multiple of 8 up to 64; at most 65535 heads in all), without a mask or dropout (not in it yet).
bool flash_eligible(const OpCall& c) {
  const Tensor &q = c.in(0), &k = c.in(1), &v = c.in(2);
  if (!q.is_cuda() || c.in(3).defined() || c.attrs.f(0) > 0) return false;
  if (!op_info(OpId::_scaled_dot_product_flash_attention).kernels[static_cast<int>(DeviceType::CUDA)]) return false;
  int64_t E = q.sizes().back();
  if (v.sizes().back() != E) return false;
  if (q.dtype() == DType::Float32) {
    if (E % 8 != 0 || E > 64) return false;
  } else if (q.dtype() == DType::BFloat16 || q.dtype() == DType::Float16) {
    if (E % 16 != 0 || E > 128) return false;
  } else {
    return false;
  }
  if (q.dim() < 3 || k.dim() != q.dim() || v.dim() != q.dim()) return false;  // 2-D: the matmul path
  int64_t heads = 1;
  for (int64_t d = 0; d < q.dim() - 2; ++d) {
    if (k.sizes()[d] != q.sizes()[d] || v.sizes()[d] != q.sizes()[d]) return false;
    heads *= q.sizes()[d];
  }
  return heads <= 65535 && q.sizes()[q.dim() - 2] > 0 && k.sizes()[k.dim() - 2] > 0;
}

// q, k and v go as they are: the kernels read strided heads (Note [Flash attention]).
std::vector<Tensor> flash_attention(const OpCall& c) {
  const Tensor &q = c.in(0), &k = c.in(1), &v = c.in(2);
  double scale = c.attrs.opt_f(2).value_or(1.0 / std::sqrt(static_cast<double>(q.sizes().back())));
  return {call_op(OpId::_scaled_dot_product_flash_attention, {q, k, v}, {c.attrs.b(1), scale})[0]};
}

// softmax(q k^T * scale + mask) v, in the opmath type. Rows whose keys are all
// masked out give zeros (torch's safe softmax) rather than NaN.
std::vector<Tensor> decomp_sdpa(const OpCall& c) {
  meta_sdpa(c);
  if (flash_eligible(c)) return flash_attention(c);
  const Tensor& mask = c.in(3);
  DType dt = c.in(0).dtype(), ct = opmath(dt);
  // On CUDA the two matmuls of a bf16/fp16 attention run in that dtype (tensor cores, float
  // accumulation), as PyTorch's math backend there; the softmax is in float everywhere. The CPU
  // has no faster low-precision GEMM, so it computes in float throughout.
  const bool low_mm = c.in(0).device().type == DeviceType::CUDA;
  DType mt = low_mm ? dt : ct;
  Tensor q = c.in(0).to(mt), k = c.in(1).to(mt), v = c.in(2).to(mt);
  int64_t L = q.sizes()[q.dim() - 2], S = k.sizes()[k.dim() - 2], E = q.sizes().back();
  double scale = c.attrs.opt_f(2).value_or(1.0 / std::sqrt(static_cast<double>(E)));
  Tensor attn = matmul(q, transpose(k, -2, -1)).to(ct) * scale;
  const double ninf = -std::numeric_limits<double>::infinity();
  Tensor keep;
  if (c.attrs.b(1)) keep = tril(ones({L, S}, TensorOptions(kBool).device(q.device())));
  else if (mask.defined() && mask.dtype() == kBool) keep = mask;
  if (keep.defined()) attn = where(keep, attn, Scalar(ninf));
  else if (mask.defined()) attn = attn + mask.to(ct);
  Tensor p;
  if (mask.defined()) {
    Tensor empty_row;
    {
      NoGradGuard no_grad;
      empty_row = eq(amax(attn, {-1}, true), Scalar(ninf));
    }
    p = where(empty_row, Scalar(0.0), softmax(where(empty_row, Scalar(0.0), attn), -1));
  } else {
    p = softmax(attn, -1);
  }
  double dp = c.attrs.f(0);
  if (dp > 0) p = call_op1(OpId::dropout, {p}, {dp, true, c.attrs[3], c.attrs[4]});
  return {matmul(p.to(mt), v).to(dt)};
}
KILN_REGISTER_DECOMP(scaled_dot_product_attention, decomp_sdpa);

// ---- embedding_bag: (weight, indices, offsets?, per_sample_weights?; mode, include_last_offset, padding_idx) ----
std::vector<TensorMeta> meta_embedding_bag(const OpCall& c) {
  const Tensor &w = c.in(0), &idx = c.in(1), &offs = c.in(2), &psw = c.in(3);
  const char* op = c.name();
  const std::string& mode = c.attrs.str(0);
  KILN_CHECK(mode == "sum" || mode == "mean" || mode == "max", op, ": mode must be 'sum', 'mean' or 'max', got '",
             mode, "'");
  KILN_CHECK(w.dim() == 2, op, ": expected a 2-D weight, got shape ", shape_str(w.sizes()));
  KILN_CHECK(is_floating_point(w.dtype()), op, ": expected a floating weight, got dtype ", w.dtype());
  KILN_CHECK(is_integral(idx.dtype(), false), op, ": expected integer indices, got dtype ", idx.dtype());
  KILN_CHECK(idx.dim() == 1 || idx.dim() == 2, op, ": expected 1-D or 2-D indices, got shape ",
             shape_str(idx.sizes()));
  int64_t B;
  if (idx.dim() == 2) {
    KILN_CHECK(!offs.defined(), op, ": if input is 2-D, then offsets has to be undefined");
    B = idx.sizes()[0];
  } else {
    KILN_CHECK(offs.defined() && offs.dim() == 1, op, ": offsets has to be a 1-D tensor for 1-D input");
    KILN_CHECK(is_integral(offs.dtype(), false), op, ": expected integer offsets, got dtype ", offs.dtype());
    bool last = c.attrs.b(1);
    KILN_CHECK(!last || offs.numel() >= 1, op, ": include_last_offset needs at least one offset");
    B = offs.numel() - (last ? 1 : 0);
  }
  if (psw.defined()) {
    KILN_CHECK(mode == "sum", op, ": per_sample_weights is only supported for mode='sum', got mode='", mode, "'");
    KILN_CHECK(psw.sizes() == idx.sizes(), op, ": expected per_sample_weights of the indices' shape ",
               shape_str(idx.sizes()), ", got ", shape_str(psw.sizes()));
  }
  int64_t pad = c.attrs.i(2);
  KILN_CHECK(pad < w.sizes()[0], op, ": padding_idx must be within the number of embeddings (", w.sizes()[0],
             "), got ", pad);
  return one_output({B, w.sizes()[1]}, w.dtype(), w.device());
}
KILN_REGISTER_META(embedding_bag, meta_embedding_bag);

// Every index gets the id of its bag; padding entries (and, with
// include_last_offset, entries past the last offset) go to a dummy bag B that
// is sliced off, so sum/mean/max are one index_add / scatter_reduce each.
std::vector<Tensor> decomp_embedding_bag(const OpCall& c) {
  std::vector<TensorMeta> m = meta_embedding_bag(c);
  const Tensor &w = c.in(0), &indices = c.in(1), &psw = c.in(3);
  // torch's value checks: indices in range (index_select's kernel checks them again when
  // compiled), offsets starting at 0, never decreasing and never past the indices (no kernel
  // does: read while compiling too, Note [Value checks]; seeds 10032381, 11001798).
  check_index_range(indices, w.sizes()[0], 0, c.name());
  if (indices.dim() == 1) {
    std::vector<int64_t> offs = checked_index_values(c.in(2));
    KILN_CHECK(offs.empty() || offs[0] == 0, c.name(),
               ": offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from position 0; "
               "got ",
               offs.empty() ? 0 : offs[0]);
    for (size_t i = 1; i < offs.size(); ++i)
      KILN_CHECK(offs[i] >= offs[i - 1], c.name(), ": offsets must be non-decreasing, got offsets[", i, "] = ", offs[i],
                 " after offsets[", i - 1, "] = ", offs[i - 1]);
    KILN_CHECK(offs.empty() || offs.back() <= indices.numel(), c.name(),
               ": offsets[-1] can not be greater than input's length ", indices.numel(), " but got offsets[-1] of ",
               offs.empty() ? 0 : offs.back());
  }
  const std::string& mode = c.attrs.str(0);
  int64_t pad = c.attrs.i(2);
  // Sizes as SymInts: while compiling with dynamic shapes the bag count stays symbolic.
  const SymInt B = indices.dim() == 2 ? indices.size(0) : SymInt(m[0].sizes[0]);
  const int64_t D = m[0].sizes[1];
  TensorOptions lopt = TensorOptions(kInt64).device(w.device());
  Tensor idx = flatten(indices).to(kInt64);
  const SymInt n = indices.dim() == 2 ? B * indices.size(1) : SymInt(idx.numel());
  Tensor bag, valid;
  if (indices.dim() == 2) {
    bag = flatten(expand(unsqueeze(arange(B, lopt), 1), {B, indices.size(1)}));
  } else {
    Tensor offs = c.in(2).to(kInt64);
    Tensor starts = c.attrs.b(1) ? slice(offs, 0, 0, B) : offs;
    // A mark at each bag start; the running count of marks is the bag id + 1.
    Tensor marks = index_add(zeros({n + 1}, lopt), 0, starts, ones({B}, lopt));
    bag = cumsum(slice(marks, 0, 0, n), 0) - 1;
    valid = ge(bag, Scalar(int64_t(0)));
    if (c.attrs.b(1)) valid = logical_and(valid, lt(arange(n, lopt), select(offs, 0, B)));
  }
  if (pad >= 0) {
    Tensor not_pad = ne(idx, Scalar(pad));
    valid = valid.defined() ? logical_and(valid, not_pad) : not_pad;
  }
  if (valid.defined()) bag = where(valid, bag, Scalar(B));
  Tensor rows = index_select(w, 0, idx);
  Tensor out;
  if (mode == "max") {
    out = scatter_reduce(zeros({B + 1, D}, TensorOptions(w.dtype()).device(w.device())), 0,
                         expand(unsqueeze(bag, 1), {n, D}), rows, "amax", /*include_self=*/false);
  } else {
    if (psw.defined()) rows = rows * unsqueeze(flatten(psw).to(w.dtype()), 1);
    out = index_add(zeros({B + 1, D}, TensorOptions(w.dtype()).device(w.device())), 0, bag, rows);
    if (mode == "mean") {
      Tensor counts = index_add(zeros({B + 1}, TensorOptions(w.dtype()).device(w.device())), 0, bag,
                                ones({n}, TensorOptions(w.dtype()).device(w.device())));
      out = out / unsqueeze(clamp_min(counts, 1.0), 1);
    }
  }
  return {slice(out, 0, 0, B)};
}
KILN_REGISTER_DECOMP(embedding_bag, decomp_embedding_bag);

// ---- interpolate: (x; size, mode, align_corners?, scale_factor?) ----
// Output spatial sizes: `size` when given, else floor(in * scale_factor) (as torch, in double).
Shape interp_out_sizes(const OpCall& c) {
  const Tensor& x = c.in(0);
  const auto& size = c.attrs.ints(0);
  int64_t sd = x.dim() - 2;
  Shape out;
  if (!size.empty()) return size;
  const auto& sf = c.attrs.doubles(3);
  for (int64_t i = 0; i < sd; ++i)
    out.push_back(static_cast<int64_t>(std::floor(static_cast<double>(x.sizes()[i + 2]) * sf[i])));
  return out;
}

// The modes and the input ranks each takes (torch's F.interpolate): nearest, nearest-exact and area
// any of 3-D to 5-D; linear 3-D, bilinear and bicubic 4-D, trilinear 5-D.
bool interp_mode_known(const std::string& mode) {
  return mode == "nearest" || mode == "nearest-exact" || mode == "area" || mode == "linear" || mode == "bilinear" ||
         mode == "bicubic" || mode == "trilinear";
}
int64_t interp_mode_rank(const std::string& mode) {  // 0: any of 3-D to 5-D
  if (mode == "linear") return 3;
  if (mode == "bilinear" || mode == "bicubic") return 4;
  if (mode == "trilinear") return 5;
  return 0;
}
bool interp_mode_interpolates(const std::string& mode) {  // takes align_corners
  return mode == "linear" || mode == "bilinear" || mode == "bicubic" || mode == "trilinear";
}

std::vector<TensorMeta> meta_interpolate(const OpCall& c) {
  const Tensor& x = c.in(0);
  const char* op = c.name();
  const std::string& mode = c.attrs.str(1);
  KILN_CHECK(interp_mode_known(mode), op,
             ": mode must be one of nearest, nearest-exact, linear, bilinear, bicubic, trilinear or area, got '", mode,
             "'");
  const int64_t rank = interp_mode_rank(mode);
  if (rank == 0)
    KILN_CHECK(x.dim() >= 3 && x.dim() <= 5, op, ": ", mode,
               " mode expects a 3-D (N, C, L), 4-D (N, C, H, W) or 5-D (N, C, D, H, W) input, got shape ",
               shape_str(x.sizes()));
  else
    KILN_CHECK(x.dim() == rank, op, ": got ", x.dim(), "-D input, but ", mode, " mode needs a ", rank, "-D ",
               rank == 3 ? "(N, C, L)" : rank == 4 ? "(N, C, H, W)" : "(N, C, D, H, W)", " input");
  if (mode == "nearest" || mode == "nearest-exact")
    KILN_CHECK(x.dtype() == kUInt8 || is_floating_point(x.dtype()), op, ": ", mode,
               " mode expects a floating or uint8 input, got dtype ", x.dtype());
  else
    KILN_CHECK(is_floating_point(x.dtype()), op, ": ", mode, " mode expects a floating input, got dtype ", x.dtype());
  KILN_CHECK(interp_mode_interpolates(mode) || c.attrs.none(2), op,
             ": align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | "
             "trilinear");
  int64_t sd = x.dim() - 2;
  bool has_size = !c.attrs.ints(0).empty(), has_sf = !c.attrs.none(3);
  KILN_CHECK(has_size != has_sf, op, ": either size or scale_factor should be defined, and only one of them");
  if (has_size)
    KILN_CHECK(static_cast<int64_t>(c.attrs.ints(0).size()) == sd, op, ": expected size with ", sd,
               " spatial sizes for input of shape ", shape_str(x.sizes()), ", got ", shape_str(c.attrs.ints(0)));
  if (has_sf) {
    KILN_CHECK(static_cast<int64_t>(c.attrs.doubles(3).size()) == sd, op, ": expected scale_factor with ", sd,
               " values for input of shape ", shape_str(x.sizes()));
    for (double f : c.attrs.doubles(3)) KILN_CHECK(f > 0, op, ": scale_factor must be positive, got ", f);
  }
  Shape out{x.sizes()[0], x.sizes()[1]};
  for (int64_t s : interp_out_sizes(c)) {
    KILN_CHECK(s > 0, op, ": output sizes should be greater than 0, got ", shape_str(interp_out_sizes(c)),
               " for input of shape ", shape_str(x.sizes()));
    out.push_back(s);
  }
  for (int64_t i = 2; i < x.dim(); ++i)
    KILN_CHECK(x.sizes()[i] > 0, op, ": input spatial sizes should be greater than 0, got shape ",
               shape_str(x.sizes()));
  return one_output(out, x.dtype(), x.device());
}
KILN_REGISTER_META(interpolate, meta_interpolate);

// torch's source-index rules (UpSample.h): scale = 1/scale_factor when given, else in/out.
template <class A>
A interp_scale(int64_t in, int64_t out, bool align_corners, std::optional<double> sf) {
  if (align_corners) return out > 1 ? static_cast<A>(in - 1) / static_cast<A>(out - 1) : A(0);
  if (sf && *sf > 0) return static_cast<A>(1.0 / *sf);
  return static_cast<A>(in) / static_cast<A>(out);
}

// nearest: floor(o * scale) (torch's nearest_idx, in float, with its exact cases); nearest-exact:
// floor((o + 0.5) * scale), the pixel centre's (nearest_neighbor_exact_compute_source_index).
Tensor nearest_indices(int64_t in, int64_t out, std::optional<double> sf, bool exact, Device dev) {
  std::vector<int64_t> idx(static_cast<size_t>(out));
  float scale = interp_scale<float>(in, out, false, sf);
  for (int64_t o = 0; o < out; ++o) {
    if (exact) idx[o] = std::min(static_cast<int64_t>(std::floor((static_cast<float>(o) + 0.5f) * scale)), in - 1);
    else if (out == in) idx[o] = o;
    else if (out == 2 * in) idx[o] = o >> 1;
    else idx[o] = std::min(static_cast<int64_t>(std::floor(static_cast<float>(o) * scale)), in - 1);
  }
  return tensor<int64_t>(idx, {out}, TensorOptions(kInt64).device(dev));
}

// Each output row along `dim` is sum_k w[k][o] * x[idx[k][o]]: the taps of a separable filter.
template <class A>
Tensor taps_along(const Tensor& x, int64_t dim, const std::vector<std::vector<int64_t>>& idx,
                  const std::vector<std::vector<A>>& w) {
  const int64_t out = static_cast<int64_t>(idx[0].size());
  Device dev = x.device();
  TensorOptions io = TensorOptions(kInt64).device(dev), fo = TensorOptions(x.dtype()).device(dev);
  Shape ws(static_cast<size_t>(x.dim() - dim), 1);
  ws[0] = out;
  Tensor r;
  for (size_t k = 0; k < idx.size(); ++k) {
    Tensor term = index_select(x, dim, tensor<int64_t>(idx[k], {out}, io)) * tensor<A>(w[k], ws, fo);
    r = r.defined() ? r + term : term;
  }
  return r;
}

// Interpolates x along `dim` between the two neighbouring source rows, with torch's weights.
template <class A>
Tensor linear_along(const Tensor& x, int64_t dim, int64_t out, bool align_corners, std::optional<double> sf) {
  int64_t in = x.sizes()[dim];
  if (in == out) return x;  // torch copies
  std::vector<std::vector<int64_t>> i(2, std::vector<int64_t>(out));
  std::vector<std::vector<A>> l(2, std::vector<A>(out));
  A scale = interp_scale<A>(in, out, align_corners, sf);
  for (int64_t o = 0; o < out; ++o) {
    A src = align_corners ? scale * static_cast<A>(o) : std::max(scale * (static_cast<A>(o) + A(0.5)) - A(0.5), A(0));
    i[0][o] = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
    l[1][o] = std::min(std::max(src - static_cast<A>(i[0][o]), A(0)), A(1));
    i[1][o] = i[0][o] + (i[0][o] < in - 1 ? 1 : 0);
    l[0][o] = A(1) - l[1][o];
  }
  return taps_along<A>(x, dim, i, l);
}

// Bicubic along `dim` (torch's upsample_bicubic2d: cubic convolution with A = -0.75 over four
// taps, the source index unclamped below, taps clamped to the edge, index and weight guarded as
// torch 2's guard_index_and_lambda). bicubic is separable: rows then columns give torch's sum.
template <class A>
Tensor cubic_along(const Tensor& x, int64_t dim, int64_t out, bool align_corners, std::optional<double> sf) {
  const int64_t in = x.sizes()[dim];
  if (in == out) return x;  // torch copies: no weights, so a non-finite neighbour stays out
  constexpr A kA = A(-0.75);
  auto conv1 = [](A t) { return ((kA + 2) * t - (kA + 3)) * t * t + 1; };
  auto conv2 = [](A t) { return ((kA * t - 5 * kA) * t + 8 * kA) * t - 4 * kA; };
  std::vector<std::vector<int64_t>> i(4, std::vector<int64_t>(out));
  std::vector<std::vector<A>> w(4, std::vector<A>(out));
  const A scale = interp_scale<A>(in, out, align_corners, sf);
  for (int64_t o = 0; o < out; ++o) {
    const A real = align_corners ? scale * static_cast<A>(o) : scale * (static_cast<A>(o) + A(0.5)) - A(0.5);
    const int64_t base = std::min(static_cast<int64_t>(std::floor(real)), in - 1);
    const A t = std::min(std::max(real - static_cast<A>(base), A(0)), A(1));
    const A coeff[4] = {conv2(t + 1), conv1(t), conv1(1 - t), conv2(2 - t)};
    for (int k = 0; k < 4; ++k) {
      i[k][o] = std::clamp<int64_t>(base - 1 + k, 0, in - 1);
      w[k][o] = coeff[k];
    }
  }
  return taps_along<A>(x, dim, i, w);
}

std::vector<Tensor> decomp_interpolate(const OpCall& c) {
  std::vector<TensorMeta> m = meta_interpolate(c);
  const Tensor& x = c.in(0);
  const std::string& mode = c.attrs.str(1);
  Shape out = interp_out_sizes(c);
  std::vector<double> sf = c.attrs.none(3) ? std::vector<double>() : c.attrs.doubles(3);
  auto sf_at = [&](size_t i) { return sf.empty() ? std::nullopt : std::optional<double>(sf[i]); };
  if (mode == "nearest" || mode == "nearest-exact") {
    Tensor r = x;
    for (size_t i = 0; i < out.size(); ++i)
      r = index_select(r, static_cast<int64_t>(i) + 2,
                       nearest_indices(x.sizes()[i + 2], out[i], sf_at(i), mode == "nearest-exact", x.device()));
    return {r};
  }
  if (mode == "area") {  // torch: adaptive average pooling to the output size
    if (x.dim() == 3) return {adaptive_avg_pool1d(x, out)};
    if (x.dim() == 4) return {adaptive_avg_pool2d(x, out)};
    return {adaptive_avg_pool3d(x, out)};
  }
  const bool ac = c.attrs.opt_b(2).value_or(false), cubic = mode == "bicubic";
  DType ct = opmath(x.dtype());
  Tensor r = x.to(ct);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t d = static_cast<int64_t>(i) + 2;
    if (ct == kFloat64)
      r = cubic ? cubic_along<double>(r, d, out[i], ac, sf_at(i)) : linear_along<double>(r, d, out[i], ac, sf_at(i));
    else
      r = cubic ? cubic_along<float>(r, d, out[i], ac, sf_at(i)) : linear_along<float>(r, d, out[i], ac, sf_at(i));
  }
  return {r.to(x.dtype())};
}
KILN_REGISTER_DECOMP(interpolate, decomp_interpolate);

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                    double dropout_p, bool is_causal, std::optional<double> scale, Generator* gen) {
  uint64_t seed = 0, offset = 0;
  if (dropout_p > 0 && dropout_p < 1 && q.dim() >= 2 && k.dim() >= 2) {
    const char* op = "scaled_dot_product_attention";
    int64_t n = 1;
    for (int64_t s : attn_weight_shape(q, k, attn_mask, op)) n *= s;
    Generator& g = gen ? *gen : default_generator(q.device());
    std::tie(seed, offset) = g.reserve(philox_blocks<float>(static_cast<uint64_t>(n)));
  }
  return call_op1(OpId::scaled_dot_product_attention, {q, k, v, attn_mask},
                  {dropout_p, is_causal, opt_attr(scale), as_attr(seed), as_attr(offset)});
}

Tensor embedding_bag(const Tensor& weight, const Tensor& indices, const Tensor& offsets, const std::string& mode,
                     const Tensor& per_sample_weights, bool include_last_offset, int64_t padding_idx) {
  return call_op1(OpId::embedding_bag, {weight, indices, offsets, per_sample_weights},
                  {mode, include_last_offset, padding_idx});
}

Tensor interpolate(const Tensor& x, std::optional<std::vector<int64_t>> size,
                   std::optional<std::vector<double>> scale_factor, const std::string& mode,
                   std::optional<bool> align_corners) {
  KILN_CHECK(x.dim() >= 3 && x.dim() <= 5, "interpolate: expected a 3-D (N, C, L), 4-D (N, C, H, W) or 5-D (N, C, D, "
             "H, W) input, got shape ", shape_str(x.sizes()));
  // A single size / scale factor applies to every spatial dim, as torch.
  int64_t sd = x.dim() - 2;
  if (size && size->size() == 1) size = std::vector<int64_t>(static_cast<size_t>(sd), (*size)[0]);
  if (scale_factor && scale_factor->size() == 1)
    scale_factor = std::vector<double>(static_cast<size_t>(sd), (*scale_factor)[0]);
  KILN_CHECK(!size || !size->empty(), "interpolate: size must not be empty");
  return call_op1(OpId::interpolate, {x}, {size.value_or(std::vector<int64_t>{}), mode, opt_attr(align_corners),
                                           opt_attr(scale_factor)});
}

}  // namespace kiln
