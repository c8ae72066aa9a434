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
#include <optional>
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

// Kernel assembly for a split: k's expressions copied on demand into a kernel over k's dims
// (some of size 1), with some of k's reductions replaced by loads of materialized values.
class Assembler {
 public:
  struct Source {
    int value = -1;  // graph value holding the reduction's values
    Index index;
    DType dtype = DType::Float32;
  };

  Assembler(const Graph& g, const LoopKernel& k, std::vector<int64_t> sizes, std::vector<bool> reduced)
      : from(k.exprs.size()), combine(k.exprs.size()), partial(k.exprs.size(), false), g_(g), k_(k),
        memo_(k.exprs.size(), -1) {
    out_.sizes = std::move(sizes);
    out_.reduced = std::move(reduced);
  }

  // Per k expression: a reduction read from its materialized values; a reduction recomputed
  // from partials (a Reduce over a load of them); a reduction that stores its accumulator.
  std::vector<std::optional<Source>> from, combine;
  std::vector<bool> partial;

  int expr(int e) {
    const size_t eu = static_cast<size_t>(e);
    if (memo_[eu] >= 0) return memo_[eu];
    const Expr& x0 = k_.exprs[eu];
    int id;
    if (from[eu]) {
      id = load(*from[eu]);
    } else if (combine[eu]) {
      Expr red = x0;
      red.args = {load(*combine[eu])};
      red.phase = 0;
      id = add(std::move(red));
    } else {
      Expr x = x0;
      for (int& a : x.args) a = expr(a);
      if (x.kind == ExprKind::Load) x.buffer = input(k_.buffers[static_cast<size_t>(x.buffer)].value, x.buffer);
      if (x.kind == ExprKind::Reduce && partial[eu]) x.dtype = x.acc;  // keeps its precision
      // Passes renumbered for this kernel (Note [Reduction phases]): after its own reductions only.
      int ph = 0;
      for (int a : x.args) {
        const Expr& y = out_.exprs[static_cast<size_t>(a)];
        ph = std::max(ph, y.phase + (y.kind == ExprKind::Reduce ? 1 : 0));
      }
      x.phase = ph;
      id = add(std::move(x));
    }
    return memo_[eu] = id;
  }

  void store(int value, DType dtype, const Index& index, int e) {
    const int id = expr(e);
    auto it = std::find_if(outs_.begin(), outs_.end(), [&](const Buffer& b) { return b.value == value; });
    const int ob = static_cast<int>(it - outs_.begin());
    if (it == outs_.end()) outs_.push_back({value, dtype, true});
    out_.stores.push_back({ob, index, id});
  }

  LoopKernel finish(std::vector<int> nodes) {
    const int ni = static_cast<int>(ins_.size());
    out_.buffers = ins_;
    for (const Buffer& b : outs_) out_.buffers.push_back(b);
    for (Store& st : out_.stores) st.buffer += ni;
    out_.input_metas = metas_;
    out_.nodes = std::move(nodes);
    return std::move(out_);
  }

 private:
  int add(Expr x) {
    out_.exprs.push_back(std::move(x));
    return static_cast<int>(out_.exprs.size()) - 1;
  }
  // The input buffer of graph value v: k's buffer kb, or a materialized value (kb -1).
  int input(int v, int kb) {
    for (size_t i = 0; i < ins_.size(); ++i)
      if (ins_[i].value == v) return static_cast<int>(i);
    const bool compiled = kb >= 0 && static_cast<size_t>(kb) < k_.input_metas.size();
    const TensorMeta& m = compiled ? k_.input_metas[static_cast<size_t>(kb)] : g_.values[static_cast<size_t>(v)].meta;
    ins_.push_back({v, kb >= 0 ? k_.buffers[static_cast<size_t>(kb)].dtype : m.dtype, false});
    metas_.push_back(m);
    return static_cast<int>(ins_.size()) - 1;
  }
  int load(const Source& src) {
    Expr l;
    l.kind = ExprKind::Load;
    l.dtype = src.dtype;
    l.buffer = input(src.value, -1);
    l.index = src.index;
    return add(std::move(l));
  }

  const Graph& g_;
  const LoopKernel& k_;
  LoopKernel out_;
  std::vector<int> memo_;
  std::vector<Buffer> ins_, outs_;
  std::vector<TensorMeta> metas_;
};

// Per expression: whether it is a reduction's value or depends on one.
std::vector<bool> after_reductions(const LoopKernel& k) {
  std::vector<bool> post(k.exprs.size(), false);
  for (size_t e = 0; e < k.exprs.size(); ++e) {
    post[e] = k.exprs[e].kind == ExprKind::Reduce;
    for (int a : k.exprs[e].args) post[e] = post[e] || post[static_cast<size_t>(a)];
  }
  return post;
}

