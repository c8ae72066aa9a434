// CPU kernels of sort and topk: each row along `dim` is sorted on its own,
// rows in parallel. NaN compares as the largest value (torch's order).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend/cpu/indexing_util.h"

namespace kiln::cpu {
namespace {

template <class K>
bool is_nan(K v) {
  if constexpr (std::is_floating_point_v<K>) return std::isnan(v);
  else return false;
}

// a before b in ascending order (NaN last) or descending order (NaN first).
template <class K>
bool before(K a, K b, bool descending) {
  if (descending) return is_nan(b) ? false : (is_nan(a) || a > b);
  return is_nan(a) ? false : (is_nan(b) || a < b);
}

// Sorts each row along dim of x and writes the first k entries to values/indices.
// full: the whole row is ordered (sort); else only the k best (topk).
void sort_rows(const OpCall& c, const Tensor& values, const Tensor& indices, int64_t dim, int64_t k, bool descending,
               bool stable, bool full) {
  const Tensor& x = c.in(0);
  Shape xs = sizes_1d(x), xst = strides_1d(x);
  Shape vst = strides_1d(values), ist = strides_1d(indices);
  int64_t n = xs[dim];
  if (values.numel() == 0) return;
  Cols<3> rows;  // 0: x, 1: values, 2: indices
  for (size_t d = 0; d < xs.size(); ++d)
    if (static_cast<int64_t>(d) != dim) rows.add(xs[d], {xst[d], vst[d], ist[d]});
  rows.coalesce();
  int64_t sx = xst[dim], sv = vst[dim], si = ist[dim];
  visit_dtype(x.dtype(), [&]<class T>() {
    using K = acc_t<T>;
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* vp = values.data_ptr<T>();
    int64_t* ip = indices.data_ptr<int64_t>();
    int64_t grain = std::max<int64_t>(1, 8192 / std::max<int64_t>(n, 1));
    parallel_for(0, rows.numel(), grain, [&](int64_t b, int64_t e) {
      std::vector<K> key(static_cast<size_t>(n));
      std::vector<int64_t> perm(static_cast<size_t>(n));
      rows.walk(b, e, [&](const std::array<int64_t, 3>& off, int64_t len) {
        for (int64_t r = 0; r < len; ++r) {
          const T* row = xp + off[0] + r * rows.inner(0);
          for (int64_t j = 0; j < n; ++j) key[j] = convert<K>(row[j * sx]);
          std::iota(perm.begin(), perm.end(), int64_t(0));
          auto cmp = [&](int64_t a, int64_t bb) { return before(key[a], key[bb], descending); };
          // Ties keep their original order: stable sort, or topk's explicit tie-break on the index.
          auto cmp_ties = [&](int64_t a, int64_t bb) {
            return before(key[a], key[bb], descending) || (!before(key[bb], key[a], descending) && a < bb);
          };
          if (full && stable) std::stable_sort(perm.begin(), perm.end(), cmp);
          else if (full) std::sort(perm.begin(), perm.end(), cmp_ties);
          else std::partial_sort(perm.begin(), perm.begin() + k, perm.end(), cmp_ties);
          T* vrow = vp + off[1] + r * rows.inner(1);
          int64_t* irow = ip + off[2] + r * rows.inner(2);
          for (int64_t j = 0; j < k; ++j) {
            vrow[j * sv] = row[perm[j] * sx];
            irow[j * si] = perm[j];
          }
        }
      });
    });
  });
}

void sort_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& x = c.in(0);
  int64_t dim = wrap_dim(c.attrs.i(0), x.dim(), c.name());
  sort_rows(c, outs[0], outs[1], dim, sizes_1d(x)[dim], c.attrs.b(1), c.attrs.b(2), true);
}
KILN_REGISTER_KERNEL(sort, CPU, sort_kernel);

void topk_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& x = c.in(0);
  int64_t dim = wrap_dim(c.attrs.i(1), x.dim(), c.name());
  // A 0-d input has one element and a 0-d result for k = 0 or 1 alike: torch returns it.
  int64_t k = x.dim() == 0 ? 1 : c.attrs.i(0);
  // sorted=false may return any order; the sorted order is one of them.
  sort_rows(c, outs[0], outs[1], dim, k, c.attrs.b(2), false, false);
}
KILN_REGISTER_KERNEL(topk, CPU, topk_kernel);

}  // namespace
}  // namespace kiln::cpu
