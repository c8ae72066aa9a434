// CPU kernels of advanced indexing (index, index_put) and of the
// data-dependent mask ops (masked_select, nonzero).
#include "backend/cpu/indexing_util.h"
#include "ops/indexing.h"
#include "ops/meta_util.h"

namespace kiln::cpu {
namespace {

// Offsets (in elements, with `strides`) that the index tensors select, one per
// element of the broadcast shape; negative indices wrap, as torch's x[idx].
std::vector<int64_t> index_offsets(const IndexPlan& p, IntArrayRef x_sizes, IntArrayRef strides, const char* op) {
  int64_t nb = compute_numel(p.bshape);
  std::vector<int64_t> offs(static_cast<size_t>(nb), 0);
  if (nb == 0) return offs;
  int64_t nd = static_cast<int64_t>(p.bshape.size());
  IndexErrorSlot err;
  for (size_t k = 0; k < p.indices.size(); ++k) {
    Tensor idx = index_as_int64(p.indices[k]);
    const int64_t* ip = idx.data_ptr<int64_t>();
    // The index tensor's strides seen at the broadcast shape.
    Cols<2> cols;
    int64_t off = nd - idx.dim();
    Shape bst = contiguous_strides(p.bshape);
    for (int64_t d = 0; d < nd; ++d) {
      int64_t s = d < off || idx.sizes()[d - off] == 1 ? 0 : idx.strides()[d - off];
      cols.sizes.push_back(p.bshape[d]);
      cols.st[0].push_back(bst[d]);
      cols.st[1].push_back(s);
    }
    int64_t dim = p.dims[k], size = x_sizes[dim], stride = strides[dim];
    parallel_for(0, nb, kElementwiseGrain, [&](int64_t b, int64_t e) {
      cols.walk(b, e, [&](const std::array<int64_t, 2>& o, int64_t n) {
        for (int64_t i = 0; i < n; ++i) {
          int64_t v = ip[o[1] + i * cols.inner(1)];
          if (v < -size || v >= size) {
            err.report(v, dim, size);
            continue;
          }
          offs[static_cast<size_t>(o[0] + i * cols.inner(0))] += (v < 0 ? v + size : v) * stride;
        }
      });
    });
  }
  err.throw_if(op);
  return offs;
}

// Note [Advanced indexing loop]: the result is [P, B, Q] (Note [Advanced
// indexing layout]). P and Q together are the "columns": the destination and
// source offsets of a column come from strides, those of B from precomputed
// offset tables. Threads split the columns (or B when there are few columns
// and writes cannot collide), so accumulation never races.
struct IndexLoop {
  Cols<2> cols;                   // 0: destination, 1: source
  std::vector<int64_t> dst_b, src_b;  // per element of B
};

template <class Body>
void run_index_loop(const IndexLoop& L, bool may_collide, const Body& body) {
  int64_t ncols = L.cols.numel(), nb = static_cast<int64_t>(L.dst_b.size());
  if (ncols == 0 || nb == 0) return;
  int64_t sd = L.cols.inner(0), ss = L.cols.inner(1);
  if (!may_collide && ncols < nb) {
    parallel_for(0, nb, std::max<int64_t>(1, kElementwiseGrain / ncols), [&](int64_t b0, int64_t b1) {
      L.cols.walk(0, ncols, [&](const std::array<int64_t, 2>& o, int64_t n) {
        for (int64_t b = b0; b < b1; ++b) body(o[0] + L.dst_b[b], sd, o[1] + L.src_b[b], ss, n);
      });
    });
    return;
  }
  parallel_for(0, ncols, std::max<int64_t>(1, kElementwiseGrain / nb), [&](int64_t c0, int64_t c1) {
    L.cols.walk(c0, c1, [&](const std::array<int64_t, 2>& o, int64_t n) {
      for (int64_t b = 0; b < nb; ++b) body(o[0] + L.dst_b[b], sd, o[1] + L.src_b[b], ss, n);
    });
  });
}

void index_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& x = c.in(0);
  Tensor& out = outs[0];
  IndexPlan p = plan_index(x.sizes(), c.inputs.subspan(1), c.name());
  IndexLoop L;
  L.src_b = index_offsets(p, x.sizes(), x.strides(), c.name());
  if (out.numel() == 0) return;
  // out is contiguous [P, B, Q].
  int64_t nb = compute_numel(p.bshape), nq = 1;
  for (int64_t d : p.post) nq *= x.sizes()[d];
  L.dst_b.resize(L.src_b.size());
  for (int64_t b = 0; b < nb; ++b) L.dst_b[b] = b * nq;
  Shape ost = contiguous_strides(out.sizes());
  size_t k = 0;
  for (int64_t d : p.pre) L.cols.add(x.sizes()[d], {ost[k++], x.strides()[d]});
  k += p.bshape.size();
  for (int64_t d : p.post) L.cols.add(x.sizes()[d], {ost[k++], x.strides()[d]});
  L.cols.coalesce();
  size_t es = x.element_size();
  char* op = static_cast<char*>(out.data_ptr());
  const char* xp = static_cast<const char*>(x.data_ptr());
  run_index_loop(L, false, [&](int64_t od, int64_t sd, int64_t os, int64_t ss, int64_t n) {
    copy_run(op + od * int64_t(es), sd, xp + os * int64_t(es), ss, n, es);
  });
}
KILN_REGISTER_KERNEL(index, CPU, index_kernel);

void index_put_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor &x = c.in(0), &values = c.in(1);
  Tensor& out = outs[0];
  bool accumulate = c.attrs.b(0);
  copy_cpu(out, x);
  IndexPlan p = plan_index(x.sizes(), c.inputs.subspan(2), c.name());
  IndexLoop L;
  L.dst_b = index_offsets(p, out.sizes(), out.strides(), c.name());
  if (out.numel() == 0 || values.numel() == 0) return;
  // values broadcast to the result [P, B, Q]: its strides per result dim.
  int64_t nr = static_cast<int64_t>(p.result.size()), off = nr - values.dim();
  Shape vst(static_cast<size_t>(nr), 0);
  for (int64_t d = off; d < nr; ++d)
    vst[d] = values.sizes()[d - off] == 1 ? 0 : values.strides()[d - off];
  int64_t np = static_cast<int64_t>(p.pre.size()), nbd = static_cast<int64_t>(p.bshape.size());
  Cols<1> bcols;
  for (int64_t d = 0; d < nbd; ++d) {
    bcols.sizes.push_back(p.bshape[d]);
    bcols.st[0].push_back(vst[np + d]);
  }
  L.src_b.reserve(L.dst_b.size());
  bcols.walk(0, bcols.numel(), [&](const std::array<int64_t, 1>& o, int64_t n) {
    for (int64_t i = 0; i < n; ++i) L.src_b.push_back(o[0] + i * bcols.inner(0));
  });
  size_t k = 0;
  for (int64_t d : p.pre) L.cols.add(x.sizes()[d], {out.strides()[d], vst[k++]});
  k += p.bshape.size();
  for (int64_t d : p.post) L.cols.add(x.sizes()[d], {out.strides()[d], vst[k++]});
  L.cols.coalesce();
  if (!accumulate) {
    // Duplicate indices: any of the values wins (undefined in torch too).
    size_t es = x.element_size();
    char* op = static_cast<char*>(out.data_ptr());
    const char* vp = static_cast<const char*>(values.data_ptr());
    run_index_loop(L, false, [&](int64_t od, int64_t sd, int64_t os, int64_t ss, int64_t n) {
      copy_run(op + od * int64_t(es), sd, vp + os * int64_t(es), ss, n, es);
    });
    return;
  }
  visit_dtype(x.dtype(), [&]<class T>() {
    using A = acc_t<T>;
    T* op = out.data_ptr<T>();
    const T* vp = static_cast<const T*>(values.data_ptr());
    run_index_loop(L, true, [&](int64_t od, int64_t sd, int64_t os, int64_t ss, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        T& d = op[od + i * sd];
        d = convert<T>(static_cast<A>(convert<A>(d) + convert<A>(vp[os + i * ss])));
      }
    });
  });
}
KILN_REGISTER_KERNEL(index_put, CPU, index_put_kernel);

