// CPU kernels for shape copies: cat, flip, roll, repeat, pad, tril/triu.
// All but cat and tril/triu are separable per dim: each output coordinate maps
// to one input coordinate (or to the fill value), so one gather loop driven by
// per-dim offset tables serves them all (Note [Index tables]).
#include "backend/cpu/loops.h"
#include "dispatch/dispatch.h"
#include "ops/registry.h"

namespace kiln::cpu {
namespace {

// Note [Index tables]
// tables[d][o] is the element offset (coordinate * stride) in the input that
// output coordinate o of dim d reads, or -1 when the output element takes the
// fill value (constant padding). Input strides are never negative in kiln.
using Tables = std::vector<std::vector<int64_t>>;

template <class T>
void gather_tables(const Tensor& out, const Tensor& in, const Tables& tables, T fill) {
  int64_t numel = out.numel();
  if (numel == 0) return;
  T* o = static_cast<T*>(out.data_ptr());
  const T* src = static_cast<const T*>(in.data_ptr());
  int64_t nd = out.dim();
  if (nd == 0) {
    *o = *src;
    return;
  }
  const Shape sz = out.sizes().vec();
  int64_t inner = sz[nd - 1];
  int64_t rows = numel / inner;
  const std::vector<int64_t>& last = tables[nd - 1];
  int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(inner, 1));
  parallel_for(0, rows, grain, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      int64_t rem = r, base = 0;
      bool filled = false;
      for (int64_t d = nd - 2; d >= 0; --d) {
        int64_t c = rem % sz[d];
        rem /= sz[d];
        int64_t t = tables[d][c];
        if (t < 0) filled = true;
        base += t;
      }
      T* row = o + r * inner;
      if (filled) {
        std::fill(row, row + inner, fill);
        continue;
      }
      const T* s = src + base;
      for (int64_t j = 0; j < inner; ++j) {
        int64_t t = last[j];
        row[j] = t < 0 ? fill : s[t];
      }
    }
  });
}

void run_tables(const Tensor& out, const Tensor& in, const Tables& tables, double fill = 0.0) {
  visit_dtype(out.dtype(), [&]<class T>() { gather_tables<T>(out, in, tables, convert<T, double>(fill)); });
}

// Identity tables for `in`'s dims (to be overridden per dim).
Tables identity_tables(const Tensor& in) {
  Tables t(in.dim());
  for (int64_t d = 0; d < in.dim(); ++d) {
    t[d].resize(in.sizes()[d]);
    for (int64_t o = 0; o < in.sizes()[d]; ++o) t[d][o] = o * in.strides()[d];
  }
  return t;
}

// The input in out's dtype (tables index raw elements of one type).
Tensor same_dtype(const Tensor& in, DType t) { return cast_to(in, t); }

// cat: (xs...; dim). Each non-skipped input is copied into its slice of out.
void cat_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& out = outs[0];
  if (out.numel() == 0) return;
  int64_t dim = wrap_dim(c.attrs.i(0), out.dim(), "cat");
  int64_t offset = 0;
  for (const Tensor& x : c.inputs) {
    if (x.dim() == 1 && x.sizes()[0] == 0 && out.dim() != 1) continue;  // legacy empty tensor
    int64_t len = x.sizes()[dim];
    if (len == 0) continue;
    Shape sizes = out.sizes().vec();
    sizes[dim] = len;
    Tensor slot = make_view(out, sizes, out.strides(), out.storage_offset() + offset * out.strides()[dim]);
    copy_cpu(slot, x);
    offset += len;
  }
}

// flip: (x; dims)
void flip_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  Tensor x = same_dtype(c.in(0), outs[0].dtype());
  Tables t = identity_tables(x);
  // A 0-d tensor has nothing to reverse (dim 0 or -1 names it, as in torch): a copy.
  for (int64_t d : x.dim() == 0 ? std::vector<int64_t>{} : c.attrs.ints(0)) {
    int64_t w = wrap_dim(d, x.dim(), "flip"), n = x.sizes()[w];
    for (int64_t o = 0; o < n; ++o) t[w][o] = (n - 1 - o) * x.strides()[w];
  }
  run_tables(outs[0], x, t);
}

