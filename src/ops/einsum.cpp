// einsum as a decomposition: diagonals for repeated subscripts, then operands
// aligned to one label order and contracted left to right, each pair as one bmm.
#include <algorithm>
#include <array>

#include "dispatch/dispatch.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "ops/meta_util.h"

namespace kiln {
namespace {

constexpr int kNumLetters = 52;  // A-Z then a-z: ASCII order, as torch sorts implicit outputs

int label_of(char ch) {
  if (ch >= 'A' && ch <= 'Z') return ch - 'A';
  if (ch >= 'a' && ch <= 'z') return 26 + (ch - 'a');
  return -1;
}
char letter_of(int l) { return static_cast<char>(l < 26 ? 'A' + l : 'a' + (l - 26)); }

// A parsed equation. Labels 0..51 are letters; kNumLetters + e are the
// ellipsis dims, right-aligned across operands (e in [0, ell_dims)).
struct Plan {
  std::vector<std::vector<int>> op_labels;  // per operand, per dim (ellipsis expanded)
  std::vector<int> out_labels;
  std::vector<int64_t> label_size;          // broadcast size of each label
  int64_t ell_dims = 0;
};

Plan parse(const std::string& eq_in, std::span<const Tensor> ops) {
  std::string eq;
  for (char ch : eq_in)
    if (ch != ' ') eq.push_back(ch);
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  Plan p;
  // Split the inputs on ','.
  std::vector<std::string> terms(1);
  for (char ch : lhs) {
    if (ch == ',') terms.emplace_back();
    else terms.back().push_back(ch);
  }
  KILN_CHECK(terms.size() <= ops.size(), "einsum: fewer operands were provided (", ops.size(),
             ") than specified in the equation '", eq_in, "' (", terms.size(), ")");
  KILN_CHECK(terms.size() >= ops.size(), "einsum: more operands were provided (", ops.size(),
             ") than specified in the equation '", eq_in, "' (", terms.size(), ")");
  KILN_CHECK(!ops.empty(), "einsum: expected at least one operand");
  const DType t = ops[0].dtype();
  std::vector<std::pair<std::vector<int>, int64_t>> parsed;  // letters (-2 = ellipsis), ellipsis position
  for (size_t i = 0; i < terms.size(); ++i) {
    KILN_CHECK(ops[i].defined(), "einsum: operand ", i, " is undefined");
    KILN_CHECK(ops[i].dtype() == t, "einsum: expected all operands to have the same dtype, but operand ", i, " is ",
               ops[i].dtype(), " and operand 0 is ", t);
    std::vector<int> letters;
    bool ell = false;
    const std::string& s = terms[i];
    for (size_t k = 0; k < s.size(); ++k) {
      if (s[k] == '.') {
        KILN_CHECK(!ell && s.compare(k, 3, "...") == 0, "einsum: invalid ellipsis in the subscripts of operand ", i,
                   " ('", s, "'); expected at most one '...'");
        ell = true;
        letters.push_back(-2);
        k += 2;
        continue;
      }
      int l = label_of(s[k]);
      KILN_CHECK(l >= 0, "einsum: invalid subscript '", s[k], "' for operand ", i,
                 "; subscripts must be letters in [a-zA-Z]");
      letters.push_back(l);
    }
    const int64_t named = static_cast<int64_t>(letters.size()) - (ell ? 1 : 0);
    const int64_t nd = ops[i].dim();
    KILN_CHECK(ell ? nd >= named : nd == named, "einsum: the number of subscripts in the equation (", named,
               ") does not match the number of dimensions (", nd, ") for operand ", i,
               ell ? "" : " and no ellipsis was given");
    if (ell) p.ell_dims = std::max(p.ell_dims, nd - named);
    parsed.emplace_back(std::move(letters), ell ? nd - named : 0);
  }
  // Expand ellipses into labels and collect sizes (size 1 broadcasts).
  p.label_size.assign(static_cast<size_t>(kNumLetters + p.ell_dims), -1);
  std::array<int, kNumLetters> count{};
  for (size_t i = 0; i < parsed.size(); ++i) {
    std::vector<int> labels;
    for (int l : parsed[i].first) {
      if (l == -2) {
        const int64_t e = parsed[i].second;
        for (int64_t k = 0; k < e; ++k) labels.push_back(static_cast<int>(kNumLetters + p.ell_dims - e + k));
      } else {
        labels.push_back(l);
        ++count[l];
      }
    }
    for (size_t d = 0; d < labels.size(); ++d)
      for (size_t e = d + 1; e < labels.size(); ++e)
        KILN_CHECK(labels[d] != labels[e] || ops[i].sizes()[d] == ops[i].sizes()[e], "einsum: subscript ",
                   letter_of(labels[d]), " is repeated for operand ", i, " but the sizes don't match, ",
                   ops[i].sizes()[d], " != ", ops[i].sizes()[e]);
    for (size_t d = 0; d < labels.size(); ++d) {
      const int64_t sz = ops[i].sizes()[d];
      int64_t& cur = p.label_size[labels[d]];
      const int l = labels[d];
      if (cur == -1 || cur == 1) {
        cur = sz;
      } else if (sz != 1) {
        KILN_CHECK(sz == cur, "einsum: operands do not broadcast: subscript ",
                   l < kNumLetters ? std::string(1, letter_of(l)) : std::string("..."), " has size ", sz,
                   " for operand ", i, " but size ", cur, " elsewhere (shape ", shape_str(ops[i].sizes()), ")");
      }
    }
    p.op_labels.push_back(std::move(labels));
  }
  // Output subscripts.
  if (arrow == std::string::npos) {
    for (int64_t e = 0; e < p.ell_dims; ++e) p.out_labels.push_back(static_cast<int>(kNumLetters + e));
    for (int l = 0; l < kNumLetters; ++l)
      if (count[l] == 1) p.out_labels.push_back(l);
  } else {
    const std::string rhs = eq.substr(arrow + 2);
    std::array<bool, kNumLetters> seen{};
    bool ell = false;
    for (size_t k = 0; k < rhs.size(); ++k) {
      if (rhs[k] == '.') {
        KILN_CHECK(!ell && rhs.compare(k, 3, "...") == 0, "einsum: invalid ellipsis in the output subscripts '", rhs,
                   "'");
        ell = true;
        for (int64_t e = 0; e < p.ell_dims; ++e) p.out_labels.push_back(static_cast<int>(kNumLetters + e));
        k += 2;
        continue;
      }
      const int l = label_of(rhs[k]);
      KILN_CHECK(l >= 0, "einsum: invalid subscript '", rhs[k], "' in the output; subscripts must be letters in [a-zA-Z]");
      KILN_CHECK(!seen[l], "einsum: output subscript ", rhs[k], " appears more than once in the output");
      KILN_CHECK(count[l] > 0, "einsum: output subscript ", rhs[k],
                 " does not appear in the equation for any input operand");
      seen[l] = true;
      p.out_labels.push_back(l);
    }
  }
  return p;
}

Shape out_shape(const Plan& p) {
  Shape s;
  for (int l : p.out_labels) s.push_back(p.label_size[l] < 0 ? 1 : p.label_size[l]);
  return s;
}

// left and right have the same rank; size-1 dims broadcast. Sums over
// sum_dims (kept as size 1) and multiplies, through one bmm.
Tensor sumproduct_pair(Tensor left, Tensor right, const std::vector<bool>& sum_dim) {
  const int64_t L = left.dim();
  std::vector<int64_t> lro, lo, ro, sums, rest;
  std::vector<int64_t> lsum_only, rsum_only;
  for (int64_t d = 0; d < L; ++d) {
    const int64_t ls = left.sizes()[d], rs = right.sizes()[d];
    if (sum_dim[d]) {
      if (ls != 1 && rs != 1) sums.push_back(d);
      else {
        if (ls != 1) lsum_only.push_back(d);
        if (rs != 1) rsum_only.push_back(d);
        rest.push_back(d);
      }
    } else if (ls != 1 && rs != 1) {
      lro.push_back(d);
    } else if (ls != 1) {
      lo.push_back(d);
    } else if (rs != 1) {
      ro.push_back(d);
    } else {
      rest.push_back(d);
    }
  }
  if (!lsum_only.empty()) left = sum(left, lsum_only, /*keepdim=*/true, left.dtype());
  if (!rsum_only.empty()) right = sum(right, rsum_only, /*keepdim=*/true, right.dtype());
  auto prod = [&](const Tensor& t, const std::vector<int64_t>& dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= t.sizes()[d];
    return n;
  };
  const int64_t B = prod(left, lro), LO = prod(left, lo), RO = prod(right, ro), S = prod(left, sums);
  // left → [lro, lo, sums, ro(1), rest(1)]; right → [lro, sums, ro, lo(1), rest(1)].
  std::vector<int64_t> lperm, rperm;
  for (auto* v : {&lro, &lo, &sums, &ro, &rest}) lperm.insert(lperm.end(), v->begin(), v->end());
  for (auto* v : {&lro, &sums, &ro, &lo, &rest}) rperm.insert(rperm.end(), v->begin(), v->end());
  Tensor l3 = reshape(permute(left, lperm), std::vector<int64_t>{B, LO, S});
  Tensor r3 = reshape(permute(right, rperm), std::vector<int64_t>{B, S, RO});
  Tensor o = bmm(l3, r3);
  // Back to rank L: [lro, lo, ro, sums(1), rest(1)], then to the original order.
  std::vector<int64_t> operm, osize;
  for (int64_t d : lro) osize.push_back(left.sizes()[d]);
  for (int64_t d : lo) osize.push_back(left.sizes()[d]);
  for (int64_t d : ro) osize.push_back(right.sizes()[d]);
  for (auto* v : {&lro, &lo, &ro, &sums, &rest}) operm.insert(operm.end(), v->begin(), v->end());
  for (size_t k = osize.size(); k < operm.size(); ++k) osize.push_back(1);
  o = reshape(o, osize);
  std::vector<int64_t> inv(static_cast<size_t>(L));
  for (int64_t k = 0; k < L; ++k) inv[static_cast<size_t>(operm[k])] = k;
  return permute(o, inv);
}

Tensor einsum_impl(const std::string& eq, std::span<const Tensor> ops) {
  Plan p = parse(eq, ops);
  // Global label order: the output labels, then the contracted ones.
  std::vector<int> order = p.out_labels;
  std::vector<bool> in_out(p.label_size.size(), false);
  for (int l : p.out_labels) in_out[l] = true;
  for (size_t l = 0; l < p.label_size.size(); ++l)
    if (!in_out[l] && p.label_size[l] >= 0) order.push_back(static_cast<int>(l));
  std::vector<int64_t> pos(p.label_size.size(), -1);
  for (size_t k = 0; k < order.size(); ++k) pos[order[k]] = static_cast<int64_t>(k);
  const int64_t L = static_cast<int64_t>(order.size());
  const int64_t n_out = static_cast<int64_t>(p.out_labels.size());

  std::vector<int64_t> last_use(p.label_size.size(), -1);
  for (size_t i = 0; i < ops.size(); ++i)
    for (int l : p.op_labels[i]) last_use[l] = static_cast<int64_t>(i);

  // Each operand: diagonals for repeated labels, then permuted and unsqueezed to rank L.
  std::vector<Tensor> aligned;
  for (size_t i = 0; i < ops.size(); ++i) {
    Tensor t = ops[i];
    std::vector<int> labels = p.op_labels[i];
    for (bool again = true; again;) {
      again = false;
      for (size_t a = 0; a < labels.size() && !again; ++a)
        for (size_t b = a + 1; b < labels.size() && !again; ++b) {
          if (labels[a] != labels[b]) continue;
          KILN_CHECK(t.sizes()[a] == t.sizes()[b], "einsum: subscript ", letter_of(labels[a]),
                     " is repeated for operand ", i, " but the sizes don't match, ", t.sizes()[a],
                     " != ", t.sizes()[b]);
          t = diagonal(t, 0, static_cast<int64_t>(a), static_cast<int64_t>(b));
          const int l = labels[a];
          labels.erase(labels.begin() + static_cast<std::ptrdiff_t>(b));
          labels.erase(labels.begin() + static_cast<std::ptrdiff_t>(a));
          labels.push_back(l);
          again = true;
        }
    }
    std::vector<int64_t> perm(labels.size());
    for (size_t d = 0; d < labels.size(); ++d) perm[d] = static_cast<int64_t>(d);
    std::sort(perm.begin(), perm.end(), [&](int64_t x, int64_t y) { return pos[labels[x]] < pos[labels[y]]; });
    t = permute(t, perm);
    Shape sizes(static_cast<size_t>(L), 1);
    for (size_t d = 0; d < labels.size(); ++d) sizes[pos[labels[perm[d]]]] = t.sizes()[d];
    t = reshape(t, sizes);
    aligned.push_back(t);
  }

  Tensor r = aligned[0];
  {
    std::vector<int64_t> dims;
    for (int64_t k = n_out; k < L; ++k)
      if (last_use[order[k]] == 0 && r.sizes()[k] != 1) dims.push_back(k);
    if (!dims.empty()) r = sum(r, dims, /*keepdim=*/true, r.dtype());
  }
  for (size_t i = 1; i < aligned.size(); ++i) {
    std::vector<bool> sum_dim(static_cast<size_t>(L), false);
    for (int64_t k = n_out; k < L; ++k) sum_dim[k] = last_use[order[k]] == static_cast<int64_t>(i);
    r = sumproduct_pair(r, aligned[i], sum_dim);
  }
  // Every contracted dim is size 1 now; output dims may still be broadcast.
  Shape os = out_shape(p);
  Shape full = os;
  full.resize(static_cast<size_t>(L), 1);
  if (r.sizes() != IntArrayRef(full)) r = expand(r, full);
  return reshape(r, os);
}

std::vector<TensorMeta> meta_einsum(const OpCall& c) {
  Plan p = parse(c.attrs.str(0), c.inputs);
  return one_output(out_shape(p), c.in(0).dtype(), output_device(c.inputs));
}
KILN_REGISTER_META(einsum, meta_einsum);

std::vector<Tensor> decomp_einsum(const OpCall& c) { return {einsum_impl(c.attrs.str(0), c.inputs)}; }
KILN_REGISTER_DECOMP(einsum, decomp_einsum);

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  return call_op1(OpId::einsum, operands, {equation});
}

}  // namespace kiln
