// The CUDA backend: copies between host and device (Backend::copy), synchronize, what
// `kiln info` prints, and the factory kernels.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/host_allocator.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/random.h"
#include "backend/cuda/sort.h"
#include "dispatch/dispatch.h"
#include "kiln/cuda.h"

namespace kiln::cuda {

namespace {
// Sets each input's period (Operand::period) when the output is dense and every input is dense,
// a broadcast number, or a broadcast row (a bias over the rows); false otherwise.
bool broadcast_periods(ElementwiseArgs& a) {
  if (a.ndim < 1 || a.ndim > 2) return false;
  auto dense = [&](const Operand& o) {
    const int64_t isz = static_cast<int64_t>(itemsize(o.dtype));
    return o.strides[a.ndim - 1] == isz && (a.ndim == 1 || o.strides[0] == a.sizes[1] * isz);
  };
  if (!dense(a.ops[0])) return false;
  for (int k = 1; k < a.nops; ++k) {
    Operand& o = a.ops[k];
    const int64_t isz = static_cast<int64_t>(itemsize(o.dtype));
    if (dense(o))
      o.period = 0;
    else if (o.strides[0] == 0 && (a.ndim == 1 || o.strides[1] == 0))
      o.period = 1;
    else if (a.ndim == 2 && o.strides[0] == 0 && o.strides[1] == isz)
      o.period = a.sizes[1];
    else
      return false;
  }
  return true;
}
}  // namespace

ElementwiseArgs make_elementwise_args(std::initializer_list<const Tensor*> ops) {
  ElementwiseArgs a;
  const Tensor& out = **ops.begin();
  a.nops = static_cast<int>(ops.size());
  a.numel = out.numel();
  KILN_CHECK(out.dim() <= kMaxDims, "CUDA: at most ", kMaxDims, " dims are supported, got ", out.dim());
  // Collapse dims: an outer dim merges with the next inner one when, for every operand,
  // stepping the outer dim equals stepping the inner one size times (fewer index divisions).
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> strides(ops.size());
  for (int64_t d = 0; d < out.dim(); ++d) {
    if (out.size(d) == 1) continue;  // contributes nothing to any offset
    bool merge = !sizes.empty();
    size_t k = 0;
    for (const Tensor* t : ops) {
      int64_t st = t->stride(d) * static_cast<int64_t>(itemsize(t->dtype()));
      if (merge && strides[k].back() != st * out.size(d)) merge = false;
      ++k;
    }
    k = 0;
    for (const Tensor* t : ops) {
      int64_t st = t->stride(d) * static_cast<int64_t>(itemsize(t->dtype()));
      if (merge)
        strides[k].back() = st;
      else
        strides[k].push_back(st);
      ++k;
    }
    if (merge)
      sizes.back() *= out.size(d);
    else
      sizes.push_back(out.size(d));
  }
  a.ndim = static_cast<int>(sizes.size());
  std::copy(sizes.begin(), sizes.end(), a.sizes);
  size_t k = 0;
  int64_t max_offset = a.numel;
  a.contiguous = a.ndim <= 1;
  for (const Tensor* t : ops) {
    KILN_CHECK(t->has_storage(), "CUDA: a kernel got a tensor without storage");
    a.ops[k].data = static_cast<char*>(t->unsafe_impl()->data());
    a.ops[k].dtype = t->dtype();
    int64_t span = 0;
    for (int d = 0; d < a.ndim; ++d) {
      a.ops[k].strides[d] = strides[k][static_cast<size_t>(d)];
      span += (a.sizes[d] - 1) * std::abs(a.ops[k].strides[d]);
    }
    max_offset = std::max(max_offset, span + 1);
    if (a.ndim == 1 && a.ops[k].strides[0] != static_cast<int64_t>(itemsize(t->dtype()))) a.contiguous = false;
    ++k;
  }
  if (a.ndim == 0) a.contiguous = true;
  a.dense_or_broadcast = a.contiguous || broadcast_periods(a);
  a.index32 = max_offset < (int64_t(1) << 31);
  // Signed strides (flip) need the signed path.
  for (int i = 0; i < a.nops; ++i)
    for (int d = 0; d < a.ndim; ++d)
      if (a.ops[i].strides[d] < 0) a.index32 = false;
  return a;
}

void copy_same_device(const Tensor& dst, const Tensor& src) {
  DeviceGuard g(dst.device().index);
  cudaStream_t s = current_cuda_stream(dst.device().index);
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    KILN_CUDA_CHECK(cudaMemcpyAsync(dst.unsafe_impl()->data(), src.unsafe_impl()->data(), dst.nbytes(),
                                    cudaMemcpyDeviceToDevice, s),
                    "cudaMemcpyAsync (device to device)");
    return;
  }
  launch_copy(make_elementwise_args({&dst, &src}), s);
}

