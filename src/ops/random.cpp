// Random ops: public functions, meta functions and decompositions. Every op
// takes its Philox (seed, offset) as attrs; the public function reserves the
// blocks it uses from a Generator (Note [Philox stream] in core/philox.h), so
// a kernel's element i depends only on (seed, offset, i).
#include <cmath>
#include <limits>

#include "core/philox.h"
#include "dispatch/dispatch.h"
#include "kiln/autograd.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/pointwise.h"
#include "ops/meta_util.h"

namespace kiln {

namespace {

// Philox blocks a random op producing n values of dtype t consumes (Note [Philox stream]).
uint64_t random_blocks(OpId op, DType t, int64_t n, int64_t range) {
  uint64_t un = static_cast<uint64_t>(std::max<int64_t>(n, 0));
  switch (op) {
    case OpId::randint:
      // 32-bit draws when the range fits, else 64-bit ones (as the kernel).
      return static_cast<uint64_t>(range) <= (uint64_t(1) << 32) ? philox_blocks<uint32_t>(un)
                                                                 : philox_blocks<uint64_t>(un);
    case OpId::randperm: return philox_blocks<uint64_t>(un);
    default: return t == DType::Float64 ? philox_blocks<double>(un) : philox_blocks<float>(un);
  }
}

Shape checked_size(IntArrayRef size, const char* op) {
  for (int64_t v : size)
    KILN_CHECK(v >= 0, op, ": trying to create tensor with negative dimension ", v, ": ", shape_str(size));
  return size.vec();
}

void check_float_dtype(DType t, const char* op) {
  KILN_CHECK(is_floating_point(t), op, ": expected a floating point dtype, got ", t);
}

// uniform/normal: (size, a, b, dtype, device, seed, offset)
std::vector<TensorMeta> meta_uniform(const OpCall& c) {
  double from = c.attrs.f(1), to = c.attrs.f(2);
  check_float_dtype(c.attrs.dtype(3), "uniform");
  KILN_CHECK(from <= to, "uniform: expects to return a [from, to) range, but found from=", from, " > to=", to);
  KILN_CHECK(std::isfinite(from) && std::isfinite(to), "uniform: from and to must be finite, got from=", from,
             " to=", to);
  return one_output(checked_size(c.attrs.ints(0), "uniform"), c.attrs.dtype(3), c.attrs.device(4));
}
std::vector<TensorMeta> meta_normal(const OpCall& c) {
  double std = c.attrs.f(2);
  check_float_dtype(c.attrs.dtype(3), "normal");
  KILN_CHECK(std >= 0.0, "normal: expects std >= 0.0, but found std ", std);
  return one_output(checked_size(c.attrs.ints(0), "normal"), c.attrs.dtype(3), c.attrs.device(4));
}
KILN_REGISTER_META(uniform, meta_uniform);
KILN_REGISTER_META(normal, meta_normal);

// rand/randn: (size, dtype, device, seed, offset)
std::vector<TensorMeta> meta_rand(const OpCall& c) {
  check_float_dtype(c.attrs.dtype(1), c.name());
  return one_output(checked_size(c.attrs.ints(0), c.name()), c.attrs.dtype(1), c.attrs.device(2));
}
KILN_REGISTER_META(rand, meta_rand);
KILN_REGISTER_META(randn, meta_rand);
std::vector<Tensor> decomp_rand(const OpCall& c) {
  const Attrs& a = c.attrs;
  OpId prim = c.op == OpId::rand ? OpId::uniform : OpId::normal;
  return {call_op1(prim, {}, {a[0], 0.0, 1.0, a[1], a[2], a[3], a[4]})};
}
KILN_REGISTER_DECOMP(rand, decomp_rand);
KILN_REGISTER_DECOMP(randn, decomp_rand);

// rand_like/randn_like: (x; dtype, device, seed, offset)
std::vector<TensorMeta> meta_rand_like(const OpCall& c) {
  check_float_dtype(c.attrs.dtype(0), c.name());
  return one_output(c.in(0).sizes().vec(), c.attrs.dtype(0), c.attrs.device(1));
}
KILN_REGISTER_META(rand_like, meta_rand_like);
KILN_REGISTER_META(randn_like, meta_rand_like);
std::vector<Tensor> decomp_rand_like(const OpCall& c) {
  const Attrs& a = c.attrs;
  OpId prim = c.op == OpId::rand_like ? OpId::uniform : OpId::normal;
  return {call_op1(prim, {}, {c.in(0).sizes().vec(), 0.0, 1.0, a[0], a[1], a[2], a[3]})};
}
KILN_REGISTER_DECOMP(rand_like, decomp_rand_like);
KILN_REGISTER_DECOMP(randn_like, decomp_rand_like);

// randint: (low, high, size, dtype, device, seed, offset)
std::vector<TensorMeta> meta_randint(const OpCall& c) {
  int64_t low = c.attrs.i(0), high = c.attrs.i(1);
  DType t = c.attrs.dtype(3);
  KILN_CHECK(low < high, "randint: random_ expects 'from' to be less than 'to', but got from=", low, " >= to=", high);
  if (t == DType::Bool) {
    KILN_CHECK(low >= 0 && high <= 2, "randint: for dtype bool, expected a range within [0, 2), got [", low, ", ",
               high, ")");
  } else if (is_integral(t)) {
    int64_t lo = 0, hi = 0;
    switch (t) {
      case DType::UInt8: lo = 0; hi = 255; break;
      case DType::Int8: lo = -128; hi = 127; break;
      case DType::Int16: lo = -32768; hi = 32767; break;
      case DType::Int32: lo = std::numeric_limits<int32_t>::min(); hi = std::numeric_limits<int32_t>::max(); break;
      default: lo = std::numeric_limits<int64_t>::min(); hi = std::numeric_limits<int64_t>::max(); break;
    }
    KILN_CHECK(low >= lo && high - 1 <= hi, "randint: range [", low, ", ", high, ") does not fit dtype ", t);
  }
  return one_output(checked_size(c.attrs.ints(2), "randint"), t, c.attrs.device(4));
}
KILN_REGISTER_META(randint, meta_randint);

// randperm: (n, dtype, device, seed, offset)
std::vector<TensorMeta> meta_randperm(const OpCall& c) {
  int64_t n = c.attrs.i(0);
  DType t = c.attrs.dtype(1);
  KILN_CHECK(n >= 0, "randperm: n must be non-negative, got ", n);
  KILN_CHECK(t != DType::Bool, "randperm: not implemented for dtype bool");
  if (is_floating_point(t)) {
    int digits = t == DType::Float64 ? 53 : t == DType::Float32 ? 24 : t == DType::Float16 ? 11 : 8;
    KILN_CHECK(n <= (int64_t(1) << digits) + 1, "randperm: n is too large for result dtype ", t);
  } else {
    int64_t max = t == DType::UInt8 ? 255 : t == DType::Int8 ? 127 : t == DType::Int16 ? 32767
                  : t == DType::Int32 ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int64_t>::max();
    KILN_CHECK(n == 0 || n - 1 <= max, "randperm: n is too large for result dtype ", t);
  }
  return one_output({n}, t, c.attrs.device(2));
}
KILN_REGISTER_META(randperm, meta_randperm);

// bernoulli: (p; seed, offset); the output has p's dtype.
std::vector<TensorMeta> meta_bernoulli(const OpCall& c) {
  const Tensor& p = c.in(0);
  KILN_CHECK(is_floating_point(p.dtype()), "bernoulli: expected a floating point probability tensor, got ",
             p.dtype());
  return one_output(p.sizes().vec(), p.dtype(), p.device());
}
KILN_REGISTER_META(bernoulli, meta_bernoulli);
// bernoulli(p) = uniform < p (the kernel uses the same draws).
std::vector<Tensor> decomp_bernoulli(const OpCall& c) {
  const Tensor& p = c.in(0);
  Tensor u = call_op1(OpId::uniform, {}, {p.sizes().vec(), 0.0, 1.0, p.dtype(), p.device(), c.attrs[0], c.attrs[1]});
  return {to(lt(u, p), p.dtype())};
}
KILN_REGISTER_DECOMP(bernoulli, decomp_bernoulli);

Generator& gen_for(Generator* gen, Device d) { return gen ? *gen : default_generator(d); }

Tensor finish(Tensor t, const TensorOptions& o) {
  if (o.requires_grad_) t.requires_grad_(true);
  return t;
}

// (seed, offset) attrs for an op producing n values, reserving its blocks.
std::pair<int64_t, int64_t> reserve(Generator* gen, Device d, OpId op, DType t, int64_t n, int64_t range = 0) {
  auto [seed, offset] = gen_for(gen, d).reserve(random_blocks(op, t, n, range));
  return {static_cast<int64_t>(seed), static_cast<int64_t>(offset)};
}

}  // namespace

Tensor rand(SymIntArrayRef size, const TensorOptions& o, Generator* gen) {
  Shape s = checked_size(size.to_ints(), "rand");
  DType dt = o.dtype_or_default();
  Device d = o.device_or_default();
  auto [seed, off] = reserve(gen, d, OpId::uniform, dt, compute_numel(s));
  return finish(call_op1(OpId::rand, {}, {s, dt, d, seed, off}), o);
}
Tensor randn(SymIntArrayRef size, const TensorOptions& o, Generator* gen) {
  Shape s = checked_size(size.to_ints(), "randn");
  DType dt = o.dtype_or_default();
  Device d = o.device_or_default();
  auto [seed, off] = reserve(gen, d, OpId::normal, dt, compute_numel(s));
  return finish(call_op1(OpId::randn, {}, {s, dt, d, seed, off}), o);
}

namespace {
Attrs like_attrs(const Tensor& t, const std::optional<TensorOptions>& o, OpId prim, Generator* gen = nullptr) {
  DType dt = o && o->dtype_ ? *o->dtype_ : t.dtype();
  Device dev = o && o->device_ ? *o->device_ : t.device();
  auto [seed, off] = reserve(gen, dev, prim, dt, t.numel());
  return {dt, dev, seed, off};
}
}  // namespace

Tensor rand_like(const Tensor& t, std::optional<TensorOptions> o) {
  return finish(call_op1(OpId::rand_like, {t}, like_attrs(t, o, OpId::uniform)), o.value_or(TensorOptions()));
}
Tensor randn_like(const Tensor& t, std::optional<TensorOptions> o) {
  return finish(call_op1(OpId::randn_like, {t}, like_attrs(t, o, OpId::normal)), o.value_or(TensorOptions()));
}

Tensor randint(int64_t low, int64_t high, SymIntArrayRef size, const TensorOptions& o, Generator* gen) {
  Shape s = checked_size(size.to_ints(), "randint");
  DType dt = o.dtype_ ? *o.dtype_ : kInt64;
  Device d = o.device_or_default();
  KILN_CHECK(low < high, "randint: random_ expects 'from' to be less than 'to', but got from=", low, " >= to=", high);
  int64_t range = static_cast<int64_t>(static_cast<uint64_t>(high) - static_cast<uint64_t>(low));
  auto [seed, off] = reserve(gen, d, OpId::randint, dt, compute_numel(s), range);
  return finish(call_op1(OpId::randint, {}, {low, high, s, dt, d, seed, off}), o);
}
Tensor randint(int64_t high, SymIntArrayRef size, const TensorOptions& o, Generator* gen) {
  return randint(0, high, size, o, gen);
}

Tensor randperm(int64_t n, const TensorOptions& o, Generator* gen) {
  KILN_CHECK(n >= 0, "randperm: n must be non-negative, got ", n);
  DType dt = o.dtype_ ? *o.dtype_ : kInt64;
  Device d = o.device_or_default();
  auto [seed, off] = reserve(gen, d, OpId::randperm, dt, n);
  return finish(call_op1(OpId::randperm, {}, {n, dt, d, seed, off}), o);
}

Tensor bernoulli(const Tensor& p, Generator* gen) {
  KILN_CHECK(p.defined(), "bernoulli: undefined probability tensor");
  auto [seed, off] = reserve(gen, p.device(), OpId::uniform, p.dtype(), p.numel());
  return call_op1(OpId::bernoulli, {p}, {seed, off});
}

namespace {
// In-place fills: the values are drawn out of place and copied in (no gradient
// flows through random values; a leaf that requires grad is refused as torch does).
Tensor& fill_random(Tensor& t, OpId prim, double a, double b, Generator* gen) {
  const char* name = prim == OpId::uniform ? "uniform_" : "normal_";
  KILN_CHECK(t.defined(), name, ": undefined tensor");
  KILN_CHECK(!(is_grad_enabled() && t.is_leaf() && t.requires_grad()), name,
             ": a leaf tensor that requires grad is being used in an in-place operation; "
             "wrap it in kiln::NoGradGuard first");
  KILN_CHECK(is_floating_point(t.dtype()), name, ": expected a floating point tensor, got dtype ", t.dtype());
  auto [seed, off] = reserve(gen, t.device(), prim, t.dtype(), t.numel());
  Tensor r = call_op1(prim, {}, {t.sizes().vec(), a, b, t.dtype(), t.device(), seed, off});
  {
    NoGradGuard no_grad;
    call_op_inplace(t, OpId::to, {r}, {t.dtype()});
  }
  if (t.requires_grad() && !t.is_leaf()) t.detach_();  // the old history no longer matters
  return t;
}
}  // namespace

Tensor& normal_(Tensor& t, double mean, double std, Generator* gen) {
  return fill_random(t, OpId::normal, mean, std, gen);
}
Tensor& uniform_(Tensor& t, double from, double to, Generator* gen) {
  return fill_random(t, OpId::uniform, from, to, gen);
}
Tensor& Tensor::normal_(double mean, double std) { return kiln::normal_(*this, mean, std); }
Tensor& Tensor::uniform_(double from, double to) { return kiln::uniform_(*this, from, to); }

}  // namespace kiln