// roll: (x; shifts, dims). Without dims the flattened tensor is rolled.
void roll_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  Tensor x = same_dtype(c.in(0), outs[0].dtype());
  const auto& shifts = c.attrs.ints(0);
  const auto& dims = c.attrs.ints(1);
  if (dims.empty()) {
    Shape flat_size{x.numel()};
    Tensor flat = make_tensor(flat_size, x.dtype(), x.device());
    copy_cpu(make_view(flat, x.sizes(), contiguous_strides(x.sizes()), 0), x);
    int64_t n = x.numel();
    if (n == 0) return;
    Tables t(1, std::vector<int64_t>(n));
    for (int64_t o = 0; o < n; ++o) t[0][o] = ((o - shifts[0]) % n + n) % n;
    Shape out_size{n}, unit{1};
    Tensor out_flat = make_view(outs[0], out_size, unit, outs[0].storage_offset());
    run_tables(out_flat, flat, t);
    return;
  }
  Tables t = identity_tables(x);
  for (size_t k = 0; k < dims.size(); ++k) {
    int64_t w = wrap_dim(dims[k], x.dim(), "roll"), n = x.sizes()[w];
    if (n == 0) continue;
    for (int64_t o = 0; o < n; ++o) t[w][o] = (((o - shifts[k]) % n + n) % n) * x.strides()[w];
  }
  run_tables(outs[0], x, t);
}

// repeat: (x; repeats). x is viewed with leading size-1 dims up to len(repeats).
void repeat_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  Tensor x = same_dtype(c.in(0), outs[0].dtype());
  const auto& reps = c.attrs.ints(0);
  int64_t nd = static_cast<int64_t>(reps.size()), lead = nd - x.dim();
  Tables t(nd);
  for (int64_t d = 0; d < nd; ++d) {
    int64_t s = d < lead ? 1 : x.sizes()[d - lead], st = d < lead ? 0 : x.strides()[d - lead];
    t[d].resize(s * reps[d]);
    for (int64_t o = 0; o < s * reps[d]; ++o) t[d][o] = (o % s) * st;
  }
  run_tables(outs[0], x, t);
}

// pad: (x; pad, mode, value). Pairs (left, right) start from the last dim.
void pad_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  Tensor x = same_dtype(c.in(0), outs[0].dtype());
  const auto& pad = c.attrs.ints(0);
  const std::string& mode = c.attrs.str(1);
  double value = c.attrs.f(2);
  int64_t nd = x.dim();
  Tables t = identity_tables(x);
  for (size_t k = 0; k < pad.size() / 2; ++k) {
    int64_t d = nd - 1 - static_cast<int64_t>(k);
    int64_t l = pad[2 * k], n = x.sizes()[d], m = outs[0].sizes()[d], st = x.strides()[d];
    t[d].assign(m, -1);
    for (int64_t o = 0; o < m; ++o) {
      int64_t i = o - l;
      if (mode == "reflect") i = i < 0 ? -i : (i >= n ? 2 * (n - 1) - i : i);
      else if (mode == "replicate") i = std::clamp<int64_t>(i, 0, n - 1);
      t[d][o] = i >= 0 && i < n ? i * st : -1;
    }
  }
  run_tables(outs[0], x, t, value);
}

// tril/triu: (x; diagonal) over the last two dims.
void tri_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  bool lower = c.op == OpId::tril;
  int64_t k = c.attrs.i(0);
  Tensor x = same_dtype(c.in(0), outs[0].dtype());
  copy_cpu(outs[0], x);
  const Tensor& out = outs[0];
  if (out.numel() == 0) return;
  int64_t n = out.sizes()[out.dim() - 2], m = out.sizes()[out.dim() - 1];
  int64_t mats = out.numel() / (n * m);
  visit_dtype(out.dtype(), [&]<class T>() {
    T* p = static_cast<T*>(out.data_ptr());
    const T zero = convert<T, double>(0.0);
    parallel_for(0, mats * n, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(m, 1)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t r = b; r < e; ++r) {
                     int64_t i = r % n;
                     T* row = p + r * m;
                     // tril keeps j <= i + k; triu keeps j >= i + k.
                     if (lower) {
                       for (int64_t j = std::max<int64_t>(0, i + k + 1); j < m; ++j) row[j] = zero;
                     } else {
                       for (int64_t j = 0; j < std::min<int64_t>(m, i + k); ++j) row[j] = zero;
                     }
                   }
                 });
  });
}

KILN_REGISTER_KERNEL(cat, CPU, cat_kernel);
KILN_REGISTER_KERNEL(flip, CPU, flip_kernel);
KILN_REGISTER_KERNEL(roll, CPU, roll_kernel);
KILN_REGISTER_KERNEL(repeat, CPU, repeat_kernel);
KILN_REGISTER_KERNEL(pad, CPU, pad_kernel);
KILN_REGISTER_KERNEL(tril, CPU, tri_kernel);
KILN_REGISTER_KERNEL(triu, CPU, tri_kernel);

// _to_copy (Note [Device moves]): the output was made on the target device from the meta function;
// copy_ moves the elements (host to device, device to host or within a device) and converts the dtype.
void to_copy_kernel(const OpCall& c, std::vector<Tensor>& outs) { copy_into(outs[0], c.in(0)); }
KILN_REGISTER_KERNEL(_to_copy, CPU, to_copy_kernel);

}  // namespace
}  // namespace kiln::cpu
