// CUDA kernels for gather, scatter_add, scatter_reduce, histc and bincount (elementwise.cu's
// launch_gather/launch_scatter_add/launch_scatter_reduce/launch_histc/launch_bincount).
//
// Note [CUDA gather]
// Both walk the index tensor's elements. The tensor addressed by index values is viewed with
// the index's sizes and a zero stride along `dim`; the kernel adds value * its real stride.
// An index out of range is flagged on the device and raised here after the launch (one
// synchronization per call, as the CPU kernels raise the same error; a device-side assert
// would avoid it but would poison the context).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/sort.h"
#include "core/dtype_dispatch.h"
#include "dispatch/dispatch.h"
#include "ops/indexing.h"
#include "ops/registry.h"

namespace kiln::cuda {
namespace {

// A 0-d tensor as a 1-d tensor of one element (the CPU kernels' sizes_1d).
Tensor as_1d(const Tensor& t) { return t.dim() == 0 ? make_view(t, {1}, {1}, t.storage_offset()) : t; }

Tensor index_int64(const Tensor& index) {
  if (index.dtype() == DType::Int64) return as_1d(index);
  Tensor i = make_tensor(index.sizes(), DType::Int64, index.device());
  copy_same_device(i, index);
  return as_1d(i);
}

// `t` seen with the index's sizes, its own strides, and stride 0 along dim if `indexed`.
Tensor with_index_sizes(const Tensor& t, const Tensor& index, int64_t dim, bool indexed) {
  Shape strides(t.strides().begin(), t.strides().end());
  if (indexed) strides[static_cast<size_t>(dim)] = 0;
  return make_view(t, index.sizes(), strides, t.storage_offset());
}

// Runs `launch` with a zeroed two-int64 flag and raises the first bad index it reports.
template <class F>
void with_bad_index_check(const char* op, int64_t dim, int64_t size, const Device& dev, const F& launch) {
  cudaStream_t s = current_cuda_stream(dev.index);
  Tensor bad = make_tensor({2}, DType::Int64, dev);
  launch_fill(make_elementwise_args({&bad}), 0.0, 0, true, s);
  launch(reinterpret_cast<int64_t*>(bad.unsafe_impl()->data()), s);
  if (stream_capturing(s)) {  // Note [Checks while capturing]
    launch_assert_flag(reinterpret_cast<const int64_t*>(bad.unsafe_impl()->data()), 0,
                       std::string(op) + ": an index is out of bounds for dimension " + std::to_string(dim) +
                           " with size " + std::to_string(size),
                       s);
    return;
  }
  int64_t host[2] = {0, 0};
  KILN_CUDA_CHECK(cudaMemcpyAsync(host, bad.unsafe_impl()->data(), sizeof host, cudaMemcpyDeviceToHost, s),
                  "cudaMemcpyAsync (device to host)");
  KILN_CUDA_CHECK(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  KILN_CHECK(host[0] == 0, op, ": index ", host[1], " is out of bounds for dimension ", dim, " with size ", size);
}

void gather_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  if (outs[0].numel() == 0) return;
  Tensor x = as_1d(c.in(0)), out = as_1d(outs[0]);
  DeviceGuard g(out.device().index);
  int64_t dim = wrap_dim(c.attrs.i(0), x.dim(), c.name());
  Tensor idx = index_int64(c.in(1));
  Tensor xv = with_index_sizes(x, idx, dim, true);
  ElementwiseArgs a = make_elementwise_args({&out, &idx, &xv});
  int64_t stride = x.stride(dim) * static_cast<int64_t>(itemsize(x.dtype())), size = x.size(dim);
  with_bad_index_check(c.name(), dim, size, out.device(),
                       [&](int64_t* bad, cudaStream_t s) { launch_gather(a, stride, size, bad, s); });
}
KILN_REGISTER_KERNEL(gather, CUDA, gather_kernel);

void scatter_add_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  copy_same_device(outs[0], c.in(0));
  if (c.in(1).numel() == 0) return;
  Tensor out = as_1d(outs[0]), src = as_1d(c.in(2));
  DeviceGuard g(out.device().index);
  int64_t dim = wrap_dim(c.attrs.i(0), out.dim(), c.name());
  Tensor idx = index_int64(c.in(1));
  Tensor ov = with_index_sizes(out, idx, dim, true), sv = with_index_sizes(src, idx, dim, false);
  if (sv.dtype() != ov.dtype()) {
    Tensor conv = make_tensor(sv.sizes(), ov.dtype(), ov.device());
    copy_same_device(conv, sv);
    sv = conv;
  }
  ElementwiseArgs a = make_elementwise_args({&ov, &idx, &sv});
  int64_t stride = out.stride(dim) * static_cast<int64_t>(itemsize(out.dtype())), size = out.size(dim);
  with_bad_index_check(c.name(), dim, size, out.device(),
                       [&](int64_t* bad, cudaStream_t s) { launch_scatter_add(a, stride, size, bad, s); });
}
KILN_REGISTER_KERNEL(scatter_add, CUDA, scatter_add_kernel);

// Note [CUDA scatter_reduce]
// out = x, then (without include_self) the scattered-to elements set to the reduction's
// identity, then each src element reduced into its target by a compare-and-swap loop in the
// CPU's accumulator type (reduce_step of backend/cpu/indexing.cpp: NaN propagates through
// amax/amin). amax/amin and integer sum/prod are exact and deterministic; floating sum, prod and
// mean combine in the order the threads arrive, so their rounding may differ run to run and
// from the CPU's, as PyTorch's CUDA scatter_reduce (atomics) does. Mean counts the values per
// element with an int64 scatter_add (self once when included) and divides after, as the CPU.
void scatter_reduce_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  copy_same_device(outs[0], c.in(0));
  if (c.in(1).numel() == 0 || outs[0].numel() == 0) return;
  const std::string& r = c.attrs.str(1);
  const bool include_self = c.attrs.b(2), mean = r == "mean";
  const ScatterReduce red = r == "sum" || mean ? ScatterReduce::Sum
                            : r == "prod"      ? ScatterReduce::Prod
                            : r == "amax"      ? ScatterReduce::Max
                                               : ScatterReduce::Min;
  Tensor out = as_1d(outs[0]), src = as_1d(c.in(2));
  const Device dev = out.device();
  DeviceGuard g(dev.index);
  cudaStream_t s = current_cuda_stream(dev.index);
  int64_t dim = wrap_dim(c.attrs.i(0), out.dim(), c.name());
  Tensor idx = index_int64(c.in(1));
  Tensor ov = with_index_sizes(out, idx, dim, true), sv = with_index_sizes(src, idx, dim, false);
  if (sv.dtype() != ov.dtype()) sv = dense_as(sv, ov.dtype());  // the meta function requires one dtype
  ElementwiseArgs a = make_elementwise_args({&ov, &idx, &sv});
  const int64_t stride = out.stride(dim) * static_cast<int64_t>(itemsize(out.dtype())), size = out.size(dim);
  // Without self: the identity (the CPU's reduce_identity) stored at every scattered-to element first.
  Tensor ident;
  ElementwiseArgs ia;
  if (!include_self) {
    ident = make_tensor(idx.sizes(), out.dtype(), dev);
    double fv = 0.0;
    int64_t iv = red == ScatterReduce::Prod ? 1 : 0;
    bool is_int = true;
    if (red == ScatterReduce::Max || red == ScatterReduce::Min) {
      const bool mx = red == ScatterReduce::Max;
      if (is_floating_point(out.dtype())) {
        is_int = false;
        fv = mx ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
      } else {
        visit_dtype(out.dtype(), [&]<class T>() {
          if constexpr (std::is_integral_v<T>)
            iv = mx ? static_cast<int64_t>(std::numeric_limits<T>::lowest())
                    : static_cast<int64_t>(std::numeric_limits<T>::max());
        });
      }
    }
    launch_fill(make_elementwise_args({&ident}), fv, iv, is_int, s);
    ia = make_elementwise_args({&ov, &idx, &ident});
  }
  Tensor count, cv, ones;
  ElementwiseArgs ca, da;
  int64_t cstride = 0;
  if (mean) {
    count = make_tensor(out.sizes(), DType::Int64, dev);
    launch_fill(make_elementwise_args({&count}), 0.0, include_self ? 1 : 0, true, s);
    cv = with_index_sizes(count, idx, dim, true);
    ones = make_tensor(idx.sizes(), DType::Int64, dev);
    launch_fill(make_elementwise_args({&ones}), 0.0, 1, true, s);
    ca = make_elementwise_args({&cv, &idx, &ones});
    cstride = count.stride(dim) * static_cast<int64_t>(sizeof(int64_t));
    da = make_elementwise_args({&out, &out, &count});
  }
  with_bad_index_check(c.name(), dim, size, dev, [&](int64_t* bad, cudaStream_t st) {
    if (!include_self) launch_scatter_add(ia, stride, size, bad, st, /*accumulate=*/false);
    launch_scatter_reduce(a, red, stride, size, bad, st);
    if (mean) {
      launch_scatter_add(ca, cstride, size, bad, st);
      launch_mean_divide(da, st);
    }
  });
}
KILN_REGISTER_KERNEL(scatter_reduce, CUDA, scatter_reduce_kernel);