// Whether a split keeps k correct: each reduction reads only values of earlier passes' reductions.
bool splittable(const LoopKernel& k) {
  std::vector<int> level(k.exprs.size(), 0);  // 1 + the latest pass of a reduction it depends on
  for (size_t e = 0; e < k.exprs.size(); ++e) {
    const Expr& x = k.exprs[e];
    for (int a : x.args) {
      const Expr& y = k.exprs[static_cast<size_t>(a)];
      level[e] = std::max(level[e], y.kind == ExprKind::Reduce ? y.phase + 1 : level[static_cast<size_t>(a)]);
    }
    if (x.kind == ExprKind::Reduce && level[e] > x.phase) return false;
  }
  return true;
}

// The kernels replacing k, split along its reduced dim s, in order: per pass p of k's
// reductions, one kernel of partial accumulators (k's dims with s kept) and one combining them
// (over k's kept dims and s) into the reductions' values, which later kernels load; the last
// combining kernel also stores k's per-row values, and a final pointwise kernel over all of k's
// points stores the per-point values computed after a reduction (batch norm's output in the
// kernel of its statistics). The new values (partials, reductions' values) are appended to g.
std::vector<LoopKernel> split(Graph& g, const LoopKernel& k, int s) {
  const size_t nd = k.sizes.size();
  const std::vector<bool> post = after_reductions(k);
  const std::vector<std::vector<bool>> varies = k.varies();
  Device device;
  for (const Buffer& b : k.buffers)
    if (b.output) device = g.values[static_cast<size_t>(b.value)].meta.device;
  const int producer = k.nodes.empty() ? -1 : k.nodes.front();
  // A new value of dtype t laid out contiguously over the dims where `keep` holds.
  auto new_value = [&](const std::vector<bool>& keep, DType t, Index* index) {
    Shape sizes;
    index->coeffs.assign(nd, 0);
    index->offset = 0;
    int64_t stride = 1;
    for (size_t d = nd; d-- > 0;)
      if (keep[d]) {
        index->coeffs[d] = stride;
        stride *= k.sizes[d];
      }
    for (size_t d = 0; d < nd; ++d)
      if (keep[d]) sizes.push_back(k.sizes[d]);
    Value v;
    v.meta = TensorMeta{sizes, t, device, contiguous_strides(sizes), 0};
    v.node = producer;
    g.values.push_back(v);
    return static_cast<int>(g.values.size()) - 1;
  };
  std::vector<bool> rows(nd), rows_and_s(nd), none(nd, false), first_reduced = k.reduced, combine_reduced(nd, false);
  std::vector<int64_t> combine_sizes = k.sizes;
  for (size_t d = 0; d < nd; ++d) {
    rows[d] = !k.reduced[d];
    rows_and_s[d] = rows[d] || static_cast<int>(d) == s;
    if (k.reduced[d] && static_cast<int>(d) != s) combine_sizes[d] = 1;
  }
  first_reduced[static_cast<size_t>(s)] = false;
  combine_reduced[static_cast<size_t>(s)] = true;

  int passes = 0;
  for (const Expr& x : k.exprs)
    if (x.kind == ExprKind::Reduce) passes = std::max(passes, x.phase + 1);
  // k's stores: before any reduction (with pass 0's partials), per row (with the last
  // combination), per point after a reduction (the final kernel).
  std::vector<const Store*> pre, per_row, per_point;
  for (const Store& st : k.stores) {
    const size_t e = static_cast<size_t>(st.expr);
    bool row = true;
    for (size_t d = 0; d < nd; ++d) row = row && !(k.reduced[d] && varies[e][d]);
    (!post[e] ? pre : row ? per_row : per_point).push_back(&st);
  }
  auto store_of_k = [&](Assembler& a, const Store* st) {
    const Buffer& b = k.buffers[static_cast<size_t>(st->buffer)];
    a.store(b.value, b.dtype, st->index, st->expr);
  };
  std::vector<std::optional<Assembler::Source>> materialized(k.exprs.size());
  std::vector<LoopKernel> out;
  for (int p = 0; p < passes; ++p) {
    std::vector<int> reds;
    for (size_t e = 0; e < k.exprs.size(); ++e)
      if (k.exprs[e].kind == ExprKind::Reduce && k.exprs[e].phase == p) reds.push_back(static_cast<int>(e));
    if (reds.empty()) continue;
    Assembler first(g, k, k.sizes, first_reduced);
    first.from = materialized;
    std::vector<Assembler::Source> partials;
    for (int r : reds) {
      const Expr& x = k.exprs[static_cast<size_t>(r)];
      first.partial[static_cast<size_t>(r)] = true;
      Assembler::Source src;
      src.dtype = x.acc;
      src.value = new_value(rows_and_s, x.acc, &src.index);
      first.store(src.value, x.acc, src.index, r);
      partials.push_back(src);
    }
    if (p == 0)
      for (const Store* st : pre) store_of_k(first, st);
    out.push_back(first.finish({}));

    const bool last = p == passes - 1;
    Assembler comb(g, k, combine_sizes, combine_reduced);
    comb.from = materialized;
    for (size_t i = 0; i < reds.size(); ++i) comb.combine[static_cast<size_t>(reds[i])] = partials[i];
    for (int r : reds) {
      if (last && per_point.empty()) break;  // no later kernel reads them
      const Expr& x = k.exprs[static_cast<size_t>(r)];
      Assembler::Source src;
      src.dtype = x.dtype;
      src.value = new_value(rows, x.dtype, &src.index);
      comb.store(src.value, x.dtype, src.index, r);
      materialized[static_cast<size_t>(r)] = src;
    }
    if (last)
      for (const Store* st : per_row) store_of_k(comb, st);
    out.push_back(comb.finish(last && per_point.empty() ? k.nodes : std::vector<int>{}));
  }
  if (!per_point.empty()) {
    Assembler fin(g, k, k.sizes, none);
    fin.from = materialized;
    for (const Store* st : per_point) store_of_k(fin, st);
    out.push_back(fin.finish(k.nodes));
  }
  return out;
}

