// F.ctc_loss as a composition of kiln ops (torch 1.13's ctc_loss / _ctc_loss semantics): the
// forward (alpha) recursion of Graves et al. in log space over the extended label sequence
// blank, l1, blank, l2, ..., blank (length 2S+1), vectorized over the batch and the extended
// labels and looped over time; autograd differentiates the recursion.
//
// Note [CTC lengths are read]: input_lengths and target_lengths are read on the host once per
// call (torch's kernel reads them too). In eager that is a plain read; under compile, lengths
// computed in the graph are a value read, a graph break, while an input's are read directly (the
// function being re-run every call). The targets' range check reads values in eager only.
#include <algorithm>
#include <limits>
#include <optional>

#include "kiln/autograd.h"
#include "kiln/compile.h"
#include "kiln/ops/nn_loss_extra.h"
#include "ops/nn_util.h"

namespace kiln {

using namespace nn_detail;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TensorOptions like(const Tensor& x, std::optional<DType> t = std::nullopt) {
  return TensorOptions(t.value_or(x.dtype())).device(x.device());
}

std::vector<int64_t> read_lengths(const Tensor& t, const char* what) {
  KILN_CHECK(t.defined(), "ctc_loss: ", what, " must be defined");
  KILN_CHECK(is_integral(t.dtype()), "ctc_loss: ", what, " must be integral, got dtype ", t.dtype());
  KILN_CHECK(t.dim() <= 1, "ctc_loss: ", what, " must be 0-d or 1-d, got shape ", shape_str(t.sizes()));
  return t.to(kInt64).to_vector<int64_t>();
}

// x shifted right by k along dim 1, -inf shifted in: x[:, l - k] at position l.
Tensor shift_right(const Tensor& x, int64_t k) {
  int64_t n = x.sizes()[0], len = x.sizes()[1];
  Tensor pad = full({n, std::min(k, len)}, Scalar(-kInf), like(x));
  return k >= len ? pad : cat({pad, x.narrow(1, 0, len - k)}, 1);
}

// log(exp(a) + exp(b) + exp(c)), -inf where all are -inf; the max is detached (it cancels in
// the gradient) and the all--inf entries get a zero gradient, not logsumexp's 0/0 = NaN.
Tensor logsumexp3(const Tensor& a, const Tensor& b, const Tensor& c) {
  Tensor m = maximum(maximum(a, b), c).detach();
  m = where(eq(m, Scalar(-kInf)), Scalar(0.0), m);  // torch: "cannot do neginf-neginf"
  Tensor s = exp(a - m) + exp(b - m) + exp(c - m);
  Tensor pos = gt(s, Scalar(0.0));
  return where(pos, log(where(pos, s, Scalar(1.0))) + m, Scalar(-kInf));
}

void check_targets(const Tensor& targets, const std::vector<std::pair<int64_t, int64_t>>& spans, int64_t C) {
  // Eager only (Note [CTC lengths are read]); torch 1.13 reads out-of-range labels unchecked.
  if (!targets.has_storage() || compiler::is_compiling() || targets.numel() == 0) return;
  std::vector<int64_t> v = flatten(targets).to(kInt64).to_vector<int64_t>();
  for (auto [begin, end] : spans)
    for (int64_t i = begin; i < end; ++i)
      KILN_CHECK(v[i] >= 0 && v[i] < C, "ctc_loss: target value ", v[i], " at flat position ", i,
                 " is out of range (expected labels in [0, ", C, "))");
}

}  // namespace