double float_from_order_key(uint64_t k) {
  const uint64_t u = (k >> 63) ? k & ~(uint64_t(1) << 63) : ~k;
  double v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

// histc: counts in int64 by atomics (exact and deterministic), converted to the output's dtype as
// the CPU kernel does. With min == max the range is the input's (the CPU's aminmax: NaN makes it
// NaN, and so an error), read back from the device, as PyTorch's CUDA histc syncs for it too.
// Non-floating inputs and a bin count the CPU refuses go through the CPU kernel for its errors.
void histc_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& x = c.in(0);
  const int64_t bins = c.attrs.i(0), n = x.numel();
  double lo = c.attrs.s(1).to_double(), hi = c.attrs.s(2).to_double();
  if (!is_floating_point(x.dtype()) || bins < 1 || outs[0].numel() != bins) return staged_on_cpu(c, outs);
  const Device dev = x.device();
  DeviceGuard g(dev.index);
  cudaStream_t s = current_cuda_stream(dev.index);
  Tensor xc = dense_as(x, x.dtype());
  if (lo == hi && n > 0) {
    uint64_t host[3] = {~uint64_t(0), 0, 0};
    Tensor keys = make_tensor({3}, DType::Int64, dev);
    auto* kp = reinterpret_cast<uint64_t*>(keys.unsafe_impl()->data());
    KILN_CUDA_CHECK(cudaMemcpyAsync(kp, host, sizeof host, cudaMemcpyHostToDevice, s),
                    "cudaMemcpyAsync (host to device)");
    launch_float_min_max(x.dtype(), xc.unsafe_impl()->data(), n, kp, s);
    KILN_CUDA_CHECK(cudaMemcpyAsync(host, kp, sizeof host, cudaMemcpyDeviceToHost, s),
                    "cudaMemcpyAsync (device to host)");
    KILN_CUDA_CHECK(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    if (host[2] != 0) {
      lo = hi = std::numeric_limits<double>::quiet_NaN();
    } else {
      lo = float_from_order_key(host[0]);
      hi = float_from_order_key(host[1]);
    }
  }
  if (lo == hi) lo -= 1, hi += 1;
  KILN_CHECK(std::isfinite(lo) && std::isfinite(hi), "histc: range of [", lo, ", ", hi, "] is not finite");
  KILN_CHECK(lo < hi, "histc: max must be larger than min, got min ", lo, " and max ", hi);
  Tensor count = make_tensor({bins}, DType::Int64, dev);
  KILN_CUDA_CHECK(cudaMemsetAsync(count.unsafe_impl()->data(), 0, count.nbytes(), s), "cudaMemsetAsync");
  launch_histc(x.dtype(), xc.unsafe_impl()->data(), n, bins, lo, hi, count.unsafe_impl()->data(), s);
  copy_same_device(outs[0], count);
}
KILN_REGISTER_KERNEL(histc, CUDA, histc_kernel);

// bincount: the input's min and max read back (the output's length depends on them, as
// PyTorch's CUDA bincount syncs too), then int64 counts by atomics (exact). With weights the sums
// are the CPU's bit for bit, deterministic: a stable sort of the input puts each bin's elements
// together in their original order, and one thread per bin adds its weights in that order (in
// float32 for float32 weights, else float64, as the CPU), from the counts' prefix sums. Errors (a
// negative value: the CPU names the first) go through the CPU kernel for its messages.
void bincount_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor &x = c.in(0), &w = c.in(1);
  const int64_t minlength = c.attrs.i(0), n = x.numel();
  if (!is_integral(x.dtype()) || x.dim() != 1 || minlength < 0 || n >= (int64_t(1) << 31) ||
      (w.defined() && (w.dim() != 1 || w.numel() != n)))
    return staged_on_cpu(c, outs);
  const Device dev = x.device();
  DeviceGuard g(dev.index);
  cudaStream_t s = current_cuda_stream(dev.index);
  Tensor xc = dense_as(x, x.dtype());
  int64_t len = minlength;
  if (n > 0) {
    Tensor mm = make_tensor({2}, DType::Int64, dev);
    launch_fill(make_elementwise_args({&mm}), 0.0, std::numeric_limits<int64_t>::max(), true, s);
    Tensor hi_part = make_view(mm, {1}, {1}, mm.storage_offset() + 1);
    launch_fill(make_elementwise_args({&hi_part}), 0.0, std::numeric_limits<int64_t>::min(), true, s);
    auto* mmp = reinterpret_cast<int64_t*>(mm.unsafe_impl()->data());
    launch_int_min_max(x.dtype(), xc.unsafe_impl()->data(), n, mmp, s);
    int64_t host[2] = {0, 0};
    KILN_CUDA_CHECK(cudaMemcpyAsync(host, mmp, sizeof host, cudaMemcpyDeviceToHost, s),
                    "cudaMemcpyAsync (device to host)");
    KILN_CUDA_CHECK(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    if (host[0] < 0) return staged_on_cpu(c, outs);  // raises the CPU's error
    len = std::max(len, host[1] + 1);
  }
  auto i64 = [](const Tensor& t) { return reinterpret_cast<int64_t*>(t.unsafe_impl()->data()); };
  Tensor count = make_tensor({len}, DType::Int64, dev);
  KILN_CUDA_CHECK(cudaMemsetAsync(count.unsafe_impl()->data(), 0, count.nbytes(), s), "cudaMemsetAsync");
  launch_bincount(x.dtype(), xc.unsafe_impl()->data(), n, i64(count), s);
  if (!w.defined()) {
    outs = {count};
    return;
  }
  const DType out_t = w.dtype() == DType::Float32 ? DType::Float32 : DType::Float64;
  Tensor wc = dense_as(w, out_t);  // the CPU's cast_to: the same conversion
  Tensor out = make_tensor({len}, out_t, dev);
  Tensor perm = make_tensor({n}, DType::Int64, dev), ends = make_tensor({len}, DType::Int64, dev);
  if (n > 0) {
    Tensor sorted = make_tensor({n}, x.dtype(), dev);
    const size_t bytes = sort_rows_workspace(x.dtype(), 1, n, false);
    Tensor ws = make_tensor({static_cast<int64_t>(bytes)}, DType::UInt8, dev);
    launch_sort_rows(x.dtype(), xc.unsafe_impl()->data(), sorted.unsafe_impl()->data(), i64(perm), 1, n, n, false,
                     ws.unsafe_impl()->data(), bytes, s);
  }
  if (len > 0) {
    const size_t bytes = inclusive_sum_workspace(len);
    Tensor ws = make_tensor({static_cast<int64_t>(std::max<size_t>(bytes, 1))}, DType::UInt8, dev);
    launch_inclusive_sum(i64(count), i64(ends), len, ws.unsafe_impl()->data(), bytes, s);
  }
  launch_segment_sums(out_t, wc.unsafe_impl()->data(), i64(perm), i64(count), i64(ends), len, out.unsafe_impl()->data(),
                      s);
  outs = {out};
}
KILN_REGISTER_KERNEL(bincount, CUDA, bincount_kernel);

// Note [CUDA advanced indexing]
// Several index tensors (a bool mask of several dims arrives as several: kiln::index turns
// masks into nonzero's columns) become one: x's indexed dims are moved together (a view;
// where they are not adjacent they go first, as the result's layout has it), made dense and
// merged into one dim, and the index tensors are read back, broadcast, checked and combined
// into one linear index on the host (one synchronization, as the one-index path's bounds check).
struct Linearized {
  int64_t pos = 0;       // the merged dim's position
  Shape perm;            // x's dims in the merged tensor's order
  Shape merged;          // the merged tensor's sizes
  Tensor index;          // int64 [bshape] on the device
  bool identity = true;  // perm is x's own order
};

Linearized linearize(const OpCall& c, const Tensor& x, size_t first) {
  IndexPlan p = plan_index(x.sizes(), c.inputs.subspan(first), c.name());
  Linearized l;
  for (int64_t d : p.pre) l.perm.push_back(d);
  for (int64_t d : p.dims) l.perm.push_back(d);
  for (int64_t d : p.post) l.perm.push_back(d);
  for (size_t i = 0; i < l.perm.size(); ++i) l.identity = l.identity && l.perm[i] == static_cast<int64_t>(i);
  l.pos = static_cast<int64_t>(p.pre.size());
  int64_t m = 1;
  for (int64_t d : p.dims) m *= x.size(d);
  for (int64_t d : p.pre) l.merged.push_back(x.size(d));
  l.merged.push_back(m);
  for (int64_t d : p.post) l.merged.push_back(x.size(d));
  // The index tensors on the host, int64 and dense.
  std::vector<std::vector<int64_t>> host;
  for (const Tensor& t : p.indices) {
    Tensor h = make_tensor(t.sizes(), DType::Int64, kCPU);
    get_backend(t.is_cpu() ? DeviceType::CPU : DeviceType::CUDA)->copy(h, t);
    const int64_t* v = static_cast<const int64_t*>(h.data_ptr());
    host.emplace_back(v, v + h.numel());
  }
  const int64_t nb = static_cast<int64_t>(p.bshape.size());
  int64_t total = 1;
  for (int64_t s : p.bshape) total *= s;
  // Each index tensor's strides against bshape (right-aligned, 0 where broadcast).
  std::vector<Shape> strides;
  for (const Tensor& t : p.indices) {
    Shape st(static_cast<size_t>(nb), 0);
    int64_t acc = 1;
    for (int64_t d = t.dim() - 1; d >= 0; --d) {
      if (t.size(d) != 1) st[static_cast<size_t>(nb - t.dim() + d)] = acc;
      acc *= t.size(d);
    }
    strides.push_back(st);
  }
  std::vector<int64_t> linear(static_cast<size_t>(total));
  Shape at(static_cast<size_t>(nb), 0);
  for (int64_t i = 0; i < total; ++i) {
    int64_t v = 0;
    for (size_t j = 0; j < p.indices.size(); ++j) {
      int64_t off = 0;
      for (int64_t d = 0; d < nb; ++d) off += at[static_cast<size_t>(d)] * strides[j][static_cast<size_t>(d)];
      const int64_t size = x.size(p.dims[j]);
      int64_t k = host[j][static_cast<size_t>(off)];
      KILN_CHECK(k >= -size && k < size, c.name(), ": index ", k, " is out of bounds for dimension ", p.dims[j],
                 " with size ", size);
      v = v * size + (k < 0 ? k + size : k);
    }
    linear[static_cast<size_t>(i)] = v;
    for (int64_t d = nb - 1; d >= 0; --d) {  // the next position of bshape
      if (++at[static_cast<size_t>(d)] < p.bshape[static_cast<size_t>(d)]) break;
      at[static_cast<size_t>(d)] = 0;
    }
  }
  Tensor h = make_tensor(p.bshape, DType::Int64, kCPU);
  std::copy(linear.begin(), linear.end(), static_cast<int64_t*>(h.data_ptr()));
  l.index = make_tensor(p.bshape, DType::Int64, x.device());
  get_backend(DeviceType::CUDA)->copy(l.index, h);
  return l;
}

// x's dims in l's order (a view).
Tensor permuted(const Tensor& x, const Linearized& l) {
  Shape sizes, strides;
  for (int64_t d : l.perm) sizes.push_back(x.size(d)), strides.push_back(x.stride(d));
  return make_view(x, sizes, strides, x.storage_offset());
}
// A dense tensor in l's order seen with the indexed dims merged.
Tensor merged_view(const Tensor& dense, const Linearized& l) {
  Shape strides(l.merged.size(), 1);
  for (int64_t i = static_cast<int64_t>(l.merged.size()) - 2; i >= 0; --i)
    strides[static_cast<size_t>(i)] = strides[static_cast<size_t>(i) + 1] * l.merged[static_cast<size_t>(i) + 1];
  return make_view(dense, l.merged, strides, dense.storage_offset());
}

int64_t index_count(const OpCall& c, size_t first) {
  int64_t n = 0;
  for (size_t i = first; i < c.inputs.size(); ++i) n += c.in(i).defined() ? 1 : 0;
  return n;
}

// The one integer index tensor of index/index_put (inputs from `first`): its position among
// x's dims, or an error naming what is not supported yet.
int64_t single_index(const OpCall& c, size_t first) {
  int64_t pos = -1;
  for (size_t i = first; i < c.inputs.size(); ++i) {
    if (!c.in(i).defined()) continue;
    KILN_CHECK(pos < 0, c.name(), ": internal: more than one index tensor");
    pos = static_cast<int64_t>(i - first);
  }
  KILN_CHECK(pos >= 0, c.name(), ": no index tensor");
  const Tensor& index = c.in(first + static_cast<size_t>(pos));
  KILN_CHECK(is_integral(index.dtype()), c.name(), ": not supported yet on cuda with a ", index.dtype(),
             " index (boolean masks)");
  return pos;
}

// x[..., idx, ...] and the index, seen with the indexing result's sizes `r` (x's dims before
// pos, the index's dims, x's dims after pos): x with stride 0 over the index's dims, the index
// with stride 0 over x's.
std::pair<Tensor, Tensor> index_views(const Tensor& x, const Tensor& index, int64_t pos, IntArrayRef r) {
  Tensor idx = index_int64(index);
  if (index.dim() == 0) idx = make_view(idx, {}, {}, idx.storage_offset());  // a 0-d index drops the dim
  Shape xs, is;
  for (int64_t d = 0; d < pos; ++d) xs.push_back(x.stride(d)), is.push_back(0);
  for (int64_t d = 0; d < idx.dim(); ++d) xs.push_back(0), is.push_back(idx.stride(d));
  for (int64_t d = pos + 1; d < x.dim(); ++d) xs.push_back(x.stride(d)), is.push_back(0);
  return {make_view(x, r, xs, x.storage_offset()), make_view(idx, r, is, idx.storage_offset())};
}

// x[l.index] along dim pos of x (a merged view or x itself) into out: a gather.
// A CPU index (a 0-d one may come with CUDA tensors, as common_device allows) on `dev`.
Tensor on_device(const Tensor& index, const Device& dev) {
  if (!index.is_cpu()) return index;
  Tensor d = make_tensor(index.sizes(), index.dtype(), dev);
  get_backend(DeviceType::CUDA)->copy(d, index);
  return d;
}

void gather_index(const OpCall& c, const Tensor& x, const Tensor& index_in, int64_t pos, const Tensor& out) {
  Tensor index = on_device(index_in, out.device());
  auto [xv, iv] = index_views(x, index, pos, out.sizes());
  ElementwiseArgs a = make_elementwise_args({&out, &iv, &xv});
  int64_t stride = x.stride(pos) * static_cast<int64_t>(itemsize(x.dtype())), size = x.size(pos);
  with_bad_index_check(c.name(), pos, size, out.device(), [&](int64_t* bad, cudaStream_t s) {
    launch_gather(a, stride, size, bad, s, /*wrap_negative=*/true);
  });
}

// index (x[idx], embedding, index_select, x[i, j], x[mask]): a gather with x's stride along
// the indexed dim; negative indices wrap. Several index tensors: Note [CUDA advanced indexing].
void index_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor &x = c.in(0), &out = outs[0];
  DeviceGuard g(out.device().index);
  if (index_count(c, 1) > 1) {
    Linearized l = linearize(c, x, 1);
    if (out.numel() == 0) return;
    Tensor xp = permuted(x, l);
    Tensor xd = make_tensor(xp.sizes(), x.dtype(), x.device());
    copy_same_device(xd, xp);
    gather_index(c, merged_view(xd, l), l.index, l.pos, out);
    return;
  }
  int64_t pos = single_index(c, 1);
  if (out.numel() == 0) return;
  gather_index(c, x, c.in(1 + static_cast<size_t>(pos)), pos, out);
}
KILN_REGISTER_KERNEL(index, CUDA, index_kernel);

