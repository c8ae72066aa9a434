// CPU kernels of unique, unique_consecutive, bincount, histc, searchsorted and
// tril/triu_indices (src/ops/indexops.cpp has their checks). The data-dependent ones
// (unique*, bincount) make their outputs here. NaN sorts last and equals nothing, so
// every NaN is its own unique value.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend/cpu/indexing_util.h"
#include "core/scalar_math.h"
#include "ops/meta_util.h"

namespace kiln::cpu {
namespace {

template <class K>
bool is_nan(K v) {
  if constexpr (std::is_floating_point_v<K>)
    return std::isnan(v);
  else
    return false;
}
// Ascending with NaN last: a strict weak order even with NaNs.
template <class K>
bool less_nan_last(K a, K b) {
  return is_nan(a) ? false : (is_nan(b) || a < b);
}

// ---- unique / unique_consecutive ----
// x seen as [outer, n, inner] around the unique dim (no dim: [1, numel, 1]); each of the n
// slices is compared element by element, in (outer, inner) order.
struct Slices {
  int64_t outer = 1, n = 1, inner = 1;
};

void unique_impl(const OpCall& c, std::vector<Tensor>& outs, bool sort) {
  const Tensor& x = c.in(0);
  const size_t a = sort ? 1 : 0;  // attrs: [sorted,] return_inverse, return_counts, dim
  const bool want_inverse = c.attrs.b(a), want_counts = c.attrs.b(a + 1);
  std::optional<int64_t> dim = c.attrs.opt_i(a + 2);
  Slices s;
  if (dim) {
    int64_t d = wrap_dim(*dim, x.dim(), c.name());
    KILN_CHECK(x.numel() > 0 || x.sizes()[d] == 0, c.name(),
               ": there are 0 sized dimensions, and they aren't selected, so unique cannot be applied (input of "
               "shape ",
               shape_str(x.sizes()), ", dim ", d, ")");
    for (int64_t k = 0; k < d; ++k) s.outer *= x.sizes()[k];
    s.n = x.sizes()[d];
    for (int64_t k = d + 1; k < x.dim(); ++k) s.inner *= x.sizes()[k];
  } else {
    s.n = x.numel();
  }
  Tensor xc = contig(x);
  const int64_t m = s.outer * s.inner;  // elements per slice
  std::vector<int64_t> perm(static_cast<size_t>(s.n));
  std::iota(perm.begin(), perm.end(), int64_t(0));
  std::vector<int64_t> group_of(static_cast<size_t>(s.n)), first;  // first: a slice of each group
  visit_dtype(x.dtype(), [&]<class T>() {
    using K = acc_t<T>;
    const T* p = xc.data_ptr<T>();
    auto elem = [&](int64_t slice, int64_t j) {
      return convert<K>(p[((j / s.inner) * s.n + slice) * s.inner + j % s.inner]);
    };
    if (sort)
      std::stable_sort(perm.begin(), perm.end(), [&](int64_t u, int64_t v) {
        for (int64_t j = 0; j < m; ++j) {
          K eu = elem(u, j), ev = elem(v, j);
          if (less_nan_last(eu, ev)) return true;
          if (less_nan_last(ev, eu)) return false;
        }
        return false;
      });
    auto equal = [&](int64_t u, int64_t v) {
      for (int64_t j = 0; j < m; ++j)
        if (!(elem(u, j) == elem(v, j))) return false;  // NaN equals nothing
      return true;
    };
    for (int64_t i = 0; i < s.n; ++i) {
      if (i == 0 || !equal(perm[i], perm[i - 1])) first.push_back(perm[i]);
      group_of[perm[i]] = static_cast<int64_t>(first.size()) - 1;
    }
  });
  const int64_t g = static_cast<int64_t>(first.size());
  Shape vs = dim ? Shape(x.sizes().begin(), x.sizes().end()) : Shape{g};
  if (dim) vs[wrap_dim(*dim, x.dim(), c.name())] = g;
  Tensor values = make_tensor(vs, x.dtype(), x.device());
  const size_t es = x.element_size();
  const char* src = static_cast<const char*>(xc.data_ptr());
  char* dst = static_cast<char*>(values.data_ptr());
  for (int64_t k = 0; k < g; ++k)
    for (int64_t o = 0; o < s.outer; ++o)
      std::memcpy(dst + ((o * g + k) * s.inner) * int64_t(es), src + ((o * s.n + first[k]) * s.inner) * int64_t(es),
                  static_cast<size_t>(s.inner) * es);
  Tensor inverse = make_tensor(want_inverse ? (dim ? Shape{s.n} : Shape(x.sizes().begin(), x.sizes().end())) : Shape{0},
                               kInt64, x.device());
  if (want_inverse) std::copy(group_of.begin(), group_of.end(), inverse.data_ptr<int64_t>());
  Tensor counts = make_tensor(Shape{want_counts ? g : 0}, kInt64, x.device());
  if (want_counts) {
    int64_t* cp = counts.data_ptr<int64_t>();
    std::fill(cp, cp + g, int64_t(0));
    for (int64_t gi : group_of) ++cp[gi];
  }
  outs = {values, inverse, counts};
}

void unique_kernel(const OpCall& c, std::vector<Tensor>& outs) { unique_impl(c, outs, true); }
void unique_consecutive_kernel(const OpCall& c, std::vector<Tensor>& outs) { unique_impl(c, outs, false); }
KILN_REGISTER_KERNEL(unique, CPU, unique_kernel);
KILN_REGISTER_KERNEL(unique_consecutive, CPU, unique_consecutive_kernel);

// ---- bincount ----
// Without weights int64 counts; float32 weights sum in float32, any other weights in float64 (as torch).
void bincount_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor &x = c.in(0), &w = c.in(1);
  int64_t minlength = c.attrs.i(0);
  KILN_CHECK(minlength >= 0, "bincount: minlength should be >= 0, got ", minlength);
  KILN_CHECK(is_integral(x.dtype()) && x.dtype() != kBool, "bincount: expected an integral input, got dtype ",
             x.dtype());
  KILN_CHECK(x.dim() == 1, "bincount only supports 1-d non-negative integral inputs, got an input of shape ",
             shape_str(x.sizes()));
  if (w.defined())
    KILN_CHECK(w.dim() == 1 && w.numel() == x.numel(),
               "bincount: weights should be 1-d and have the same length as input, got weights of shape ",
               shape_str(w.sizes()), " for an input of shape ", shape_str(x.sizes()));
  Tensor xi = index_as_int64(x);
  const int64_t* xp = xi.data_ptr<int64_t>();
  const int64_t n = x.numel();
  int64_t len = minlength;
  for (int64_t i = 0; i < n; ++i) {
    KILN_CHECK(xp[i] >= 0, "bincount only supports 1-d non-negative integral inputs, got the value ", xp[i]);
    len = std::max(len, xp[i] + 1);
  }
  DType out_t = !w.defined() ? kInt64 : (w.dtype() == kFloat32 ? kFloat32 : kFloat64);
  Tensor out = make_tensor(Shape{len}, out_t, x.device());
  Tensor wc = w.defined() ? contig(cast_to(w, out_t)) : Tensor();
  visit_dtype(out_t, [&]<class T>() {
    if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, float> || std::is_same_v<T, double>) {
      T* op = out.data_ptr<T>();
      std::fill(op, op + len, T(0));
      const T* wp = wc.defined() ? wc.data_ptr<T>() : nullptr;
      for (int64_t i = 0; i < n; ++i) op[xp[i]] += wp ? wp[i] : T(1);
    }
  });
  outs = {out};
}
KILN_REGISTER_KERNEL(bincount, CPU, bincount_kernel);

