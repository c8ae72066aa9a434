// Symbolic sizes while recording (Note [Dynamic shapes]).
#include "compile/capture/sym_shapes.h"

#include <string>

#include "compile/ir/graph.h"
#include "kiln/tensor.h"

namespace kiln::compiler {

namespace {
using detail::SymOp;

bool sym(int64_t raw) { return SymInt::raw_is_symbolic(raw); }

// Attrs that hold sizes (not dims, flags or values): the ones worth matching to symbols.
bool size_like(const std::string& name) {
  static const char* const kNames[] = {"size", "sizes", "length", "start", "end", "steps", "n", "m"};
  for (const char* k : kNames)
    if (name == k) return true;
  return false;
}

int64_t product(SymTable& t, const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t d = from; d < to; ++d) p = t.apply(SymOp::Mul, p, s[d]);
  return p;
}

// An expression for the number v. In a size list (position >= 0): input 0's dim at that
// position, or the product of that dim and the next (a view that merges them). A single size:
// any symbolic dim of the inputs, else the one symbol with that value. Lists match by position
// only: a list is mostly static sizes (heads, channels) that may equal a symbol's value.
int64_t match(SymTable& t, int64_t v, std::span<const Tensor> inputs, int position) {
  if (v < 2) return v;
  const int g = t.current_graph();
  auto usable = [&](int64_t raw) { return sym(raw) && t.node(raw).graph == g && t.node(raw).hint == v; };
  if (position >= 0) {
    if (inputs.empty() || !inputs[0].defined() || !inputs[0].unsafe_impl()->sym_sizes) return v;
    const Shape& s = *inputs[0].unsafe_impl()->sym_sizes;
    const size_t k = static_cast<size_t>(position);
    if (k < s.size() && t.hint(s[k]) == v) return usable(s[k]) ? s[k] : v;
    if (k + 1 < s.size() && (sym(s[k]) || sym(s[k + 1])) && t.hint(s[k]) * t.hint(s[k + 1]) == v) {
      int64_t p = t.apply(SymOp::Mul, s[k], s[k + 1]);
      if (usable(p)) return p;
    }
    return v;
  }
  for (const Tensor& x : inputs)
    if (x.defined() && x.unsafe_impl()->sym_sizes)
      for (int64_t raw : *x.unsafe_impl()->sym_sizes)
        if (usable(raw)) return raw;
  // The symbolic attrs of the composites being decomposed (zeros({n + 1}) → full).
  const auto& context = sym_attr_context();
  for (auto it = context.rbegin(); it != context.rend(); ++it)
    for (const AttrValue& a : **it) {
      if (const auto* i = std::get_if<int64_t>(&a); i && t.owns(*i) && usable(*i)) return *i;
      if (const auto* l = std::get_if<std::vector<int64_t>>(&a))
        for (int64_t x : *l)
          if (t.owns(x) && usable(x)) return x;
      if (const auto* s = std::get_if<Scalar>(&a); s && s->is_integral() && t.owns(s->to_long()) && usable(s->to_long()))
        return s->to_long();
    }
  int64_t found = v;
  int count = 0;
  for (size_t k : t.symbol_nodes()) {
    const SymNode& n = t.nodes()[k];
    if (n.graph == g && n.hint == v && count++ == 0) found = t.raw_of(k);
  }
  return count == 1 ? found : v;
}

int64_t plain(const SymTable& t, int64_t raw) {
  return sym(raw) && t.node(raw).graph != t.current_graph() ? t.node(raw).hint : raw;
}

// An attr whose symbolic values bound in another graph are replaced by their numbers.
AttrValue attr_plain(const SymTable& t, AttrValue v) {
  if (auto* i = std::get_if<int64_t>(&v)) *i = plain(t, *i);
  else if (auto* l = std::get_if<std::vector<int64_t>>(&v))
    for (int64_t& x : *l) x = plain(t, x);
  else if (auto* s = std::get_if<Scalar>(&v); s && s->is_integral() && sym(s->to_long()))
    *s = Scalar(plain(t, s->to_long()));
  return v;
}
}  // namespace