// out[index] = values (or += with accumulate) along dim pos of out (a merged view or out itself).
void put_index(const OpCall& c, const Tensor& out, const Tensor& index_in, int64_t pos) {
  Tensor index = on_device(index_in, out.device());
  Shape r;
  for (int64_t d = 0; d < pos; ++d) r.push_back(out.size(d));
  for (int64_t d = 0; d < index.dim(); ++d) r.push_back(index.size(d));
  for (int64_t d = pos + 1; d < out.dim(); ++d) r.push_back(out.size(d));
  auto [ov, iv] = index_views(out, index, pos, r);
  // values broadcast to r, in out's dtype.
  Tensor vals = c.in(1);
  if (vals.dtype() != out.dtype() || vals.device() != out.device()) {
    Tensor v = make_tensor(vals.sizes(), out.dtype(), out.device());
    get_backend(DeviceType::CUDA)->copy(v, vals);
    vals = v;
  }
  Shape vs(r.size(), 0);
  for (int64_t i = 0; i < vals.dim(); ++i) {
    size_t di = r.size() - static_cast<size_t>(vals.dim()) + static_cast<size_t>(i);
    if (vals.size(i) != 1) vs[di] = vals.stride(i);
  }
  Tensor vv = make_view(vals, r, vs, vals.storage_offset());
  ElementwiseArgs a = make_elementwise_args({&ov, &iv, &vv});
  int64_t stride = out.stride(pos) * static_cast<int64_t>(itemsize(out.dtype())), size = out.size(pos);
  bool acc = c.attrs.b(0);
  with_bad_index_check(c.name(), pos, size, out.device(), [&](int64_t* bad, cudaStream_t s) {
    launch_scatter_add(a, stride, size, bad, s, acc, /*wrap_negative=*/true);
  });
}

// index_put (x, values, indices...; accumulate): out = x with out[idx] = values (or += with
// accumulate, the backward of index). Several index tensors: Note [CUDA advanced indexing].
void index_put_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& out = outs[0];
  copy_same_device(out, c.in(0));
  DeviceGuard g(out.device().index);
  if (index_count(c, 2) > 1) {
    Linearized l = linearize(c, out, 2);
    if (l.index.numel() == 0 || out.numel() == 0) return;
    // out is a fresh dense tensor: in x's order it merges in place; else through a dense copy.
    Tensor op = permuted(out, l);
    Tensor dense = op;
    if (!l.identity) {
      dense = make_tensor(op.sizes(), out.dtype(), out.device());
      copy_same_device(dense, op);
    }
    put_index(c, merged_view(dense, l), l.index, l.pos);
    if (!l.identity) copy_same_device(op, dense);
    return;
  }
  int64_t pos = single_index(c, 2);
  const Tensor& index = c.in(2 + static_cast<size_t>(pos));
  if (index.numel() == 0 || out.numel() == 0) return;
  put_index(c, out, index, pos);
}
KILN_REGISTER_KERNEL(index_put, CUDA, index_put_kernel);

}  // namespace
}  // namespace kiln::cuda