Tensor dense_as(const Tensor& t, DType dt) {
  if (t.is_contiguous() && t.dtype() == dt) return t;
  Tensor c = make_tensor(t.sizes(), dt, t.device());
  copy_same_device(c, t);
  return c;
}

namespace {

Tensor contiguous_like(const Tensor& t, DType dtype, Device device) { return make_tensor(t.sizes(), dtype, device); }

// Note [CUDA copies]: the DMA engines move dense bytes; strides and dtype conversions are done
// by a kernel on the device side, or by the CPU copy on the host side, through a contiguous
// staging tensor. Copies to the host wait for the stream (the caller reads the values next);
// copies from pageable host memory return once the source has been staged by the driver.
void copy_h2d(const Tensor& dst, const Tensor& src) {
  Tensor host = src;
  if (!src.is_contiguous() || src.dtype() != dst.dtype()) {
    host = contiguous_like(dst, dst.dtype(), kCPU);
    get_backend(DeviceType::CPU)->copy(host, src);
  }
  int d = dst.device().index;
  DeviceGuard g(d);
  Tensor dev = dst.is_contiguous() ? dst : contiguous_like(dst, dst.dtype(), dst.device());
  KILN_CUDA_CHECK(cudaMemcpyAsync(dev.unsafe_impl()->data(), host.unsafe_impl()->data(), dev.nbytes(),
                                  cudaMemcpyHostToDevice, current_cuda_stream(d)),
                  "cudaMemcpyAsync (host to device)");
  // From pinned memory the copy is asynchronous: the block stays reserved until it is done
  // (Note [Pinned host memory]); from pageable memory the driver staged it before returning.
  if (host.is_pinned()) record_host_use(*host.unsafe_impl()->storage, current_cuda_stream(d));
  if (!dst.is_contiguous()) copy_same_device(dst, dev);
}

void copy_d2h(const Tensor& dst, const Tensor& src) {
  int d = src.device().index;
  DeviceGuard g(d);
  Tensor dev = src;
  if (!src.is_contiguous() || src.dtype() != dst.dtype()) {
    dev = contiguous_like(src, dst.dtype(), src.device());
    copy_same_device(dev, src);
  }
  Tensor host = dst.is_contiguous() ? dst : contiguous_like(dst, dst.dtype(), kCPU);
  cudaStream_t s = current_cuda_stream(d);
  KILN_CUDA_CHECK(
      cudaMemcpyAsync(host.unsafe_impl()->data(), dev.unsafe_impl()->data(), host.nbytes(), cudaMemcpyDeviceToHost, s),
      "cudaMemcpyAsync (device to host)");
  // Note [Non-blocking copies]: into pinned memory, a non-blocking copy returns at once (the
  // caller synchronizes before reading); anything else waits, as the values are read next.
  if (host.is_same(dst) && dst.is_pinned() && non_blocking_copy()) {
    record_host_use(*dst.unsafe_impl()->storage, s);
    return;
  }
  KILN_CUDA_CHECK(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  if (!dst.is_contiguous()) get_backend(DeviceType::CPU)->copy(dst, host);
}

// Between two GPUs: dense bytes with cudaMemcpyPeerAsync, converted on the destination.
void copy_d2d_peer(const Tensor& dst, const Tensor& src) {
  Tensor from = src;
  if (!src.is_contiguous()) {
    from = contiguous_like(src, src.dtype(), src.device());
    copy_same_device(from, src);
  }
  Tensor to =
      (dst.is_contiguous() && dst.dtype() == src.dtype()) ? dst : contiguous_like(dst, src.dtype(), dst.device());
  int dd = dst.device().index, sd = src.device().index;
  {
    // The destination stream waits for the source's work: order through a synchronize of
    // the source stream (simple and correct; cross-device copies are rare).
    DeviceGuard g(sd);
    KILN_CUDA_CHECK(cudaStreamSynchronize(current_cuda_stream(sd)), "cudaStreamSynchronize");
  }
  DeviceGuard g(dd);
  KILN_CUDA_CHECK(cudaMemcpyPeerAsync(to.unsafe_impl()->data(), dd, from.unsafe_impl()->data(), sd, to.nbytes(),
                                      current_cuda_stream(dd)),
                  "cudaMemcpyPeerAsync");
  if (!to.is_same(dst)) copy_same_device(dst, to);
}

struct CudaBackend : Backend {
  const char* name() const override { return "cuda"; }
  void copy(const Tensor& dst, const Tensor& src) override {
    if (dst.numel() == 0) return;
    if (dst.is_cpu())
      copy_d2h(dst, src);
    else if (src.is_cpu())
      copy_h2d(dst, src);
    else if (dst.device() == src.device())
      copy_same_device(dst, src);
    else
      copy_d2d_peer(dst, src);
  }
  void synchronize() override {
    for (int d = 0; d < device_count(); ++d) kiln::cuda::synchronize(d);
  }
  std::vector<std::pair<std::string, std::string>> info() const override {
    std::vector<std::pair<std::string, std::string>> r;
    int n = device_count();
    r.emplace_back("devices", std::to_string(n));
    if (n == 0) {
      try {
        check_device();
      } catch (const Error& e) {
        r.emplace_back("status", e.what());
      }
    }
    for (int d = 0; d < n; ++d) {
      DeviceProperties p = get_device_properties(d);
      char mem[32];
      std::snprintf(mem, sizeof mem, "%.1f GiB", static_cast<double>(p.total_memory) / (1 << 30));
      r.emplace_back("cuda:" + std::to_string(d), p.name + ", " + mem + ", compute capability " +
                                                      std::to_string(p.major) + "." + std::to_string(p.minor) + ", " +
                                                      std::to_string(p.multi_processor_count) + " SMs");
    }
    int rt = 0;
    if (cudaRuntimeGetVersion(&rt) == cudaSuccess)
      r.emplace_back("runtime", std::to_string(rt / 1000) + "." + std::to_string(rt % 1000 / 10));
    r.emplace_back("cudnn", cudnn_info());
    return r;
  }
};

CudaBackend g_backend;
[[maybe_unused]] const bool registered = [] {
  register_backend(DeviceType::CUDA, &g_backend);
  return true;
}();

// ----- factory kernels

void empty_kernel(const OpCall&, std::vector<Tensor>&) {}

void full_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& out = outs[0];
  const Scalar& v = c.attrs.s(1);
  DeviceGuard g(out.device().index);
  bool is_int = !v.is_floating_point();
  launch_fill(make_elementwise_args({&out}), is_int ? 0.0 : v.to_double(), is_int ? v.to_long() : 0, is_int,
              current_cuda_stream(out.device().index));
}

// tril/triu_indices (and randperm beyond 2^31 elements): computed by the CPU kernel and uploaded,
// so the values are the CPU's exactly (seed and offset are attributes: the same Philox stream).
void via_cpu_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  KernelFn cpu = op_info(c.op).kernels[static_cast<int>(DeviceType::CPU)];
  KILN_CHECK(cpu, c.name(), ": not supported yet on cuda (no CPU kernel to stage through)");
  std::vector<Tensor> host{make_tensor(outs[0].sizes(), outs[0].dtype(), kCPU)};
  cpu(c, host);
  g_backend.copy(outs[0], host[0]);
}

}  // namespace