Shape sym_sizes_of(const Tensor& t) {
  const TensorImpl* i = t.unsafe_impl();
  return i->sym_sizes ? *i->sym_sizes : i->sizes;
}

namespace {
// The factors of a product expression (a Mul tree), for splitting one dim into several.
void factors(const SymTable& t, int64_t raw, std::vector<int64_t>& out) {
  if (sym(raw) && t.node(raw).op == SymOp::Mul) {
    factors(t, t.node(raw).a, out);
    factors(t, t.node(raw).b, out);
  } else {
    out.push_back(raw);
  }
}

// A view's output dims as expressions over its input's (`out` holds this call's numbers):
// the dims are cut into groups whose products agree (a view merges or splits adjacent dims);
// a group with one output dim is the product of its input dims, a group that splits one input
// dim takes its factors, the one left over being the quotient.
Shape view_sizes(SymTable& t, const Shape& in, const Shape& out) {
  Shape res = out;
  size_t i = 0, j = 0;
  while (j < out.size()) {
    if (out[j] == 1) {
      if (i < in.size() && t.hint(in[i]) == 1) ++i;
      ++j;
      continue;
    }
    while (i < in.size() && t.hint(in[i]) == 1) ++i;
    if (i >= in.size()) return out;
    size_t i0 = i, j0 = j;
    int64_t pin = t.hint(in[i++]), pout = out[j++];
    while (pin != pout) {
      if (pin < pout) {
        if (i >= in.size()) return out;
        pin *= t.hint(in[i++]);
      } else {
        if (j >= out.size()) return out;
        pout *= out[j++];
      }
      if (pin == 0 || pout == 0) return out;
    }
    if (j - j0 == 1) {
      res[j0] = product(t, in, i0, i);
    } else if (i - i0 == 1) {
      std::vector<int64_t> f;
      factors(t, in[i0], f);
      std::vector<bool> used(f.size(), false);
      int missing = -1, count = 0;
      for (size_t k = j0; k < j; ++k) {
        bool found = false;
        for (size_t q = 0; q < f.size() && !found; ++q)
          if (!used[q] && t.hint(f[q]) == out[k]) {
            used[q] = found = true;
            res[k] = f[q];
          }
        if (!found) {
          missing = static_cast<int>(k);
          ++count;
        }
      }
      if (count == 1) {
        int64_t rest = 1;
        for (size_t k = j0; k < j; ++k)
          if (static_cast<int>(k) != missing) rest = t.apply(SymOp::Mul, rest, res[k]);
        res[static_cast<size_t>(missing)] = t.apply(SymOp::Div, in[i0], rest);
      } else if (count > 1) {
        for (size_t k = j0; k < j; ++k) res[k] = out[k];
      }
    }
  }
  for (size_t k = 0; k < res.size(); ++k)
    if (t.hint(res[k]) != out[k]) return out;
  return res;
}
}  // namespace

