// Note [Split reductions]
// A reduction kernel gives each row (a point of its kept dims) to one group of threads (Note
// [Generated CUDA]) or one core. With few rows and long ones — batch norm's sums over N, H and W
// per channel: 64 rows of 200k points — most of a GPU idles while a few blocks walk their rows.
// As TorchInductor's split reductions, such a kernel becomes two:
//  - the first keeps the outermost reduced dim (size S) as a row dim: S times the rows, each
//    reducing its share, and stores every reduction's partial accumulator (in the accumulator's
//    dtype: double for float sums) into a buffer of its own, a new graph value; stores of values
//    computed before the reductions (a pointwise output fused into the reduction) stay with it;
//  - the second iterates the kept dims and the split dim only, reduces the partials with the
//    combining op (a sum of partial sums, a max of partial maxima) and runs the rest of the
//    kernel: the per-row work after the reductions and its stores.
// Only kernels whose reductions all accumulate in the first pass and whose later work is per
// row are split (a kernel of several passes, softmax or var_mean, reads its row again after a
// reduction). The first kernel lists no graph nodes: where its buffers are not laid out as
// compiled it does nothing, the partials stay undefined, and the second runs the nodes eagerly.
#include "compile/lower/split_reduction.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

namespace kiln::compiler::lower {
namespace {

std::atomic<int64_t> g_split{0};

// The points of the dims where `which` holds.
int64_t points(const LoopKernel& k, bool reduced) {
  int64_t n = 1;
  for (size_t d = 0; d < k.sizes.size(); ++d)
    if (k.reduced[d] == reduced) n *= k.sizes[d];
  return n;
}

// Where to split: the outermost reduced dim of size > 1 (parts 0), or that dim cut into
// `parts` pieces first (see cut()); dim -1 when k should stay whole.
struct Where {
  int dim = -1;
  int64_t parts = 0;
};
Where split_dim(const LoopKernel& k, const SplitPolicy& p) {
  if (k.num_reduced() == 0) return {};
  const int64_t rows = points(k, false), extent = points(k, true);
  if (rows >= p.max_rows || extent < p.min_extent) return {};
  for (size_t d = 0; d < k.sizes.size(); ++d) {
    if (!k.reduced[d] || k.sizes[d] < 2) continue;
    if (extent / k.sizes[d] >= p.min_share) return {static_cast<int>(d), 0};
    // Too many pieces with too little each (a bias gradient's sum over 8192 rows, the only
    // reduced dim): cut it into the fewest power-of-two parts giving target_rows rows that
    // each keep min_share points.
    int64_t parts = 2;
    while (rows * parts < p.target_rows && extent / (parts * 2) >= p.min_share && k.sizes[d] % (parts * 2) == 0)
      parts *= 2;
    if (k.sizes[d] % parts != 0 || extent / parts < p.min_share) return {};
    return {static_cast<int>(d), parts};
  }
  return {};
}

// k with dim d of size n cut into dims [parts, n / parts]: a coefficient c along it becomes
// c * n / parts along the first and c along the second.
LoopKernel cut(const LoopKernel& k, int d, int64_t parts) {
  LoopKernel r = k;
  const size_t du = static_cast<size_t>(d);
  const int64_t inner = k.sizes[du] / parts;
  r.sizes[du] = inner;
  r.sizes.insert(r.sizes.begin() + d, parts);
  r.reduced.insert(r.reduced.begin() + d, static_cast<bool>(k.reduced[du]));
  auto fix = [&](Index& ix) { ix.coeffs.insert(ix.coeffs.begin() + d, ix.coeffs[du] * inner); };
  for (Expr& e : r.exprs)
    if (e.kind == ExprKind::Load) fix(e.index);
  for (Store& st : r.stores) fix(st.index);
  return r;
}

// Per expression: whether it is a reduction's value or depends on one (per-row work).
std::vector<bool> after_reductions(const LoopKernel& k) {
  std::vector<bool> post(k.exprs.size(), false);
  for (size_t e = 0; e < k.exprs.size(); ++e) {
    post[e] = k.exprs[e].kind == ExprKind::Reduce;
    for (int a : k.exprs[e].args) post[e] = post[e] || post[static_cast<size_t>(a)];
  }
  return post;
}

// Whether k has the form a split keeps correct: every reduction accumulates in pass 0 over
// values computed before any reduction, and nothing after a reduction varies along a reduced
// dim (it is per-row work).
bool splittable(const LoopKernel& k, const std::vector<bool>& post) {
  const std::vector<std::vector<bool>> v = k.varies();
  for (size_t e = 0; e < k.exprs.size(); ++e) {
    const Expr& x = k.exprs[e];
    if (x.kind == ExprKind::Reduce) {
      if (x.phase != 0) return false;
      for (int a : x.args)
        if (post[static_cast<size_t>(a)]) return false;  // a reduction of a reduction's value
    }
    if (post[e])
      for (size_t d = 0; d < k.sizes.size(); ++d)
        if (k.reduced[d] && v[e][d]) return false;
  }
  return true;
}

struct Split {
  LoopKernel first, second;
};

Split split(Graph& g, const LoopKernel& k, int s) {
  const size_t nd = k.sizes.size();
  const std::vector<bool> post = after_reductions(k);
  std::vector<int> reductions;
  for (size_t e = 0; e < k.exprs.size(); ++e)
    if (k.exprs[e].kind == ExprKind::Reduce) reductions.push_back(static_cast<int>(e));
  // The partials' layout: contiguous over the first kernel's row dims (k's kept dims and s).
  Shape psizes;
  std::vector<int64_t> coeff(nd, 0);
  int64_t stride = 1;
  for (size_t d = nd; d-- > 0;) {
    if (k.reduced[d] && static_cast<int>(d) != s) continue;
    coeff[d] = stride;
    stride *= k.sizes[d];
  }
  for (size_t d = 0; d < nd; ++d)
    if (!k.reduced[d] || static_cast<int>(d) == s) psizes.push_back(k.sizes[d]);
  const Index pindex{coeff, 0};
  Device device;
  for (const Buffer& b : k.buffers)
    if (b.output) device = g.values[static_cast<size_t>(b.value)].meta.device;
  const int producer = k.nodes.empty() ? -1 : k.nodes.front();
  std::vector<int> partial_values;
  for (int r : reductions) {
    Value v;
    v.meta = TensorMeta{psizes, k.exprs[static_cast<size_t>(r)].acc, device, contiguous_strides(psizes), 0};
    v.node = producer;
    g.values.push_back(v);
    partial_values.push_back(static_cast<int>(g.values.size()) - 1);
  }
  const int ni = k.num_inputs();

  Split out;
  // First: k's inputs and the outputs its pre-reduction stores write, then the partials.
  LoopKernel& a = out.first;
  a.sizes = k.sizes;
  a.reduced = k.reduced;
  a.reduced[static_cast<size_t>(s)] = false;
  a.input_metas = k.input_metas;
  std::vector<int> abuf(k.buffers.size(), -1);
  for (int b = 0; b < ni; ++b) {
    abuf[static_cast<size_t>(b)] = b;
    a.buffers.push_back(k.buffers[static_cast<size_t>(b)]);
  }
  for (const Store& st : k.stores) {
    if (post[static_cast<size_t>(st.expr)] || abuf[static_cast<size_t>(st.buffer)] >= 0) continue;
    abuf[static_cast<size_t>(st.buffer)] = static_cast<int>(a.buffers.size());
    a.buffers.push_back(k.buffers[static_cast<size_t>(st.buffer)]);
  }
  std::vector<int> aexpr(k.exprs.size(), -1);
  for (size_t e = 0; e < k.exprs.size(); ++e) {
    if (post[e] && k.exprs[e].kind != ExprKind::Reduce) continue;
    Expr x = k.exprs[e];
    for (int& arg : x.args) arg = aexpr[static_cast<size_t>(arg)];
    if (x.kind == ExprKind::Load) x.buffer = abuf[static_cast<size_t>(x.buffer)];
    if (x.kind == ExprKind::Reduce) x.dtype = x.acc;  // the partial keeps the accumulator's precision
    aexpr[e] = static_cast<int>(a.exprs.size());
    a.exprs.push_back(std::move(x));
  }
  for (const Store& st : k.stores)
    if (!post[static_cast<size_t>(st.expr)])
      a.stores.push_back({abuf[static_cast<size_t>(st.buffer)], st.index, aexpr[static_cast<size_t>(st.expr)]});
  for (size_t r = 0; r < reductions.size(); ++r) {
    const int pb = static_cast<int>(a.buffers.size());
    a.buffers.push_back({partial_values[r], k.exprs[static_cast<size_t>(reductions[r])].acc, true});
    a.stores.push_back({pb, pindex, aexpr[static_cast<size_t>(reductions[r])]});
  }

  // Second: k's inputs and the partials, then the outputs its per-row stores write; the reduced
  // dims but s have size 1.
  LoopKernel& b = out.second;
  b.sizes = k.sizes;
  b.reduced.assign(nd, false);
  for (size_t d = 0; d < nd; ++d)
    if (k.reduced[d] && static_cast<int>(d) != s) b.sizes[d] = 1;
  b.reduced[static_cast<size_t>(s)] = true;
  b.nodes = k.nodes;
  b.input_metas = k.input_metas;
  std::vector<int> bbuf(k.buffers.size(), -1);
  for (int i = 0; i < ni; ++i) {
    bbuf[static_cast<size_t>(i)] = i;
    b.buffers.push_back(k.buffers[static_cast<size_t>(i)]);
  }
  std::vector<int> pbuf;
  for (size_t r = 0; r < reductions.size(); ++r) {
    pbuf.push_back(static_cast<int>(b.buffers.size()));
    b.buffers.push_back({partial_values[r], k.exprs[static_cast<size_t>(reductions[r])].acc, false});
    b.input_metas.push_back(g.values[static_cast<size_t>(partial_values[r])].meta);
  }
  for (const Store& st : k.stores) {
    if (!post[static_cast<size_t>(st.expr)] || bbuf[static_cast<size_t>(st.buffer)] >= 0) continue;
    bbuf[static_cast<size_t>(st.buffer)] = static_cast<int>(b.buffers.size());
    b.buffers.push_back(k.buffers[static_cast<size_t>(st.buffer)]);
  }
  // The per-row work needs the reductions and the pre-reduction values it reads (which, being
  // per-row, vary along no reduced dim).
  std::vector<bool> needed(k.exprs.size(), false);
  for (const Store& st : k.stores)
    if (post[static_cast<size_t>(st.expr)]) needed[static_cast<size_t>(st.expr)] = true;
  for (size_t e = k.exprs.size(); e-- > 0;)
    if (needed[e] && k.exprs[e].kind != ExprKind::Reduce)
      for (int arg : k.exprs[e].args) needed[static_cast<size_t>(arg)] = true;
  std::vector<int> bexpr(k.exprs.size(), -1);
  for (size_t e = 0; e < k.exprs.size(); ++e) {
    if (!needed[e]) continue;
    const Expr& x0 = k.exprs[e];
    if (x0.kind == ExprKind::Reduce) {
      const size_t r = static_cast<size_t>(std::find(reductions.begin(), reductions.end(), static_cast<int>(e)) -
                                           reductions.begin());
      Expr load;
      load.kind = ExprKind::Load;
      load.dtype = x0.acc;
      load.buffer = pbuf[r];
      load.index = pindex;
      b.exprs.push_back(load);
      Expr red = x0;
      red.args = {static_cast<int>(b.exprs.size()) - 1};
      bexpr[e] = static_cast<int>(b.exprs.size());
      b.exprs.push_back(std::move(red));
      continue;
    }
    Expr x = x0;
    for (int& arg : x.args) arg = bexpr[static_cast<size_t>(arg)];
    if (x.kind == ExprKind::Load) x.buffer = bbuf[static_cast<size_t>(x.buffer)];
    bexpr[e] = static_cast<int>(b.exprs.size());
    b.exprs.push_back(std::move(x));
  }
  for (const Store& st : k.stores)
    if (post[static_cast<size_t>(st.expr)])
      b.stores.push_back({bbuf[static_cast<size_t>(st.buffer)], st.index, bexpr[static_cast<size_t>(st.expr)]});
  return out;
}

}  // namespace

int split_reductions(Graph& g, Schedule& s, const std::function<bool(const LoopKernel&)>& want,
                     const SplitPolicy& policy) {
  int count = 0;
  const size_t nk = s.kernels.size();
  for (size_t i = 0; i < nk; ++i) {
    const Where w = split_dim(s.kernels[i], policy);
    if (w.dim < 0 || !want(s.kernels[i]) || !splittable(s.kernels[i], after_reductions(s.kernels[i]))) continue;
    const LoopKernel k = w.parts ? cut(s.kernels[i], w.dim, w.parts) : s.kernels[i];
    Split parts = split(g, k, w.dim);
    s.kernels[i] = std::move(parts.second);
    s.kernels.push_back(std::move(parts.first));
    s.closed_by.push_back("split from kernel " + std::to_string(i) + " (Note [Split reductions])");
    const int first = static_cast<int>(s.kernels.size()) - 1;
    for (size_t st = 0; st < s.steps.size(); ++st)
      if (s.steps[st].is_kernel && s.steps[st].index == static_cast<int>(i)) {
        s.steps.insert(s.steps.begin() + static_cast<std::ptrdiff_t>(st), Step{true, first});
        break;
      }
    ++count;
  }
  g_split.fetch_add(count, std::memory_order_relaxed);
  return count;
}

int64_t reductions_split() { return g_split.load(std::memory_order_relaxed); }

}  // namespace kiln::compiler::lower
