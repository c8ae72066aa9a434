// CPU kernels of gather, scatter, scatter_add, scatter_reduce, index_add and
// one_hot. advanced indexing (index/index_put), masks and nonzero are in
// index.cpp, sorting in sort.cpp.
#include <cmath>
#include <limits>

#include "backend/cpu/indexing_util.h"

namespace kiln::cpu {
namespace {

// Note [Scatter/gather rows]
// The index tensor is walked as rows along `dim`: every coordinate but dim is
// shared by the index, self/out and src. Rows run in parallel; within a row
// elements go serially, so scatters with duplicate indices never race (two
// different rows always touch different self elements).
struct RowPlan {
  Cols<3> rows;      // index, "indexed" operand (self/out at idx), "direct" operand (at j)
  int64_t n = 0;     // index.size(dim)
  int64_t s_idx = 0, s_ind = 0, s_dir = 0;  // strides along dim
  int64_t size = 0;  // indexed operand's size along dim (the bound for indices)
};

// idx: contiguous int64; ind: the operand addressed by index values; dir: the
// operand addressed like the index (same coordinates).
RowPlan plan_rows(const Tensor& idx, const Tensor& ind, const Tensor& dir, int64_t dim) {
  Shape is = sizes_1d(idx), ist = strides_1d(idx), nst = strides_1d(ind), dst = strides_1d(dir);
  RowPlan p;
  for (size_t d = 0; d < is.size(); ++d)
    if (static_cast<int64_t>(d) != dim) p.rows.add(is[d], {ist[d], nst[d], dst[d]});
  p.rows.coalesce();
  p.n = is[dim];
  p.s_idx = ist[dim];
  p.s_ind = nst[dim];
  p.s_dir = dst[dim];
  p.size = sizes_1d(ind)[dim];
  return p;
}

// Runs body(T* ind_row, T* dir_row, const int64_t* idx_row) over all rows in parallel,
// after checking every index value is in [0, size).
template <class B>
void for_rows(const RowPlan& p, const int64_t* ip, int64_t dim, const char* op, const B& body) {
  IndexErrorSlot err;
  int64_t nrows = p.rows.numel();
  int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(p.n, 1));
  parallel_for(0, nrows, grain, [&](int64_t b, int64_t e) {
    p.rows.walk(b, e, [&](const std::array<int64_t, 3>& off, int64_t len) {
      for (int64_t r = 0; r < len; ++r) {
        const int64_t* irow = ip + off[0] + r * p.rows.inner(0);
        bool ok = true;
        for (int64_t j = 0; j < p.n; ++j) {
          int64_t v = irow[j * p.s_idx];
          if (v < 0 || v >= p.size) {
            err.report(v, dim, p.size);
            ok = false;
            break;
          }
        }
        if (ok) body(off[1] + r * p.rows.inner(1), off[2] + r * p.rows.inner(2), irow);
      }
    });
  });
  err.throw_if(op);
}

void gather_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& x = c.in(0);
  Tensor& out = outs[0];
  if (out.numel() == 0) return;
  int64_t dim = wrap_dim(c.attrs.i(0), x.dim(), c.name());
  Tensor idx = index_as_int64(c.in(1));
  RowPlan p = plan_rows(idx, x, out, dim);
  size_t es = x.element_size();
  char* xp = static_cast<char*>(x.data_ptr());
  char* op = static_cast<char*>(out.data_ptr());
  for_rows(p, idx.data_ptr<int64_t>(), dim, c.name(), [&](int64_t xo, int64_t oo, const int64_t* irow) {
    for (int64_t j = 0; j < p.n; ++j)
      std::memcpy(op + (oo + j * p.s_dir) * int64_t(es), xp + (xo + irow[j * p.s_idx] * p.s_ind) * int64_t(es), es);
  });
}
KILN_REGISTER_KERNEL(gather, CPU, gather_kernel);