std::vector<AttrValue> symbolic_attrs(SymTable& t, OpId op, std::span<const Tensor> inputs,
                                      const std::vector<AttrValue>& attrs, const std::vector<TensorMeta>& metas) {
  std::vector<AttrValue> out = attrs;
  const std::vector<std::string>& names = op_attr_names(op);
  const OpInfo& info = op_info(op);
  // Sizes the code wrote as SymInts say which are symbolic: then nothing is matched.
  bool written = false;
  for (AttrValue& v : out) {
    if (!attr_is_symbolic(v)) continue;
    v = attr_plain(t, v);
    written = written || attr_is_symbolic(v);
  }
  if (written) return out;
  // A view's sizes follow from its input's (grouping its dims); -1 stays -1.
  if ((op == OpId::view || op == OpId::reshape) && !out.empty() && !metas.empty() && !inputs.empty() &&
      inputs[0].defined() && inputs[0].unsafe_impl()->sym_sizes) {
    if (auto* l = std::get_if<std::vector<int64_t>>(&out[0]); l && l->size() == metas[0].sizes.size()) {
      Shape v = view_sizes(t, *inputs[0].unsafe_impl()->sym_sizes, metas[0].sizes);
      for (size_t k = 0; k < l->size(); ++k)
        if ((*l)[k] != -1) (*l)[k] = v[k];
    }
    return out;
  }
  for (size_t a = 0; a < out.size(); ++a) {
    if (a >= names.size() || !size_like(names[a]) || is_random_attr(info, a, out.size())) continue;
    AttrValue& v = out[a];
    if (auto* i = std::get_if<int64_t>(&v)) {
      *i = match(t, *i, inputs, -1);
    } else if (auto* l = std::get_if<std::vector<int64_t>>(&v)) {
      // A factory's sizes match the symbols; a view's match its input's dims by position;
      // other lists (split sizes, repeats) are counts that merely may equal a size.
      if (names[a] != "size" && names[a] != "sizes" && !info.has(FACTORY)) continue;
      const bool expand = op == OpId::expand && !inputs.empty() && inputs[0].defined();
      const Shape in = expand ? sym_sizes_of(inputs[0]) : Shape{};
      for (size_t k = 0; k < l->size(); ++k) {
        int64_t& x = (*l)[k];
        if (expand) {
          // Right-aligned with the input; a new or broadcast dim is some other size.
          const int64_t j = static_cast<int64_t>(k) - (static_cast<int64_t>(l->size()) - static_cast<int64_t>(in.size()));
          if (j >= 0 && t.hint(in[j]) == x)
            x = in[j];
          else
            x = match(t, x, inputs, -1);
          continue;
        }
        x = match(t, x, inputs, info.has(FACTORY) ? -1 : static_cast<int>(k));
      }
    } else if (auto* s = std::get_if<Scalar>(&v); s && s->is_integral()) {
      int64_t x = match(t, s->to_long(), inputs, -1);
      if (x != s->to_long()) *s = Scalar(x);
    }
  }
  return out;
}

namespace {
// A size list attr's expressions with -1 inferred from the input's element count.
Shape from_size_attr(SymTable& t, const std::vector<int64_t>& size, const Tensor* in, bool expand) {
  Shape out(size.begin(), size.end());
  for (size_t k = 0; k < out.size(); ++k) {
    if (out[k] != -1) continue;
    if (!in) return {};
    Shape s = sym_sizes_of(*in);
    if (expand) {
      size_t lead = out.size() - s.size();
      out[k] = k >= lead ? s[k - lead] : -1;
    } else {
      int64_t others = 1;
      for (size_t j = 0; j < out.size(); ++j)
        if (j != k) others = t.apply(SymOp::Mul, others, out[j]);
      out[k] = t.apply(SymOp::Div, product(t, s, 0, s.size()), others);
    }
  }
  return out;
}

// One output's dims by position: same index (equal rank), else left- then right-aligned;
// pointwise ops broadcast, so right-aligned only. Then any symbolic dim with that value.
Shape positional(SymTable& t, std::span<const Tensor> inputs, const TensorMeta& m, bool pointwise) {
  Shape out(m.sizes.begin(), m.sizes.end());
  const int64_t r = static_cast<int64_t>(out.size());
  for (int64_t k = 0; k < r; ++k) {
    const int64_t v = out[k];
    if (v < 2) continue;
    bool decided = false;
    for (const Tensor& x : inputs) {
      if (!x.defined() || decided) continue;
      Shape s = sym_sizes_of(x);
      const int64_t rj = static_cast<int64_t>(s.size());
      int64_t cand[2] = {-1, -1};
      if (pointwise) cand[0] = k - (r - rj);
      else if (rj == r) cand[0] = k;
      else {
        cand[0] = k;
        cand[1] = k - (r - rj);
      }
      for (int64_t c : cand)
        if (c >= 0 && c < rj && t.hint(s[c]) == v) {
          out[k] = s[c];
          decided = true;
          break;
        }
    }
    if (!decided)
      for (const Tensor& x : inputs)
        if (!decided && x.defined() && x.unsafe_impl()->sym_sizes)
          for (int64_t raw : *x.unsafe_impl()->sym_sizes)
            if (sym(raw) && t.hint(raw) == v) {
              out[k] = raw;
              decided = true;
              break;
            }
  }
  return out;
}
}  // namespace

