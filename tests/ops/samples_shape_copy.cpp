// Samples for shape copies: repeat, cat, stack, flip, roll, tril, triu, pad.
// References index the fp64 Ref arrays directly (naive loops).
#include <algorithm>

#include <gtest/gtest.h>

#include "tests/ops/op_samples.h"

namespace kiln::test {
namespace {

const std::vector<DType> kAll = {kBool, kUInt8, kInt8, kInt16, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64};
std::string dname(DType t) { return std::string(dtype_name(t)); }

ErrorSample err(std::string name, std::function<void()> call, std::string expect) {
  return {std::move(name), std::move(call), std::move(expect)};
}
OpSample sample(std::string name, TensorList inputs, OpFn fn, OpFn ref) {
  OpSample s;
  s.name = std::move(name);
  s.inputs = std::move(inputs);
  s.fn = std::move(fn);
  s.reference = std::move(ref);
  return s;
}

// out[idx] = in[map(idx)] (map returns false for the fill value).
Ref ref_gather(const Ref& in, const Shape& out_shape, const std::function<bool(const Shape&, Shape&)>& map,
               double fill = 0) {
  Ref out(out_shape, fill);
  for (int64_t f = 0; f < out.numel(); ++f) {
    Shape o = unravel(f, out_shape), i;
    if (map(o, i)) out.v[f] = in.at(i);
  }
  return out;
}

// ---- repeat ----
Ref ref_repeat(const Ref& x, const Shape& reps) {
  int64_t lead = static_cast<int64_t>(reps.size()) - x.dim();
  Shape out;
  for (size_t d = 0; d < reps.size(); ++d)
    out.push_back(reps[d] * (static_cast<int64_t>(d) < lead ? 1 : x.shape[d - lead]));
  return ref_gather(x, out, [&](const Shape& o, Shape& i) {
    for (int64_t d = lead; d < static_cast<int64_t>(o.size()); ++d) i.push_back(o[d] % x.shape[d - lead]);
    return true;
  });
}
std::vector<OpSample> samples_repeat() {
  std::vector<OpSample> out;
  struct Case {
    Shape s;
    Shape r;
  };
  for (const Case& c : {Case{{2, 3}, {2, 1}}, Case{{3}, {2, 2, 2}}, Case{{}, {3}}, Case{{2, 0}, {2, 3}},
                        Case{{2, 3}, {1, 0}}, Case{{1, 2}, {3, 1, 2}}})
    for (bool nc : {false, true})
      out.push_back(sample(
          shape_str(c.s) + " x " + shape_str(c.r) + (nc ? " noncontig" : ""), {make_input(c.s, kFloat32, 1, -2, 2, nc)},
          [r = c.r](const TensorList& in) { return TensorList{in[0].repeat(r)}; },
          [r = c.r](const TensorList& in) { return TensorList{ref_repeat(Ref::of(in[0]), r).to(in[0].dtype())}; }));
  for (DType t : kAll)
    out.push_back(sample(
        dname(t), {make_input({2, 3}, t, 2)},
        [](const TensorList& in) {
          return TensorList{repeat(in[0], {2, 1, 2})};
        },
        [](const TensorList& in) {
          return TensorList{ref_repeat(Ref::of(in[0]), {2, 1, 2}).to(in[0].dtype())};
        }));
  return out;
}
std::vector<ErrorSample> errors_repeat() {
  return {err(
              "fewer repeats than dims",
              [] {
                repeat(zeros({2, 3}), {2});
              },
              "can not be smaller"),
          err(
              "negative repeat", [] { repeat(zeros({2}), {-1}); }, "negative")};
}

// ---- cat / stack ----
Ref ref_cat(const std::vector<Ref>& xs, int64_t dim) {
  std::vector<const Ref*> kept;
  for (const Ref& r : xs)
    if (!(r.dim() == 1 && r.shape[0] == 0)) kept.push_back(&r);
  if (kept.empty()) return Ref({0});
  int64_t nd = kept[0]->dim();
  if (dim < 0) dim += nd;
  Shape out = kept[0]->shape;
  out[dim] = 0;
  for (const Ref* r : kept) out[dim] += r->shape[dim];
  Ref res(out);
  for (int64_t f = 0; f < res.numel(); ++f) {
    Shape o = unravel(f, out);
    int64_t k = o[dim];
    for (const Ref* r : kept) {
      if (k < r->shape[dim]) {
        Shape i = o;
        i[dim] = k;
        res.v[f] = r->at(i);
        break;
      }
      k -= r->shape[dim];
    }
  }
  return res;
}
std::vector<Ref> refs(const TensorList& in) {
  std::vector<Ref> r;
  for (const Tensor& t : in) r.push_back(Ref::of(t));
  return r;
}
std::vector<OpSample> samples_cat() {
  std::vector<OpSample> out;
  for (int64_t dim : {0, 1, -1})
    for (bool nc : {false, true})
      out.push_back(sample(
          "dim " + std::to_string(dim) + (nc ? " noncontig" : ""),
          {make_input({2, 3}, kFloat32, 1, -2, 2, nc),
           make_input(dim == 0 ? Shape{1, 3} : Shape{2, 4}, kFloat32, 2, -2, 2, nc),
           make_input(dim == 0 ? Shape{3, 3} : Shape{2, 1}, kFloat32, 3)},
          [dim](const TensorList& in) { return TensorList{cat(in, dim)}; },
          [dim](const TensorList& in) { return TensorList{ref_cat(refs(in), dim).to(kFloat32)}; }));
  out.push_back(sample(
      "type promotion int32 + float64 + bool",
      {make_input({2}, kInt32, 4), make_input({3}, kFloat64, 5), make_input({1}, kBool, 6)},
      [](const TensorList& in) { return TensorList{cat(in)}; },
      [](const TensorList& in) { return TensorList{ref_cat(refs(in), 0).to(kFloat64)}; }));
  out.push_back(sample(
      "legacy 1-D empty skipped", {make_input({2, 2}, kFloat32, 7), zeros({0}), make_input({2, 1}, kFloat32, 8)},
      [](const TensorList& in) { return TensorList{cat(in, 1)}; },
      [](const TensorList& in) { return TensorList{ref_cat(refs(in), 1).to(kFloat32)}; }));
  out.back().grad_inputs = {0, 2};
  out.push_back(sample(
      "empty inputs along dim", {make_input({0, 3}, kFloat32, 9), make_input({2, 3}, kFloat32, 10)},
      [](const TensorList& in) { return TensorList{cat(in)}; },
      [](const TensorList& in) { return TensorList{ref_cat(refs(in), 0).to(kFloat32)}; }));
  out.push_back(sample(
      "single tensor 3-D", {make_input({2, 1, 3}, kFloat32, 11)},
      [](const TensorList& in) { return TensorList{cat(in, 2)}; },
      [](const TensorList& in) { return TensorList{ref_cat(refs(in), 2).to(kFloat32)}; }));
  for (DType t : kAll)
    out.push_back(sample(
        dname(t), {make_input({2, 2}, t, 12), make_input({2, 3}, t, 13)},
        [](const TensorList& in) { return TensorList{cat(in, 1)}; },
        [t](const TensorList& in) { return TensorList{ref_cat(refs(in), 1).to(t)}; }));
  return out;
}
std::vector<ErrorSample> errors_cat() {
  return {err(
              "empty list", [] { cat({}); }, "non-empty list"),
          err(
              "shape mismatch",
              [] {
                cat({zeros({2, 3}), zeros({3, 2})}, 0);
              },
              "must match except in dimension 0"),
          err(
              "ndim mismatch",
              [] {
                cat({zeros({2, 3}), zeros({2, 3, 1})});
              },
              "same number of dimensions"),
          err(
              "0-d",
              [] {
                cat({zeros({}), zeros({})});
              },
              "zero-dimensional"),
          err(
              "dim out of range",
              [] {
                cat({zeros({2, 3}), zeros({2, 3})}, 2);
              },
              "out of range")};
}

Ref ref_stack(const std::vector<Ref>& xs, int64_t dim) {
  int64_t nd = xs[0].dim() + 1;
  if (dim < 0) dim += nd;
  Shape out = xs[0].shape;
  out.insert(out.begin() + dim, static_cast<int64_t>(xs.size()));
  Ref r(out);
  for (int64_t f = 0; f < r.numel(); ++f) {
    Shape o = unravel(f, out);
    int64_t k = o[dim];
    o.erase(o.begin() + dim);
    r.v[f] = xs[k].at(o);
  }
  return r;
}
std::vector<OpSample> samples_stack() {
  std::vector<OpSample> out;
  for (int64_t dim : {0, 1, 2, -1})
    for (bool nc : {false, true})
      out.push_back(sample(
          "dim " + std::to_string(dim) + (nc ? " noncontig" : ""),
          {make_input({2, 3}, kFloat32, 1, -2, 2, nc), make_input({2, 3}, kFloat32, 2),
           make_input({2, 3}, kFloat32, 3, -2, 2, nc)},
          [dim](const TensorList& in) { return TensorList{stack(in, dim)}; },
          [dim](const TensorList& in) { return TensorList{ref_stack(refs(in), dim).to(kFloat32)}; }));
  out.push_back(sample(
      "0-d inputs", {make_input({}, kFloat32, 4), make_input({}, kFloat32, 5)},
      [](const TensorList& in) { return TensorList{stack(in)}; },
      [](const TensorList& in) { return TensorList{ref_stack(refs(in), 0).to(kFloat32)}; }));
  out.push_back(sample(
      "empty", {zeros({0, 2}), zeros({0, 2})}, [](const TensorList& in) { return TensorList{stack(in, 1)}; },
      [](const TensorList&) {
        return TensorList{Ref({0, 2, 2}).to(kFloat32)};
      }));
  out.push_back(sample(
      "promotion int64 + float32", {make_input({3}, kInt64, 6), make_input({3}, kFloat32, 7)},
      [](const TensorList& in) { return TensorList{stack(in)}; },
      [](const TensorList& in) { return TensorList{ref_stack(refs(in), 0).to(kFloat32)}; }));
  for (DType t : kAll)
    out.push_back(sample(
        dname(t), {make_input({2, 2}, t, 8), make_input({2, 2}, t, 9)},
        [](const TensorList& in) { return TensorList{stack(in, 1)}; },
        [t](const TensorList& in) { return TensorList{ref_stack(refs(in), 1).to(t)}; }));
  return out;
}
std::vector<ErrorSample> errors_stack() {
  return {err(
              "empty list", [] { stack({}); }, "non-empty"),
          err(
              "size mismatch",
              [] {
                stack({zeros({2, 3}), zeros({3, 2})});
              },
              "equal size"),
          err(
              "dim out of range",
              [] {
                stack({zeros({2}), zeros({2})}, 3);
              },
              "out of range")};
}

// ---- flip / roll ----
std::vector<OpSample> samples_flip() {
  std::vector<OpSample> out;
  struct Case {
    Shape s;
    std::vector<int64_t> dims;
  };
  for (const Case& c : {Case{{2, 3}, {0}}, Case{{2, 3}, {1}}, Case{{2, 3, 4}, {0, -1}}, Case{{3}, {0}}, Case{{}, {}},
                        Case{{0, 3}, {1}}, Case{{2, 3}, {}}})
    for (bool nc : {false, true})
      out.push_back(sample(
          shape_str(c.s) + " dims " + shape_str(c.dims) + (nc ? " noncontig" : ""),
          {make_input(c.s, kFloat32, 1, -2, 2, nc)},
          [d = c.dims](const TensorList& in) { return TensorList{in[0].flip(d)}; },
          [d = c.dims](const TensorList& in) {
            Ref x = Ref::of(in[0]);
            std::vector<bool> f(x.dim(), false);
            for (int64_t k : d) f[k < 0 ? k + x.dim() : k] = true;
            return TensorList{ref_gather(x, x.shape, [&](const Shape& o, Shape& i) {
                                i = o;
                                for (int64_t k = 0; k < x.dim(); ++k)
                                  if (f[k]) i[k] = x.shape[k] - 1 - o[k];
                                return true;
                              }).to(in[0].dtype())};
          }));
  for (DType t : kAll)
    out.push_back(sample(
        dname(t), {make_input({3, 2}, t, 2)},
        [](const TensorList& in) {
          return TensorList{flip(in[0], {0, 1})};
        },
        [](const TensorList& in) {
          Ref x = Ref::of(in[0]);
          return TensorList{ref_gather(x, x.shape, [&](const Shape& o, Shape& i) {
                              i = {2 - o[0], 1 - o[1]};
                              return true;
                            }).to(in[0].dtype())};
        }));
  return out;
}
std::vector<ErrorSample> errors_flip() {
  return {err(
              "dim out of range",
              [] {
                flip(zeros({2, 3}), {2});
              },
              "out of range"),
          err(
              "repeated dim",
              [] {
                flip(zeros({2, 3}), {0, -2});
              },
              "multiple times")};
}

int64_t pmod(int64_t a, int64_t n) { return ((a % n) + n) % n; }
std::vector<OpSample> samples_roll() {
  std::vector<OpSample> out;
  struct Case {
    Shape s;
    std::vector<int64_t> shifts, dims;
  };
  for (const Case& c : {Case{{2, 3}, {1}, {1}}, Case{{2, 3}, {-4}, {1}}, Case{{3, 4}, {1, 2}, {0, -1}},
                        Case{{2, 3}, {2}, {}}, Case{{5}, {7}, {0}}, Case{{0, 3}, {1}, {1}}, Case{{}, {1}, {}}})
    for (bool nc : {false, true})
      out.push_back(sample(
          shape_str(c.s) + " shifts " + shape_str(c.shifts) + " dims " + shape_str(c.dims) + (nc ? " noncontig" : ""),
          {make_input(c.s, kFloat32, 1, -2, 2, nc)},
          [c](const TensorList& in) { return TensorList{in[0].roll(c.shifts, c.dims)}; },
          [c](const TensorList& in) {
            Ref x = Ref::of(in[0]);
            if (c.dims.empty()) {
              Ref r = x;
              int64_t n = x.numel();
              for (int64_t f = 0; f < n; ++f) r.v[f] = x.v[pmod(f - c.shifts[0], n)];
              return TensorList{r.to(in[0].dtype())};
            }
            return TensorList{ref_gather(x, x.shape, [&](const Shape& o, Shape& i) {
                                i = o;
                                for (size_t k = 0; k < c.dims.size(); ++k) {
                                  int64_t d = c.dims[k] < 0 ? c.dims[k] + x.dim() : c.dims[k];
                                  i[d] = pmod(o[d] - c.shifts[k], x.shape[d]);
                                }
                                return true;
                              }).to(in[0].dtype())};
          }));
  for (DType t : kAll)
    out.push_back(sample(
        dname(t), {make_input({7}, t, 2)}, [](const TensorList& in) { return TensorList{roll(in[0], {3})}; },
        [](const TensorList& in) {
          Ref x = Ref::of(in[0]), r = x;
          for (int64_t f = 0; f < 7; ++f) r.v[f] = x.v[pmod(f - 3, 7)];
          return TensorList{r.to(in[0].dtype())};
        }));
  return out;
}
std::vector<ErrorSample> errors_roll() {
  return {err(
              "shifts/dims mismatch",
              [] {
                roll(zeros({2, 3}), {1, 2}, {0});
              },
              "must align"),
          err(
              "dim out of range",
              [] {
                roll(zeros({2, 3}), {1}, {3});
              },
              "out of range")};
}

// ---- tril / triu ----
template <bool Lower>
std::vector<OpSample> samples_tri() {
  std::vector<OpSample> out;
  auto ref = [](int64_t k) {
    return [k](const TensorList& in) {
      Ref x = Ref::of(in[0]);
      Ref r = x;
      for (int64_t f = 0; f < r.numel(); ++f) {
        Shape o = unravel(f, r.shape);
        int64_t i = o[o.size() - 2], j = o.back();
        bool keep = Lower ? j - i <= k : j - i >= k;
        if (!keep) r.v[f] = 0;
      }
      return TensorList{r.to(in[0].dtype())};
    };
  };
  for (Shape s : {Shape{4, 4}, Shape{3, 5}, Shape{5, 3}, Shape{2, 3, 4}, Shape{0, 3}})
    for (int64_t k : {0, 1, -1, 4, -5})
      for (bool nc : {false, true}) {
        auto fn = [k](const TensorList& in) { return TensorList{Lower ? in[0].tril(k) : in[0].triu(k)}; };
        out.push_back(sample(shape_str(s) + " k=" + std::to_string(k) + (nc ? " noncontig" : ""),
                             {make_input(s, kFloat32, 1, -2, 2, nc)}, fn, ref(k)));
      }
  for (int64_t k : {0, 1, -2})
    out.push_back(sample(
        "batched k=" + std::to_string(k), {make_input({2, 3, 4}, kFloat32, 3)},
        [k](const TensorList& in) { return TensorList{Lower ? tril(in[0], k) : triu(in[0], k)}; }, ref(k)));
  for (DType t : kAll)
    out.push_back(sample(
        dname(t), {make_input({3, 3}, t, 2)},
        [](const TensorList& in) { return TensorList{Lower ? tril(in[0]) : triu(in[0])}; }, ref(0)));
  return out;
}
template <bool Lower>
std::vector<ErrorSample> errors_tri() {
  return {err(
      "1-D input", [] { Lower ? tril(zeros({3})) : triu(zeros({3})); }, "at least 2 dimensions")};
}

// ---- pad ----
Ref ref_pad(const Ref& x, const std::vector<int64_t>& p, const std::string& mode, double value) {
  Shape out = x.shape;
  int64_t nd = x.dim();
  for (size_t k = 0; k < p.size() / 2; ++k) out[nd - 1 - k] += p[2 * k] + p[2 * k + 1];
  return ref_gather(
      x, out,
      [&](const Shape& o, Shape& i) {
        i = o;
        for (size_t k = 0; k < p.size() / 2; ++k) {
          int64_t d = nd - 1 - static_cast<int64_t>(k), n = x.shape[d];
          int64_t c = o[d] - p[2 * k];
          if (mode == "reflect")
            c = c < 0 ? -c : (c >= n ? 2 * (n - 1) - c : c);
          else if (mode == "replicate")
            c = std::clamp<int64_t>(c, 0, n - 1);
          if (c < 0 || c >= n) return false;
          i[d] = c;
        }
        return true;
      },
      value);
}
std::vector<OpSample> samples_pad() {
  std::vector<OpSample> out;
  struct Case {
    Shape s;
    std::vector<int64_t> p;
    std::string mode;
    double value;
  };
  std::vector<Case> cases = {
      {{2, 3}, {1, 2}, "constant", 0.0},
      {{2, 3}, {1, 1, 2, 0}, "constant", 1.5},
      {{2, 3, 4}, {-1, 1, 0, 2}, "constant", 0.0},
      {{3}, {-1, -1}, "constant", 0.0},
      {{2, 2}, {0, 0, 0, 0}, "constant", 0.0},
      {{0, 2}, {1, 1}, "constant", 2.0},
      {{2, 4}, {2, 3}, "reflect", 0.0},
      {{1, 3, 4}, {1, 2, 2, 1}, "reflect", 0.0},
      {{2, 3, 3, 3}, {1, 1, 2, 0, 1, 2}, "reflect", 0.0},
      {{2, 3}, {2, 1}, "replicate", 0.0},
      {{2, 3, 4}, {3, 0, 1, 2}, "replicate", 0.0},
      {{1, 2, 2, 3}, {1, 2, 0, 1, 2, 1}, "replicate", 0.0},
  };
  for (const Case& c : cases)
    for (bool nc : {false, true})
      out.push_back(sample(
          c.mode + " " + shape_str(c.s) + " pad " + shape_str(c.p) + (nc ? " noncontig" : ""),
          {make_input(c.s, kFloat32, 1, -2, 2, nc)},
          [c](const TensorList& in) {
            return TensorList{
                pad(in[0], c.p, c.mode, c.mode == "constant" ? std::optional<double>(c.value) : std::nullopt)};
          },
          [c](const TensorList& in) {
            return TensorList{ref_pad(Ref::of(in[0]), c.p, c.mode, c.value).to(in[0].dtype())};
          }));
  for (DType t : kAll)
    for (std::string mode : {"constant", "reflect", "replicate"})
      out.push_back(sample(
          dname(t) + " " + mode, {make_input({1, 2, 3}, t, 2)},
          [mode](const TensorList& in) {
            return TensorList{pad(in[0], {2, 1, 1, 0}, mode)};
          },
          [mode](const TensorList& in) {
            return TensorList{ref_pad(Ref::of(in[0]), {2, 1, 1, 0}, mode, 0).to(in[0].dtype())};
          }));
  return out;
}
std::vector<ErrorSample> errors_pad() {
  return {err(
              "odd length",
              [] {
                pad(zeros({2, 3}), {1});
              },
              "divisible by 2"),
          err(
              "too many dims",
              [] {
                pad(zeros({2}), {1, 1, 1, 1});
              },
              "too large"),
          err(
              "reflect pad >= size",
              [] {
                pad(zeros({2, 3}), {3, 0}, "reflect");
              },
              "less than the corresponding input dimension"),
          err(
              "bad mode",
              [] {
                pad(zeros({2, 3}), {1, 1}, "circular-ish");
              },
              "unsupported mode"),
          err(
              "reflect of 2 dims on a 2-D input",
              [] {
                pad(zeros({3, 4}), {1, 1, 1, 1}, "reflect");
              },
              "pad: reflect padding of 2 dimension(s) needs a 3-D (unbatched) or 4-D input"),
          err(
              "replicate of 4 dims",
              [] {
                pad(zeros({1, 1, 2, 2, 2, 2}), {1, 1, 1, 1, 1, 1, 1, 1}, "replicate");
              },
              "1 to 3 padded dimensions"),
          err(
              "value with reflect",
              [] {
                pad(zeros({2, 3}), {1, 1}, "reflect", 1.0);
              },
              "doesn't take in value"),
          err(
              "negative size",
              [] {
                pad(zeros({2, 3}), {-2, -2});
              },
              "negative")};
}

}  // namespace

// ---- copy_ (Note [Writes are ops]) ----
// dst.copy_(src) on a fresh dst (outside the sample's inputs, which stay
// unchanged); src broadcast to dst's shape and converted to its dtype, into
// contiguous and strided destinations.
std::vector<OpSample> samples_copy_() {
  std::vector<OpSample> out;
  struct Case {
    Shape dst;
    Shape src;
    DType dt;
    DType st;
    bool noncontig;
  };
  for (const Case& c : {Case{{2, 3}, {2, 3}, kFloat32, kFloat32, false}, Case{{2, 3}, {3}, kFloat64, kFloat32, false},
                        Case{{3, 4}, {1, 4}, kInt32, kFloat64, true}, Case{{}, {}, kFloat32, kInt64, false},
                        Case{{2, 0}, {0}, kFloat32, kFloat32, false}, Case{{4, 2}, {4, 1}, kBool, kFloat32, true}}) {
    out.push_back(sample(
        shape_str(c.src) + " " + dname(c.st) + " into " + shape_str(c.dst) + " " + dname(c.dt) +
            (c.noncontig ? " strided" : ""),
        {make_input(c.src, c.st, 11)},
        [c](const TensorList& in) {
          Tensor dst = c.noncontig ? kiln::zeros({c.dst[1], c.dst[0]}, c.dt).t() : kiln::zeros(c.dst, c.dt);
          NoGradGuard no_grad;
          dst.copy_(in[0]);
          return TensorList{dst};
        },
        [c](const TensorList& in) {
          Ref src = Ref::of(in[0]);
          Ref r(c.dst);
          for (int64_t f = 0; f < r.numel(); ++f) {
            double v = src.v[broadcast_index(unravel(f, c.dst), src.shape)];
            r.v[f] = c.dt == kBool ? (v != 0) : is_floating_point(c.dt) ? v : std::trunc(v);
          }
          return TensorList{r.to(c.dt)};
        }));
    out.back().check_grad = false;
  }
  return out;
}
std::vector<ErrorSample> errors_copy_() {
  return {err(
              "src does not broadcast",
              [] {
                kiln::zeros({2, 3}).copy_(kiln::zeros({4}));
              },
              "can't be broadcast to"),
          err(
              "src has more dims",
              [] {
                kiln::zeros({3}).copy_(kiln::zeros({2, 3}));
              },
              "can't be broadcast to"),
          err(
              "out of a meta tensor",
              [] { kiln::zeros({2}).copy_(kiln::empty({2}, TensorOptions(kFloat32).device(Device("meta")))); },
              "copy_: cannot copy out of a meta tensor")};
}

KILN_OP_SAMPLES(copy_, samples_copy_, errors_copy_);
KILN_OP_SAMPLES(repeat, samples_repeat, errors_repeat);
KILN_OP_SAMPLES(cat, samples_cat, errors_cat);
KILN_OP_SAMPLES(stack, samples_stack, errors_stack);
KILN_OP_SAMPLES(flip, samples_flip, errors_flip);
KILN_OP_SAMPLES(roll, samples_roll, errors_roll);
KILN_OP_SAMPLES(tril, samples_tri<true>, errors_tri<true>);
KILN_OP_SAMPLES(triu, samples_tri<false>, errors_tri<false>);
KILN_OP_SAMPLES(pad, samples_pad, errors_pad);

// ---- fliplr, flipud, hstack, vstack, column_stack, dstack ----
namespace {
Ref ref_flip_dim(const Ref& x, int64_t dim) {
  Ref out(x.shape);
  for (int64_t f = 0; f < out.numel(); ++f) {
    Shape i = unravel(f, x.shape);
    i[dim] = x.shape[dim] - 1 - i[dim];
    out.v[f] = x.at(i);
  }
  return out;
}
std::vector<OpSample> samples_flip_lr_ud(bool lr) {
  std::vector<OpSample> out;
  auto fn = [lr](const TensorList& in) { return TensorList{lr ? fliplr(in[0]) : in[0].flipud()}; };
  auto ref = [lr](DType t) {
    return [lr, t](const TensorList& in) { return TensorList{ref_flip_dim(Ref::of(in[0]), lr ? 1 : 0).to(t)}; };
  };
  out.push_back(sample("float32 [3,4]", {make_input({3, 4}, kFloat32, 1)}, fn, ref(kFloat32)));
  out.push_back(sample("noncontig float64 [4,5]", {make_input({4, 5}, kFloat64, 2, -2, 2, true)}, fn, ref(kFloat64)));
  out.push_back(sample("int64 [2,3,4]", {make_input({2, 3, 4}, kInt64, 3, -9, 9)}, fn, ref(kInt64)));
  out.push_back(sample("bool [2,3]", {make_input({2, 3}, kBool, 4)}, fn, ref(kBool)));
  out.push_back(sample("empty [0,3]", {make_input({0, 3}, kFloat32, 5)}, fn, ref(kFloat32)));
  if (!lr) out.push_back(sample("1-D float16 [5]", {make_input({5}, kFloat16, 6)}, fn, ref(kFloat16)));
  return out;
}
std::vector<ErrorSample> errors_flip_lr_ud(bool lr) {
  if (lr) return {err("1-D", [] { fliplr(zeros({3})); }, "fliplr: Input must be >= 2-d, got shape [3]")};
  return {err("0-d", [] { flipud(zeros({})); }, "flipud: Input must be >= 1-d, got shape []")};
}
std::vector<OpSample> samples_fliplr() { return samples_flip_lr_ud(true); }
std::vector<OpSample> samples_flipud() { return samples_flip_lr_ud(false); }
std::vector<ErrorSample> errors_fliplr() { return errors_flip_lr_ud(true); }
std::vector<ErrorSample> errors_flipud() { return errors_flip_lr_ud(false); }

// Each input reshaped as the stacking op does (row-major data unchanged), then cat.
enum class Stack { H, V, Column, D };
Ref ref_stacked(Ref r, Stack k) {
  Shape& s = r.shape;
  if (k == Stack::Column) {
    if (s.size() <= 1) s = {r.numel(), 1};
  } else if (k == Stack::D && s.size() == 1) {
    s = {1, s[0], 1};
  } else if (k == Stack::D && s.size() == 2) {
    s.push_back(1);
  } else {
    const size_t n = k == Stack::H ? 1 : k == Stack::V ? 2 : 3;
    while (s.size() < n) s.insert(s.begin(), 1);
  }
  return r;
}
Ref ref_stack_like(const TensorList& in, Stack k) {
  std::vector<Ref> rs;
  bool all_1d = true;
  for (const Tensor& t : in) {
    rs.push_back(ref_stacked(Ref::of(t), k));
    all_1d = all_1d && t.dim() <= 1;
  }
  const int64_t dim = k == Stack::V ? 0 : k == Stack::D ? 2 : k == Stack::Column ? 1 : all_1d ? 0 : 1;
  return ref_cat(rs, dim);
}
Tensor call_stack(Stack k, const TensorList& in) {
  switch (k) {
    case Stack::H: return hstack(in);
    case Stack::V: return vstack(in);
    case Stack::Column: return column_stack(in);
    default: return dstack(in);
  }
}
template <Stack K>
std::vector<OpSample> samples_stack_like() {
  std::vector<OpSample> out;
  auto fn = [](const TensorList& in) { return TensorList{call_stack(K, in)}; };
  auto ref = [](DType t) { return [t](const TensorList& in) { return TensorList{ref_stack_like(in, K).to(t)}; }; };
  auto add = [&](std::string name, TensorList in, DType t) { out.push_back(sample(std::move(name), std::move(in), fn, ref(t))); };
  add("1-D pair", {make_input({3}, kFloat32, 1), make_input(K == Stack::H ? Shape{2} : Shape{3}, kFloat32, 2)}, kFloat32);
  add("2-D [2,3],[2,3]", {make_input({2, 3}, kFloat32, 3), make_input({2, 3}, kFloat64, 4)}, kFloat64);
  add("noncontig 2-D [3,4],[3,4]", {make_input({3, 4}, kFloat32, 5, -2, 2, true), make_input({3, 4}, kFloat32, 6)}, kFloat32);
  add("0-d, 0-d", {make_input({}, kFloat32, 7), make_input({}, kFloat32, 8)}, kFloat32);
  add("int32 and int64 promote", {make_input({2, 2}, kInt32, 9, -9, 9), make_input({2, 2}, kInt64, 10, -9, 9)}, kInt64);
  add("one tensor [2,3,4]", {make_input({2, 3, 4}, kFloat64, 11)}, kFloat64);
  add("empty [0],[0]", {make_input({0}, kFloat32, 12), make_input({0}, kFloat32, 13)}, kFloat32);
  if (K == Stack::H) add("2-D widths differ [2,3],[2,1]", {make_input({2, 3}, kFloat32, 14), make_input({2, 1}, kFloat32, 15)}, kFloat32);
  if (K == Stack::V) {
    add("2-D and 1-D [2,3],[3]", {make_input({2, 3}, kFloat32, 16), make_input({3}, kFloat32, 17)}, kFloat32);
    out.push_back(sample("row_stack", {make_input({2, 3}, kFloat32, 18), make_input({3}, kFloat32, 19)},
                         [](const TensorList& in) { return TensorList{row_stack(in)}; }, ref(kFloat32)));
  }
  if (K == Stack::Column) add("1-D and 2-D [3],[3,2]", {make_input({3}, kFloat32, 20), make_input({3, 2}, kFloat32, 21)}, kFloat32);
  if (K == Stack::D) add("3-D depths differ [2,3,4],[2,3,1]", {make_input({2, 3, 4}, kFloat32, 22), make_input({2, 3, 1}, kFloat32, 23)}, kFloat32);
  return out;
}
template <Stack K>
std::vector<ErrorSample> errors_stack_like() {
  const std::string name = K == Stack::H ? "hstack" : K == Stack::V ? "vstack" : K == Stack::Column ? "column_stack" : "dstack";
  std::vector<ErrorSample> e{err("empty list", [] { call_stack(K, {}); }, name + ": expects a non-empty TensorList")};
  e.push_back(err("sizes differ", [] { call_stack(K, {zeros({2, 3}), zeros({4, 5})}); },
                  name + ": sizes of tensors must match except in dimension"));
  return e;
}

KILN_OP_SAMPLES(fliplr, samples_fliplr, errors_fliplr);
KILN_OP_SAMPLES(flipud, samples_flipud, errors_flipud);
KILN_OP_SAMPLES(hstack, samples_stack_like<Stack::H>, errors_stack_like<Stack::H>);
KILN_OP_SAMPLES(vstack, samples_stack_like<Stack::V>, errors_stack_like<Stack::V>);
KILN_OP_SAMPLES(column_stack, samples_stack_like<Stack::Column>, errors_stack_like<Stack::Column>);
KILN_OP_SAMPLES(dstack, samples_stack_like<Stack::D>, errors_stack_like<Stack::D>);
}  // namespace

}  // namespace kiln::test