void scatter_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor &x = c.in(0), &src = c.in(2);
  Tensor& out = outs[0];
  copy_cpu(out, x);
  if (c.in(1).numel() == 0 || out.numel() == 0) return;
  int64_t dim = wrap_dim(c.attrs.i(0), x.dim(), c.name());
  Tensor idx = index_as_int64(c.in(1));
  RowPlan p = plan_rows(idx, out, src, dim);
  size_t es = x.element_size();
  char* sp = static_cast<char*>(src.data_ptr());
  char* op = static_cast<char*>(out.data_ptr());
  for_rows(p, idx.data_ptr<int64_t>(), dim, c.name(), [&](int64_t oo, int64_t so, const int64_t* irow) {
    for (int64_t j = 0; j < p.n; ++j)
      std::memcpy(op + (oo + irow[j * p.s_idx] * p.s_ind) * int64_t(es), sp + (so + j * p.s_dir) * int64_t(es), es);
  });
}
KILN_REGISTER_KERNEL(scatter, CPU, scatter_kernel);

enum class Reduce { Sum, Prod, Mean, Max, Min };

template <class A>
A reduce_identity(Reduce r) {
  switch (r) {
    case Reduce::Prod: return A(1);
    case Reduce::Max:
      if constexpr (std::numeric_limits<A>::has_infinity) return -std::numeric_limits<A>::infinity();
      else return std::numeric_limits<A>::lowest();
    case Reduce::Min:
      if constexpr (std::numeric_limits<A>::has_infinity) return std::numeric_limits<A>::infinity();
      else return std::numeric_limits<A>::max();
    default: return A(0);
  }
}

template <class A>
bool nan_value(A v) {
  if constexpr (std::is_floating_point_v<A>) return std::isnan(v);
  else return false;
}

template <class A>
A reduce_step(Reduce r, A a, A b) {
  switch (r) {
    case Reduce::Prod: return static_cast<A>(a * b);
    case Reduce::Max: return (b > a || nan_value(b)) ? b : a;  // NaN propagates
    case Reduce::Min: return (b < a || nan_value(b)) ? b : a;
    default: return static_cast<A>(a + b);
  }
}

// scatter_add and scatter_reduce: out = self; out[idx] op= src (Note [Scatter/gather rows]).
void scatter_reduce_impl(const OpCall& c, Tensor& out, Reduce red, bool include_self) {
  const Tensor &x = c.in(0), &src = c.in(2);
  copy_cpu(out, x);
  if (c.in(1).numel() == 0 || out.numel() == 0) return;
  int64_t dim = wrap_dim(c.attrs.i(0), x.dim(), c.name());
  Tensor idx = index_as_int64(c.in(1));
  RowPlan p = plan_rows(idx, out, src, dim);
  const int64_t* ip = idx.data_ptr<int64_t>();
  // Mean divides by the number of values reduced into each element (self counts once when included).
  std::vector<int64_t> count;
  if (red == Reduce::Mean) count.assign(static_cast<size_t>(out.numel()), include_self ? 1 : 0);
  visit_dtype(x.dtype(), [&]<class T>() {
    using A = acc_t<T>;
    T* op = out.data_ptr<T>();
    const T* sp = static_cast<const T*>(src.data_ptr());
    if (!include_self) {
      const T id = convert<T>(reduce_identity<A>(red));
      for_rows(p, ip, dim, c.name(), [&](int64_t oo, int64_t, const int64_t* irow) {
        for (int64_t j = 0; j < p.n; ++j) op[oo + irow[j * p.s_idx] * p.s_ind] = id;
      });
    }
    for_rows(p, ip, dim, c.name(), [&](int64_t oo, int64_t so, const int64_t* irow) {
      for (int64_t j = 0; j < p.n; ++j) {
        int64_t o = oo + irow[j * p.s_idx] * p.s_ind;
        op[o] = convert<T>(reduce_step<A>(red, convert<A>(op[o]), convert<A>(sp[so + j * p.s_dir])));
        if (!count.empty()) ++count[static_cast<size_t>(o)];
      }
    });
    if constexpr (!std::is_same_v<T, bool>) {  // bool mean is rejected by the meta function
      if (red != Reduce::Mean) return;
      parallel_for(0, out.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          A n = static_cast<A>(std::max<int64_t>(count[static_cast<size_t>(i)], 1));
          A v = convert<A>(op[i]);
          if constexpr (std::is_integral_v<A>) {
            A q = v / n;  // integral mean rounds down, as torch's floor division
            if ((v % n != 0) && ((v < 0) != (n < 0))) --q;
            op[i] = convert<T>(q);
          } else {
            op[i] = convert<T>(v / n);
          }
        }
      });
    }
  });
}