Tensor ctc_loss(const Tensor& log_probs_in, const Tensor& targets_in, const std::vector<int64_t>& il,
                const std::vector<int64_t>& tl, int64_t blank, const std::string& reduction, bool zero_infinity) {
  const char* op = "ctc_loss";
  check_reduction(reduction, op);
  KILN_CHECK(log_probs_in.defined() && targets_in.defined(), op, ": log_probs and targets must be defined");
  KILN_CHECK(is_floating_point(log_probs_in.dtype()), op, ": expected floating log_probs, got dtype ",
             log_probs_in.dtype());
  KILN_CHECK(log_probs_in.dim() == 2 || log_probs_in.dim() == 3, op,
             ": expected log_probs of shape [T, N, C] or [T, C], got ", shape_str(log_probs_in.sizes()));
  const bool batched = log_probs_in.dim() == 3;
  Tensor lp = batched ? log_probs_in : unsqueeze(log_probs_in, 1);
  KILN_CHECK(targets_in.dim() == 1 || targets_in.dim() == 2, op,
             ": expected targets of shape [N, S] (padded) or [sum(target_lengths)] (concatenated), got ",
             shape_str(targets_in.sizes()));
  KILN_CHECK(targets_in.dtype() != kBool, op, ": expected integral targets, got dtype ", targets_in.dtype());
  const int64_t T = lp.sizes()[0], N = lp.sizes()[1], C = lp.sizes()[2];
  KILN_CHECK(blank >= 0 && blank < C, op, ": blank must be in label range [0, ", C, "), got ", blank);
  KILN_CHECK(static_cast<int64_t>(il.size()) == N, op, ": input_lengths must be of size batch_size (", N, "), got ",
             il.size());
  KILN_CHECK(static_cast<int64_t>(tl.size()) == N, op, ": target_lengths must be of size batch_size (", N, "), got ",
             tl.size());
  int64_t S = 0, max_il = 0, total = 0;
  for (int64_t b = 0; b < N; ++b) {
    KILN_CHECK(il[b] >= 0 && il[b] <= T, op, ": expected input_lengths in [0, ", T,
               "] (the length of log_probs of shape ", shape_str(log_probs_in.sizes()), "), got ", il[b], " at ", b);
    KILN_CHECK(tl[b] >= 0, op, ": expected non-negative target_lengths, got ", tl[b], " at ", b);
    S = std::max(S, tl[b]);
    max_il = std::max(max_il, il[b]);
    total += tl[b];
  }
  // targets as [N, S] int64 (positions past a target's length hold blank), read where they are.
  const TensorOptions iopt = like(lp, kInt64);
  const bool concat = targets_in.dim() == 1;
  std::vector<std::pair<int64_t, int64_t>> spans;
  std::vector<int64_t> idx, valid;
  if (concat) {
    KILN_CHECK(targets_in.sizes()[0] == total, op,
               ": expected concatenated targets of size sum(target_lengths) = ", total, ", got shape ",
               shape_str(targets_in.sizes()));
  } else {
    KILN_CHECK(targets_in.sizes()[0] == N && targets_in.sizes()[1] >= S, op, ": expected padded targets of shape [", N,
               ", >= ", S, "] (batch size, max target length), got ", shape_str(targets_in.sizes()));
  }
  for (int64_t b = 0, off = 0; b < N; off += concat ? tl[b] : targets_in.sizes()[1], ++b) {
    spans.emplace_back(off, off + tl[b]);
    for (int64_t s = 0; s < S; ++s) {
      idx.push_back(s < tl[b] ? off + s : 0);
      valid.push_back(s < tl[b]);
    }
  }
  check_targets(targets_in, spans, C);
  Tensor tgt = full({N, S}, Scalar(blank), iopt);
  if (N * S > 0) {
    Tensor picked = index_select(flatten(targets_in).to(kInt64).to(lp.device()), 0, tensor<int64_t>(idx, iopt));
    tgt = where(ne(tensor<int64_t>(valid, iopt).reshape({N, S}), Scalar(int64_t(0))), picked.reshape({N, S}), tgt);
  }
  const int64_t L = 2 * S + 1;
  Tensor blanks = full({N, S}, Scalar(blank), iopt);
  Tensor ext = cat({stack({blanks, tgt}, 2).reshape({N, 2 * S}), full({N, 1}, Scalar(blank), iopt)}, 1);  // [N, L]
  // The skip transition l-2 -> l: only onto a label differing from the previous label.
  Tensor skip = full({N, L}, Scalar(false), like(lp, kBool));
  if (L > 2) skip = cat({skip.narrow(1, 0, 2), ne(ext.narrow(1, 2, L - 2), ext.narrow(1, 0, L - 2))}, 1);

  // lpe[t, n, l] = log_probs[t, n, ext[n, l]].
  Tensor lpe = gather(lp, 2, expand(unsqueeze(ext, 0), {T, N, L}));
  Tensor alpha = full({N, L}, Scalar(-kInf), like(lp));
  if (T > 0) {
    Tensor first = lt(arange(L, iopt).reshape({1, L}), Scalar(int64_t(2)));
    alpha = where(first, lpe.select(0, 0), Scalar(-kInf));
  }
  Tensor il_t = tensor<int64_t>(il, iopt).reshape({N, 1});
  for (int64_t t = 1; t < max_il; ++t) {
    Tensor next = logsumexp3(alpha, shift_right(alpha, 1), where(skip, shift_right(alpha, 2), Scalar(-kInf)));
    // A sequence past its input length keeps its last alpha.
    alpha = where(gt(il_t, Scalar(t)), next + lpe.select(0, t), alpha);
  }
  // The likelihood sums the paths ending on the last label and on the trailing blank.
  std::vector<int64_t> end_blank, end_label;
  for (int64_t b = 0; b < N; ++b) {
    end_blank.push_back(2 * tl[b]);
    end_label.push_back(std::max<int64_t>(2 * tl[b] - 1, 0));
  }
  Tensor tl_t = tensor<int64_t>(tl, iopt).reshape({N, 1});
  Tensor l1 = gather(alpha, 1, tensor<int64_t>(end_blank, iopt).reshape({N, 1}));
  Tensor l2 = where(gt(tl_t, Scalar(int64_t(0))), gather(alpha, 1, tensor<int64_t>(end_label, iopt).reshape({N, 1})),
                    Scalar(-kInf));
  Tensor nll = neg(logsumexp3(l1, l2, full({N, 1}, Scalar(-kInf), like(lp)))).reshape({N});
  // No frames: the empty target is certain, any other impossible (torch 1.13 reads alpha[-1] there).
  Tensor no_frames = eq(il_t.reshape({N}), Scalar(int64_t(0)));
  nll = where(no_frames,
              where(eq(tl_t.reshape({N}), Scalar(int64_t(0))), Scalar(0.0), full({N}, Scalar(kInf), like(lp))), nll);

  // Note [CTC gradient as torch's]: torch's backward returns exp(lp) - exp(log(alpha*beta) + nll - lp)
  // per frame t < input_length, i.e. the true gradient plus exp(lp): the gradient w.r.t. the logits
  // when log_probs = log_softmax(logits), where the extra term cancels. A zero-valued term with
  // gradient exp(lp) reproduces it; an impossible alignment's frames get torch's NaN (0/0 there)
  // unless zero_infinity zeroes them.
  Tensor frame = lt(arange(T, iopt).reshape({T, 1}), il_t.reshape({1, N})).unsqueeze(2);  // [T, N, 1]
  Tensor e = exp(lp);
  Tensor zero_valued = e - e.detach();
  Tensor extra = sum(where(frame, zero_valued, Scalar(0.0)), {0, 2});
  if (!zero_infinity) {
    Tensor impossible = logical_and(frame, eq(nll, Scalar(kInf)).reshape({1, N, 1}));
    extra = extra + sum(sqrt(where(impossible, square(zero_valued), Scalar(0.0))), {0, 2});
  }
  Tensor res = nll + extra;
  if (zero_infinity) res = where(eq(res, Scalar(kInf)), Scalar(0.0), res);
  if (reduction == "mean") return mean(res / clamp_min(tensor<int64_t>(tl, iopt).to(res.dtype()), Scalar(1.0)));
  if (reduction == "sum") return sum(res);
  return batched ? res : res.reshape({});
}

Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, int64_t blank, const std::string& reduction, bool zero_infinity) {
  std::vector<int64_t> il = read_lengths(input_lengths, "input_lengths");
  std::vector<int64_t> tl = read_lengths(target_lengths, "target_lengths");
  return ctc_loss(log_probs, targets, il, tl, blank, reduction, zero_infinity);
}

}  // namespace kiln