// Splits [0, n) into chunks, counts the true elements of a contiguous bool
// buffer per chunk, and returns each chunk's start position in the output.
struct MaskChunks {
  int64_t chunk = 1, nchunks = 0, total = 0;
  std::vector<int64_t> start;
};
MaskChunks count_mask(const bool* m, int64_t n) {
  MaskChunks r;
  r.chunk = std::max<int64_t>(kElementwiseGrain, (n + get_num_threads() - 1) / std::max(get_num_threads(), 1));
  r.nchunks = (n + r.chunk - 1) / r.chunk;
  std::vector<int64_t> cnt(static_cast<size_t>(r.nchunks), 0);
  parallel_for(0, r.nchunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      int64_t s = 0, hi = std::min(n, (k + 1) * r.chunk);
      for (int64_t i = k * r.chunk; i < hi; ++i) s += m[i];
      cnt[k] = s;
    }
  });
  r.start.resize(static_cast<size_t>(r.nchunks));
  for (int64_t k = 0; k < r.nchunks; ++k) {
    r.start[k] = r.total;
    r.total += cnt[k];
  }
  return r;
}

// Shares the storage of t, seen with `sizes` (broadcast: stride 0 where t has size 1 or lacks the dim).
Tensor broadcast_view(const Tensor& t, const Shape& sizes) {
  int64_t nd = static_cast<int64_t>(sizes.size()), off = nd - t.dim();
  Shape st(static_cast<size_t>(nd), 0);
  for (int64_t d = off; d < nd; ++d) st[d] = t.sizes()[d - off] == 1 ? 0 : t.strides()[d - off];
  return make_view(t, sizes, st, t.storage_offset());
}