void scatter_add_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  scatter_reduce_impl(c, outs[0], Reduce::Sum, true);
}
KILN_REGISTER_KERNEL(scatter_add, CPU, scatter_add_kernel);

void scatter_reduce_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const std::string& r = c.attrs.str(1);
  Reduce red = r == "sum" ? Reduce::Sum : r == "prod" ? Reduce::Prod : r == "mean" ? Reduce::Mean
             : r == "amax" ? Reduce::Max : Reduce::Min;
  scatter_reduce_impl(c, outs[0], red, c.attrs.b(2));
}
KILN_REGISTER_KERNEL(scatter_reduce, CPU, scatter_reduce_kernel);

// index_add: out = x; out.select(dim, idx[i]) += alpha * source.select(dim, i).
// Parallel over the elements of one slice, serial over i, so duplicates never race.
void index_add_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& x = c.in(0);
  Tensor& out = outs[0];
  copy_cpu(out, x);
  Tensor idx = index_as_int64(c.in(1));
  int64_t n = idx.numel();
  if (n == 0 || out.numel() == 0) return;
  int64_t dim = wrap_dim(c.attrs.i(0), x.dim(), c.name());
  Shape xs = sizes_1d(x);
  int64_t size = xs[dim], outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= xs[d];
  for (size_t d = dim + 1; d < xs.size(); ++d) inner *= xs[d];
  // Indices are few (one per slice): check them serially up front. Negative ones are
  // refused, not wrapped, as torch's index_add ("index out of range in self").
  std::vector<int64_t> iv(idx.data_ptr<int64_t>(), idx.data_ptr<int64_t>() + n);
  for (int64_t v : iv)
    KILN_CHECK(v >= 0 && v < size, c.name(), ": index ", v, " is out of bounds for dimension ", dim, " with size ",
               size, v < 0 ? " (negative indices are not allowed here, as in torch)" : "");
  Tensor src = contig(c.in(2));
  visit_dtype(x.dtype(), [&]<class T>() {
    using A = acc_t<T>;
    A alpha = c.attrs.s(1).to<A>();
    T* op = out.data_ptr<T>();
    const T* sp = src.data_ptr<T>();
    int64_t grain = std::max<int64_t>(1, 32768 / n);
    parallel_for(0, outer * inner, grain, [&](int64_t b, int64_t e) {
      for (int64_t i = 0; i < n; ++i) {
        int64_t o = b / inner, q = b % inner;
        for (int64_t k = b; k < e; ++k) {
          T& dst = op[(o * size + iv[i]) * inner + q];
          dst = convert<T>(static_cast<A>(convert<A>(dst) + alpha * convert<A>(sp[(o * n + i) * inner + q])));
          if (++q == inner) {
            q = 0;
            ++o;
          }
        }
      }
    });
  });
}
KILN_REGISTER_KERNEL(index_add, CPU, index_add_kernel);

void one_hot_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  Tensor& out = outs[0];
  int64_t nc = c.attrs.i(0);
  Tensor idx = contig(c.in(0));
  const int64_t* ip = idx.data_ptr<int64_t>();
  int64_t* op = out.data_ptr<int64_t>();
  if (out.numel() > 0) std::memset(op, 0, static_cast<size_t>(out.numel()) * sizeof(int64_t));
  for (int64_t i = 0; i < idx.numel(); ++i) {
    KILN_CHECK(ip[i] >= 0, c.name(), ": class values must be non-negative, got ", ip[i]);
    KILN_CHECK(ip[i] < nc, c.name(), ": class values must be smaller than num_classes (", nc, "), got ", ip[i]);
    op[i * nc + ip[i]] = 1;
  }
}
KILN_REGISTER_KERNEL(one_hot, CPU, one_hot_kernel);

}  // namespace
}  // namespace kiln::cpu