std::vector<Shape> symbolic_output_sizes(SymTable& t, OpId op, std::span<const Tensor> inputs,
                                         const std::vector<AttrValue>& attrs, const std::vector<TensorMeta>& metas) {
  std::vector<Shape> out(metas.size());
  const OpInfo& info = op_info(op);
  const Tensor* in0 = !inputs.empty() && inputs[0].defined() ? &inputs[0] : nullptr;
  auto ints = [&](size_t k) -> const std::vector<int64_t>* {
    return k < attrs.size() ? std::get_if<std::vector<int64_t>>(&attrs[k]) : nullptr;
  };
  auto int_at = [&](size_t k) -> int64_t {
    const int64_t* p = k < attrs.size() ? std::get_if<int64_t>(&attrs[k]) : nullptr;
    return p ? *p : 0;
  };
  auto wrap = [](int64_t d, size_t n) { return d < 0 ? d + static_cast<int64_t>(n) : d; };
  Shape s0 = in0 ? sym_sizes_of(*in0) : Shape{};
  const std::vector<std::string>& names = op_attr_names(op);
  bool done = false;
  switch (op) {
    case OpId::view:
    case OpId::reshape:
      if (const auto* l = ints(0)) out[0] = from_size_attr(t, *l, in0, false);
      done = true;
      break;
    case OpId::expand:
      if (const auto* l = ints(0)) out[0] = from_size_attr(t, *l, in0, true);
      done = true;
      break;
    case OpId::transpose:
      if (in0 && s0.size() >= 2) {
        out[0] = s0;
        std::swap(out[0][wrap(int_at(0), s0.size())], out[0][wrap(int_at(1), s0.size())]);
      } else {
        out[0] = s0;
      }
      done = true;
      break;
    case OpId::t:
      out[0] = s0;
      if (s0.size() == 2) std::swap(out[0][0], out[0][1]);
      done = true;
      break;
    case OpId::permute:
      if (const auto* l = ints(0); l && l->size() == s0.size()) {
        out[0] = s0;
        for (size_t k = 0; k < l->size(); ++k) out[0][k] = s0[wrap((*l)[k], s0.size())];
      }
      done = true;
      break;
    case OpId::select: {
      out[0] = s0;
      if (!s0.empty()) out[0].erase(out[0].begin() + wrap(int_at(0), s0.size()));
      done = true;
      break;
    }
    case OpId::narrow: {
      out[0] = s0;
      if (!s0.empty()) out[0][wrap(int_at(0), s0.size())] = int_at(2);
      done = true;
      break;
    }
    case OpId::slice: {
      out[0] = s0;
      if (!s0.empty()) {
        size_t d = wrap(int_at(0), s0.size());
        int64_t start = int_at(1), end = int_at(2), step = int_at(3);
        int64_t n = t.hint(s0[d]);
        // The clamps the meta function applied, chosen by this call's numbers.
        if (t.hint(start) < 0 || t.hint(end) < 0 || step < 1) {
          out[0][d] = metas[0].sizes[d];
        } else {
          int64_t hi = t.hint(end) >= n ? s0[d] : end;
          int64_t lo = t.hint(start) >= n ? s0[d] : start;
          int64_t len = t.apply(SymOp::Sub, hi, lo);
          if (step != 1) len = t.apply(SymOp::Div, t.apply(SymOp::Add, len, step - 1), step);
          out[0][d] = len;
        }
      }
      done = true;
      break;
    }
    // Products: the rows of a, the columns of b; batch dims of a (same shape as b's, or broadcast).
    case OpId::mm:
    case OpId::bmm:
    case OpId::matmul:
    case OpId::addmm:
    case OpId::baddbmm: {
      const bool with_self = op == OpId::addmm || op == OpId::baddbmm;
      if (inputs.size() >= (with_self ? 3u : 2u)) {
        Shape a = sym_sizes_of(inputs[with_self ? 1 : 0]), b = sym_sizes_of(inputs[with_self ? 2 : 1]);
        const size_t r = metas[0].sizes.size();
        if (a.size() >= 2 && b.size() >= 2 && r >= 2) {
          Shape o = positional(t, inputs, metas[0], false);
          o[r - 2] = a[a.size() - 2];
          o[r - 1] = b[b.size() - 1];
          out[0] = o;
          done = true;
        }
      }
      break;
    }
    case OpId::linear:
      if (inputs.size() >= 2 && in0) {
        out[0] = s0;
        if (!out[0].empty()) out[0].back() = sym_sizes_of(inputs[1])[0];
        done = true;
      }
      break;
    case OpId::embedding:
      if (inputs.size() >= 2 && in0) {
        out[0] = sym_sizes_of(inputs[1]);
        out[0].push_back(s0.size() > 1 ? s0[1] : 1);
        done = true;
      }
      break;
    case OpId::index: {
      // One index tensor on dim 0 (x[idx]): its shape, then x's other dims.
      bool one = inputs.size() >= 2 && inputs[1].defined();
      for (size_t k = 2; k < inputs.size(); ++k) one = one && !inputs[k].defined();
      if (one && in0 && !s0.empty()) {
        out[0] = sym_sizes_of(inputs[1]);
        out[0].insert(out[0].end(), s0.begin() + 1, s0.end());
        done = true;
      }
      break;
    }
    case OpId::scaled_dot_product_attention:
      if (inputs.size() >= 3 && in0 && inputs[2].defined()) {
        out[0] = s0;
        if (!out[0].empty()) out[0].back() = sym_sizes_of(inputs[2]).back();
        done = true;
      }
      break;
    case OpId::cat:
      if (in0 && !s0.empty()) {
        size_t d = static_cast<size_t>(wrap(int_at(0), s0.size()));
        out[0] = s0;
        int64_t total = 0;
        bool ok = true;
        for (const Tensor& x : inputs) {
          Shape sx = sym_sizes_of(x);
          ok = ok && sx.size() == s0.size();
          if (ok) total = t.apply(SymOp::Add, total, sx[d]);
        }
        if (ok) out[0][d] = total;
        done = ok;
      }
      break;
    case OpId::arange: {
      // (end - start + step - 1) / step elements, for integral arguments with a positive step.
      const Scalar* st = attrs.size() > 2 ? std::get_if<Scalar>(&attrs[0]) : nullptr;
      const Scalar* en = attrs.size() > 2 ? std::get_if<Scalar>(&attrs[1]) : nullptr;
      const Scalar* sp = attrs.size() > 2 ? std::get_if<Scalar>(&attrs[2]) : nullptr;
      if (st && en && sp && st->is_integral() && en->is_integral() && sp->is_integral() && sp->to_long() > 0) {
        int64_t len = t.apply(SymOp::Sub, en->to_long(), st->to_long());
        len = t.apply(SymOp::Div, t.apply(SymOp::Add, len, sp->to_long() - 1), sp->to_long());
        out[0] = Shape{len};
      }
      done = true;
      break;
    }
    default:
      break;
  }
  if (!done) {
    // A factory's "size" attr is its output's shape.
    for (size_t a = 0; a < names.size() && a < attrs.size(); ++a)
      if (names[a] == "size" && info.has(FACTORY))
        if (const auto* l = ints(a)) {
          out[0] = Shape(l->begin(), l->end());
          done = true;
        }
  }
  if (!done)
    for (size_t k = 0; k < metas.size(); ++k) out[k] = positional(t, inputs, metas[k], info.has(POINTWISE));
  // Keep only what this call's numbers confirm; all-plain results are dropped.
  for (size_t k = 0; k < out.size(); ++k) {
    bool any = false, ok = out[k].size() == metas[k].sizes.size();
    for (size_t d = 0; ok && d < out[k].size(); ++d) {
      ok = t.hint(out[k][d]) == metas[k].sizes[d];
      any = any || sym(out[k][d]);
    }
    if (!ok || !any) out[k].clear();
  }
  return out;
}

}  // namespace kiln::compiler