// ---- histc ----
// torch's linear interpolation: bin (x - lo) * bins / (hi - lo) in the input's type (each
// step rounded to it for Half/BFloat16, as c10's arithmetic does), the last bin closed;
// values outside [lo, hi] and NaN are left out.
void histc_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& x = c.in(0);
  const int64_t bins = c.attrs.i(0);
  double lo = c.attrs.s(1).to_double(), hi = c.attrs.s(2).to_double();
  Tensor xc = contig(x);
  const int64_t n = x.numel();
  std::vector<int64_t> count(static_cast<size_t>(bins), 0);
  visit_floating(x.dtype(), c.name(), [&]<class T>() {
    using C = math::opmath_t<T>;
    const T* p = xc.data_ptr<T>();
    if (lo == hi && n > 0) {  // the input's range; NaN propagates (torch's aminmax), then fails the check
      double mn = convert<double>(p[0]), mx = mn;
      for (int64_t i = 1; i < n && !std::isnan(mn); ++i) {
        const double v = convert<double>(p[i]);
        mn = std::isnan(v) ? v : std::min(mn, v);
        mx = std::isnan(v) ? v : std::max(mx, v);
      }
      lo = mn;
      hi = std::isnan(mn) ? mn : mx;
    }
    if (lo == hi) lo -= 1, hi += 1;
    KILN_CHECK(std::isfinite(lo) && std::isfinite(hi), "histc: range of [", lo, ", ", hi, "] is not finite");
    KILN_CHECK(lo < hi, "histc: max must be larger than min, got min ", lo, " and max ", hi);
    auto r = [](C v) { return C(T(v)); };  // round to T (identity for float and double)
    const C l = r(C(lo)), h = r(C(hi)), width = r(h - l), nb = r(C(bins));
    for (int64_t i = 0; i < n; ++i) {
      const C v = C(p[i]);
      if (!(v >= l && v <= h)) continue;
      int64_t pos = static_cast<int64_t>(r(r(r(v - l) * nb) / width));
      pos = std::clamp<int64_t>(pos, 0, bins - 1);
      ++count[pos];
    }
    T* op = outs[0].data_ptr<T>();
    for (int64_t b = 0; b < bins; ++b) op[b] = convert<T>(count[b]);
  });
}
KILN_REGISTER_KERNEL(histc, CPU, histc_kernel);