void masked_select_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor &x = c.in(0), &mask = c.in(1);
  KILN_CHECK(mask.dtype() == kBool, c.name(), ": expected a bool mask, got ", mask.dtype());
  Shape bs = broadcast_shapes(x.sizes(), mask.sizes(), c.name());
  Tensor m = contig(broadcast_view(mask, bs));
  Tensor xv = broadcast_view(x, bs);
  int64_t n = compute_numel(bs);
  const bool* mp = m.data_ptr<bool>();
  MaskChunks ch = count_mask(mp, n);
  Tensor out = make_tensor(Shape{ch.total}, x.dtype(), x.device());
  outs.push_back(out);
  if (ch.total == 0) return;
  Cols<2> cols;  // 0: linear position (mask), 1: x offset
  Shape lin = contiguous_strides(bs);
  for (size_t d = 0; d < bs.size(); ++d) cols.add(bs[d], {lin[d], xv.strides()[d]});
  cols.coalesce();
  size_t es = x.element_size();
  const char* xp = static_cast<const char*>(xv.data_ptr());
  char* op = static_cast<char*>(out.data_ptr());
  parallel_for(0, ch.nchunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      int64_t w = ch.start[k];
      cols.walk(k * ch.chunk, std::min(n, (k + 1) * ch.chunk), [&](const std::array<int64_t, 2>& o, int64_t len) {
        for (int64_t i = 0; i < len; ++i)
          if (mp[o[0] + i * cols.inner(0)])
            std::memcpy(op + (w++) * int64_t(es), xp + (o[1] + i * cols.inner(1)) * int64_t(es), es);
      });
    }
  });
}
KILN_REGISTER_KERNEL(masked_select, CPU, masked_select_kernel);

void nonzero_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& x = c.in(0);
  Tensor m = contig(cast_to(x, kBool));
  int64_t n = x.numel(), nd = x.dim();
  const bool* mp = m.data_ptr<bool>();
  MaskChunks ch = count_mask(mp, n);
  Tensor out = make_tensor(Shape{ch.total, nd}, kInt64, x.device());
  outs.push_back(out);
  if (ch.total == 0 || nd == 0) return;
  int64_t* op = out.data_ptr<int64_t>();
  IntArrayRef sizes = x.sizes();
  parallel_for(0, ch.nchunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      int64_t w = ch.start[k], lo = k * ch.chunk, hi = std::min(n, lo + ch.chunk);
      // Coordinates of `lo`, then advanced like an odometer.
      Shape coord(static_cast<size_t>(nd));
      for (int64_t d = nd - 1, r = lo; d >= 0; --d) {
        coord[d] = r % sizes[d];
        r /= sizes[d];
      }
      for (int64_t i = lo; i < hi; ++i) {
        if (mp[i]) {
          std::copy(coord.begin(), coord.end(), op + w * nd);
          ++w;
        }
        for (int64_t d = nd - 1; d >= 0; --d) {
          if (++coord[d] < sizes[d]) break;
          coord[d] = 0;
        }
      }
    }
  });
}
KILN_REGISTER_KERNEL(nonzero, CPU, nonzero_kernel);

}  // namespace
}  // namespace kiln::cpu