// Note [Split loop order]: the kernels of a split keep the dims of the kernel they came from,
// whose order a multi-pass kernel took from its reduced rows (kept dims outside, reduced inside).
// Each is single-pass, so each takes the order the scheduler would give it (Note [Loop order]):
// dims by decreasing stride in its largest input, kept before reduced, and a contiguous kept dim
// innermost (column form). This matters where the reduced dims are not the contiguous ones: batch
// norm over channels-last activations (Note [Channels-last graphs]) would otherwise walk memory
// with a stride of the channel count in every kernel of the split.
void order_loops(LoopKernel& k) {
  const size_t nd = k.sizes.size();
  if (nd < 2 || k.num_phases() > 1) return;
  const Expr* primary = nullptr;
  int64_t best = -1;
  for (const Expr& e : k.exprs) {
    if (e.kind != ExprKind::Load || static_cast<size_t>(e.buffer) >= k.input_metas.size()) continue;
    int64_t n = 1;
    for (int64_t s : k.input_metas[static_cast<size_t>(e.buffer)].sizes) n *= s;
    if (n > best) best = n, primary = &e;
  }
  if (!primary) return;
  std::vector<size_t> kept, red;
  for (size_t d = 0; d < nd; ++d) (k.reduced[d] ? red : kept).push_back(d);
  const std::vector<size_t> order = loop_order(std::move(kept), std::move(red), &primary->index.coeffs, true);
  bool same = true;
  for (size_t i = 0; i < nd; ++i) same = same && order[i] == i;
  if (same) return;
  auto permute = [&](auto& v) {
    auto old = v;
    for (size_t i = 0; i < nd; ++i) v[i] = old[order[i]];
  };
  permute(k.sizes);
  permute(k.reduced);
  for (Expr& e : k.exprs)
    if (e.kind == ExprKind::Load) permute(e.index.coeffs);
  for (Store& s : k.stores) permute(s.index.coeffs);
}

}  // namespace

int split_reductions(Graph& g, Schedule& s, const std::function<bool(const LoopKernel&)>& want,
                     const SplitPolicy& policy) {
  int count = 0;
  const size_t nk = s.kernels.size();
  for (size_t i = 0; i < nk; ++i) {
    const Where w = split_dim(s.kernels[i], policy);
    if (w.dim < 0 || !want(s.kernels[i]) || !splittable(s.kernels[i])) continue;
    const LoopKernel k = w.parts ? cut(s.kernels[i], w.dim, w.parts) : s.kernels[i];
    std::vector<LoopKernel> parts = split(g, k, w.dim);
    for (LoopKernel& part : parts) order_loops(part);
    // The last part takes k's place (and its graph nodes); the others run just before it.
    s.kernels[i] = std::move(parts.back());
    parts.pop_back();
    std::vector<Step> before;
    for (LoopKernel& part : parts) {
      s.kernels.push_back(std::move(part));
      s.closed_by.push_back("split from kernel " + std::to_string(i) + " (Note [Split reductions])");
      before.push_back(Step{true, static_cast<int>(s.kernels.size()) - 1});
    }
    for (size_t st = 0; st < s.steps.size(); ++st)
      if (s.steps[st].is_kernel && s.steps[st].index == static_cast<int>(i)) {
        s.steps.insert(s.steps.begin() + static_cast<std::ptrdiff_t>(st), before.begin(), before.end());
        break;
      }
    ++count;
  }
  g_split.fetch_add(count, std::memory_order_relaxed);
  return count;
}

int64_t reductions_split() { return g_split.load(std::memory_order_relaxed); }

}  // namespace kiln::compiler::lower