// ---- searchsorted ----
// torch's lower/upper bound on each row of the boundaries, read through the sorter when given;
// values and boundaries compare in their promoted dtype.
void searchsorted_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor &seq = c.in(0), &values = c.in(1), &sorter = c.in(2);
  const bool right = c.attrs.b(1);
  Tensor both[] = {seq, values};
  DType ct = result_type(both);
  Tensor sq = contig(cast_to(seq, ct)), vq = contig(cast_to(values, ct));
  Tensor so = sorter.defined() ? contig(sorter) : Tensor();
  const int64_t len = seq.sizes().back(), nv = values.numel();
  const int64_t vrow = values.dim() == 0 ? 1 : values.sizes().back();
  const bool one_row = seq.dim() == 1;
  const int64_t* sp = so.defined() ? so.data_ptr<int64_t>() : nullptr;
  if (sp)
    for (int64_t i = 0; i < so.numel(); ++i)
      KILN_CHECK(sp[i] >= 0 && sp[i] < len, c.name(), ": sorter index ", sp[i],
                 " is out of range for boundaries whose last dim has size ", len);
  Tensor out = outs[0];
  visit_dtype(ct, [&]<class T>() {
    using K = acc_t<T>;
    const T* bp = sq.data_ptr<T>();
    const T* vp = vq.data_ptr<T>();
    parallel_for(0, nv, 1024, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const int64_t row0 = one_row || vrow == 0 ? 0 : (i / vrow) * len;
        const K v = convert<K>(vp[i]);
        int64_t lo = 0, hi = len;
        while (lo < hi) {
          const int64_t mid = lo + ((hi - lo) >> 1);
          const K mv = convert<K>(bp[row0 + (sp ? sp[row0 + mid] : mid)]);
          // As torch: !(mid >= v) for the left side, !(mid > v) for the right (NaNs compare false).
          if (right ? !(mv > v) : !(mv >= v))
            lo = mid + 1;
          else
            hi = mid;
        }
        if (out.dtype() == kInt32)
          out.data_ptr<int32_t>()[i] = static_cast<int32_t>(lo);
        else
          out.data_ptr<int64_t>()[i] = lo;
      }
    });
  });
}
KILN_REGISTER_KERNEL(searchsorted, CPU, searchsorted_kernel);

// ---- tril_indices / triu_indices ----
void tri_indices_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const int64_t row = c.attrs.i(0), col = c.attrs.i(1), offset = c.attrs.i(2);
  const bool lower = c.op == OpId::tril_indices;
  const Tensor& out = outs[0];
  const int64_t n = out.sizes()[1];
  visit_dtype(out.dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, int32_t>) {
      T* rp = out.data_ptr<T>();
      T* cp = rp + n;
      int64_t w = 0;
      for (int64_t i = 0; i < row; ++i) {
        const int64_t k = std::clamp<int64_t>(i + offset + (lower ? 1 : 0), 0, col);
        for (int64_t j = lower ? 0 : k; j < (lower ? k : col); ++j, ++w) {
          rp[w] = static_cast<T>(i);
          cp[w] = static_cast<T>(j);
        }
      }
    }
  });
}
KILN_REGISTER_KERNEL(tril_indices, CPU, tri_indices_kernel);
KILN_REGISTER_KERNEL(triu_indices, CPU, tri_indices_kernel);

}  // namespace
}  // namespace kiln::cpu