// Note [CUDA staged through the CPU]
// A few cases run the CPU kernel on downloaded inputs and upload the results: correct and the
// CPU's exactly, slow on large inputs. What is left of them, each a candidate for a device kernel:
// unique/unique_consecutive with a dim (slices compare whole; without one they run on the device,
// Note [CUDA unique]), unique and bincount over 2^31 elements or more (the sort's limit), and
// the error paths of bincount and histc (the CPU kernel raises its own message). Everything else of unique, bincount (weighted too: the CPU's sums in its order),
// histc and scatter_reduce (Note [CUDA scatter_reduce]) runs on the device.
void staged_on_cpu(const OpCall& c, std::vector<Tensor>& outs) {
  const OpInfo& info = op_info(c.op);
  KernelFn cpu = info.kernels[static_cast<int>(DeviceType::CPU)];
  KILN_CHECK(cpu, c.name(), ": not supported yet on cuda (no CPU kernel to stage through)");
  Device dev = kCPU;
  std::vector<Tensor> host_in;
  for (const Tensor& t : c.inputs) {
    if (!t.defined() || t.device().type != DeviceType::CUDA) {
      host_in.push_back(t);
      continue;
    }
    dev = t.device();
    Tensor h = make_tensor(t.sizes(), t.dtype(), kCPU);
    g_backend.copy(h, t);
    host_in.push_back(h);
  }
  std::vector<Tensor> host_out;
  for (const Tensor& o : outs) host_out.push_back(make_tensor(o.sizes(), o.dtype(), kCPU));
  cpu(OpCall{c.op, host_in, c.attrs}, host_out);
  if (info.has(DATA_DEPENDENT)) {
    outs.clear();
    for (const Tensor& h : host_out) {
      if (!h.defined()) {
        outs.push_back(h);
        continue;
      }
      outs.push_back(make_tensor(h.sizes(), h.dtype(), dev));
      g_backend.copy(outs.back(), h);
    }
    return;
  }
  for (size_t k = 0; k < outs.size(); ++k) g_backend.copy(outs[k], host_out[k]);
}

namespace {

KILN_REGISTER_KERNEL(empty, CUDA, empty_kernel);
KILN_REGISTER_KERNEL(full, CUDA, full_kernel);
// arange/linspace/eye on the device (random.cu): element i computed as the CPU kernel does
// (backend/cpu/creation.cpp), so the values are the CPU's exactly. The output is a factory's: dense.
void arange_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& out = outs[0];
  const Scalar &start = c.attrs.s(0), &step = c.attrs.s(2);
  const bool integral =
      (!start.is_floating_point() && !step.is_floating_point() && !c.attrs.s(1).is_floating_point()) ||
      is_integral(out.dtype());
  DeviceGuard g(out.device().index);
  launch_arange(out.dtype(), out.unsafe_impl()->data(), out.numel(), integral, integral ? start.to_long() : 0,
                integral ? step.to_long() : 0, integral ? 0.0 : start.to_double(), integral ? 0.0 : step.to_double(),
                current_cuda_stream(out.device().index));
}
void linspace_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& out = outs[0];
  const double a = c.attrs.f(0), z = c.attrs.f(1);
  const int64_t n = c.attrs.i(2);
  KILN_CHECK(out.numel() == n, "linspace: internal: output of ", out.numel(), " elements for ", n, " steps");
  const double step = n > 1 ? (z - a) / static_cast<double>(n - 1) : 0.0;  // on the host, as the CPU
  DeviceGuard g(out.device().index);
  launch_linspace(out.dtype(), out.unsafe_impl()->data(), n, a, z, step, current_cuda_stream(out.device().index));
}
void eye_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& out = outs[0];
  const int64_t n = c.attrs.i(0), m = c.attrs.i(1);
  KILN_CHECK(out.numel() == n * m, "eye: internal: output of ", out.numel(), " elements for ", n, " x ", m);
  DeviceGuard g(out.device().index);
  launch_eye(out.dtype(), out.unsafe_impl()->data(), n, m, current_cuda_stream(out.device().index));
}
KILN_REGISTER_KERNEL(arange, CUDA, arange_kernel);
KILN_REGISTER_KERNEL(linspace, CUDA, linspace_kernel);
KILN_REGISTER_KERNEL(eye, CUDA, eye_kernel);
// The random factories on the device (random.cu): the CPU's numbers, drawn there. The output is
// dense (a factory's), element i the CPU kernel's element i.
void uniform_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& out = outs[0];
  DeviceGuard g(out.device().index);
  launch_uniform(out.dtype(), out.unsafe_impl()->data(), out.numel(), c.attrs.f(1), c.attrs.f(2),
                 static_cast<uint64_t>(c.attrs.i(5)), static_cast<uint64_t>(c.attrs.i(6)),
                 current_cuda_stream(out.device().index));
}
void normal_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& out = outs[0];
  DeviceGuard g(out.device().index);
  launch_normal(out.dtype(), out.unsafe_impl()->data(), out.numel(), c.attrs.f(1), c.attrs.f(2),
                static_cast<uint64_t>(c.attrs.i(5)), static_cast<uint64_t>(c.attrs.i(6)),
                current_cuda_stream(out.device().index));
}
// randint: (low, high, size, dtype, device, seed, offset)
void randint_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& out = outs[0];
  DeviceGuard g(out.device().index);
  launch_randint(out.dtype(), out.unsafe_impl()->data(), out.numel(), c.attrs.i(0), c.attrs.i(1),
                 static_cast<uint64_t>(c.attrs.i(5)), static_cast<uint64_t>(c.attrs.i(6)),
                 current_cuda_stream(out.device().index));
}
KILN_REGISTER_KERNEL(uniform, CUDA, uniform_kernel);
KILN_REGISTER_KERNEL(normal, CUDA, normal_kernel);
KILN_REGISTER_KERNEL(randint, CUDA, randint_kernel);
// randperm: (n, dtype, device, seed, offset). The CPU sorts (64-bit Philox draw, index) pairs;
// a stable radix sort of the draws orders ties by index too, so the permutation is the CPU's.
void randperm_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& out = outs[0];
  const int64_t n = c.attrs.i(0);
  if (n >= (int64_t(1) << 31) || out.numel() != n) return via_cpu_kernel(c, outs);  // the sort's limit
  if (n == 0) return;
  const Device dev = out.device();
  DeviceGuard g(dev.index);
  cudaStream_t s = current_cuda_stream(dev.index);
  Tensor keys = make_tensor({n}, DType::Int64, dev), sorted = make_tensor({n}, DType::Int64, dev);
  Tensor perm = make_tensor({n}, DType::Int64, dev);
  auto i64 = [](const Tensor& t) { return reinterpret_cast<int64_t*>(t.unsafe_impl()->data()); };
  launch_randperm_keys(i64(keys), n, static_cast<uint64_t>(c.attrs.i(3)), static_cast<uint64_t>(c.attrs.i(4)), s);
  const size_t bytes = sort_rows_workspace(DType::Int64, 1, n, false);
  Tensor ws = make_tensor({static_cast<int64_t>(bytes)}, DType::UInt8, dev);
  launch_sort_rows(DType::Int64, i64(keys), i64(sorted), i64(perm), 1, n, n, false, ws.unsafe_impl()->data(), bytes, s);
  copy_same_device(out, perm);  // convert<T, int64_t>, as the CPU
}
KILN_REGISTER_KERNEL(randperm, CUDA, randperm_kernel);
KILN_REGISTER_KERNEL(tril_indices, CUDA, via_cpu_kernel);
KILN_REGISTER_KERNEL(triu_indices, CUDA, via_cpu_kernel);

}  // namespace
}  // namespace kiln::cuda
