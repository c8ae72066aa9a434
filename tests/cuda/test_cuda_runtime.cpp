// The CUDA runtime: devices, copies, streams, events and the allocator's statistics on a real
// device (skipped without one), and clear errors without one.
#include <optional>
#include <string>
#include <utility>

#include "io/dlpack_abi.h"
#include "kiln/dlpack.h"
#include "tests/cuda/cuda_test.h"
#include "tests/unit/expect_error.h"

namespace kiln {
namespace {

using testing::expect_close;

TEST(CudaNoDevice, UsingCudaWithoutADeviceIsAClearError) {
  if (cuda::is_available()) GTEST_SKIP() << "skipped: a CUDA device is present";
  EXPECT_EQ(cuda::device_count(), 0);
  Tensor x = ones({2, 3});
  std::string why = cuda::is_built() ? "no CUDA device is available" : "kiln was built without CUDA";
  testing::expect_error([&] { (void)x.cuda(); }, {"CUDA: ", why});
  testing::expect_error([&] { (void)x.to(Device("cuda:0")); }, {why});
  testing::expect_error([] { cuda::synchronize(); }, {why});
  testing::expect_error([] { (void)cuda::memory_allocated(); }, {why});
  testing::expect_error([] { (void)cuda::current_stream(); }, {why});
  EXPECT_FALSE(x.is_pinned());
  testing::expect_error([&] { (void)x.pin_memory(); }, {why});
  testing::expect_error([] { cuda::profiler_start(); }, {why});
  // The CPU keeps working after the failures.
  EXPECT_EQ((x + x).sum().item<float>(), 12.0f);
}

// Note [Pinned host memory]: non-blocking copies between pinned memory and the GPU return at
// once; a pinned block freed while its copy is queued is not handed out again before the copy
// has read it.
// Same sizes and bit-equal values.
bool same(const Tensor& a, const Tensor& b) {
  return a.sizes().vec() == b.sizes().vec() && allclose(a, b, 0.0, 0.0);
}

TEST(CudaRuntime, PinnedMemoryAndNonBlockingCopies) {
  KILN_REQUIRE_CUDA();
  Tensor x = arange(0, 1 << 20, 1, kFloat32).reshape({1024, 1024});
  Tensor p = x.pin_memory();
  EXPECT_TRUE(p.is_pinned());
  EXPECT_FALSE(x.is_pinned());
  EXPECT_TRUE(p.pin_memory().is_same(p));
  EXPECT_TRUE(same(p, x));
  // A non-contiguous source gives a dense pinned copy.
  EXPECT_TRUE(same(x.t().pin_memory(), x.t()));

  // Host to device from pinned memory, then the pinned tensor dies with the copy perhaps queued;
  // a new pinned tensor of the same size, written at once, must not change what the GPU got.
  Tensor big = randn({64, 1024, 1024}).cuda();  // queue work ahead of the copy
  Tensor y;
  {
    Tensor src = x.pin_memory();
    (void)(big * 2.0).sum();
    y = src.to(Device(DeviceType::CUDA), std::nullopt, /*non_blocking=*/true);
  }
  Tensor reuse = zeros({1024, 1024}).pin_memory();
  reuse.fill_(-1.0);
  cuda::synchronize();
  EXPECT_TRUE(same(y.cpu(), x));

  // Device to host into pinned memory without waiting; the values are there after a synchronize.
  Tensor back = (y * 2.0).to(kCPU, std::nullopt, /*non_blocking=*/true);
  EXPECT_TRUE(back.is_pinned());
  cuda::synchronize();
  EXPECT_TRUE(same(back, x * 2.0));
  // copy_ with non_blocking into a pinned destination.
  Tensor dst = empty({1024, 1024}).pin_memory();
  dst.copy_(y, /*non_blocking=*/true);
  cuda::synchronize();
  EXPECT_TRUE(same(dst, x));
}

// DLPack of CUDA tensors: the export views the device memory (writes through either side are seen
// by the other), keeps the tensor alive, and the import is a CUDA tensor on that device.
TEST(CudaRuntime, DlpackSharesDeviceMemory) {
  KILN_REQUIRE_CUDA();
  Tensor t = arange(0, 12, 1, kFloat32).reshape({3, 4}).cuda();
  DLManagedTensorVersioned* m = to_dlpack(t.t());
  EXPECT_EQ(m->dl_tensor.device.device_type, kDLCUDA);
  EXPECT_EQ(m->dl_tensor.device.device_id, 0);
  Tensor back = from_dlpack(m);
  EXPECT_TRUE(back.is_cuda());
  EXPECT_EQ(back.sizes().vec(), (std::vector<int64_t>{4, 3}));
  back.fill_(7.0);
  EXPECT_TRUE(same(t.cpu(), full({3, 4}, 7.0)));
}

TEST(CudaRuntime, DeviceProperties) {
  KILN_REQUIRE_CUDA();
  EXPECT_GT(cuda::device_count(), 0);
  cuda::DeviceProperties p = cuda::get_device_properties(0);
  EXPECT_FALSE(p.name.empty());
  EXPECT_GT(p.total_memory, size_t(1) << 30);
  EXPECT_GE(p.major, 7);
  EXPECT_EQ(cuda::current_device(), 0);
}

TEST(CudaRuntime, CopiesRoundTrip) {
  KILN_REQUIRE_CUDA();
  for (DType t : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int64, DType::Int32,
                  DType::UInt8, DType::Bool}) {
    Tensor x = arange(24, TensorOptions(DType::Float32)).reshape({2, 3, 4}).to(t);
    Tensor g = x.cuda();
    EXPECT_TRUE(g.is_cuda());
    EXPECT_EQ(g.device(), Device("cuda:0"));
    expect_close(g, x, 0, 0);
    // Device to device, then back.
    Tensor g2 = empty({2, 3, 4}, TensorOptions(t).device(Device("cuda")));
    g2.copy_(g);
    expect_close(g2, x, 0, 0);
    EXPECT_TRUE(g2.cpu().is_cpu());
  }
}

TEST(CudaRuntime, NonContiguousAndConvertingCopies) {
  KILN_REQUIRE_CUDA();
  Tensor x = randn({5, 7, 3});
  Tensor xt = x.permute({2, 0, 1});  // non-contiguous source
  expect_close(xt.cuda(), xt.contiguous(), 0, 0);
  // Non-contiguous on the device, copied back.
  Tensor g = x.cuda().transpose(0, 2);
  expect_close(g, x.transpose(0, 2).contiguous(), 0, 0);
  // Converting host-to-device, device-to-device and device-to-host copies.
  expect_close(x.to(Device("cuda"), DType::Float64), x.to(DType::Float64), 0, 0);
  expect_close(x.cuda().to(DType::Float16), x.to(DType::Float16), 0, 0);
  Tensor back = empty({3, 7, 5}, TensorOptions(DType::BFloat16));
  back.copy_(g);  // strided device source, dtype change on the way
  expect_close(back, x.transpose(0, 2).to(DType::BFloat16), 0, 0);
  // A strided destination on the device, with broadcasting.
  Tensor dst = zeros({4, 6}, TensorOptions().device(Device("cuda"))).transpose(0, 1);
  dst.copy_(arange(4, TensorOptions(DType::Int64)));
  expect_close(dst, arange(4, TensorOptions(DType::Float32)).expand({6, 4}).contiguous(), 0, 0);
}

TEST(CudaRuntime, FactoriesOnTheDevice) {
  KILN_REQUIRE_CUDA();
  TensorOptions cu = TensorOptions().device(Device("cuda"));
  expect_close(full({3, 4}, 2.5, cu), full({3, 4}, 2.5), 0, 0);
  expect_close(zeros({5}, cu.dtype(DType::Int32)), zeros({5}, TensorOptions(DType::Int32)), 0, 0);
  expect_close(arange(2, 11, 3, cu), arange(2, 11, 3), 0, 0);
  // Random factories give the CPU generator's numbers for the same seed (Note [Philox stream]):
  // uniforms bit for bit, normals up to the last bit (the device's log/sin/cos round differently).
  manual_seed(7);
  Tensor g = randn({100}, cu);
  manual_seed(7);
  expect_close(g, randn({100}), 1e-6, 1e-6);
  manual_seed(9);
  Tensor u = rand({1000}, cu);
  manual_seed(9);
  expect_close(u, rand({1000}), 0, 0);
  manual_seed(8);
  Tensor d = dropout(ones({1000}, cu), 0.5, true);
  manual_seed(8);
  expect_close(d, dropout(ones({1000}), 0.5, true), 0, 0);
}

// arange/linspace/eye/randint/randperm run on the device (random.cu): the CPU kernels' values
// exactly, in every dtype (float arange/linspace would differ in the last bit if a + i * k became
// one FMA).
TEST(CudaRuntime, DeviceFactoriesEqualTheCpuInEveryDtype) {
  KILN_REQUIRE_CUDA();
  const DType dtypes[] = {DType::Bool,  DType::UInt8,   DType::Int8,     DType::Int16,   DType::Int32,
                          DType::Int64, DType::Float16, DType::BFloat16, DType::Float32, DType::Float64};
  for (DType dt : dtypes) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    TensorOptions cpu(dt), cu = cpu.device(Device("cuda"));
    if (dt != DType::Bool) {  // arange refuses bool; integral dtypes truncate start and step
      const bool fl = is_floating_point(dt);
      expect_close(arange(-3, 100, 1, cu), arange(-3, 100, 1, cpu), 0, 0);
      expect_close(arange(2.5, 90.1, fl ? 0.7 : 3.0, cu), arange(2.5, 90.1, fl ? 0.7 : 3.0, cpu), 0, 0);
      expect_close(arange(0, 0, 1, cu), arange(0, 0, 1, cpu), 0, 0);
      // Non-negative for integers: a negative double into uint8 is out of range in C++.
      expect_close(linspace(fl ? -1.3 : 0.3, 97.7, 1001, cu), linspace(fl ? -1.3 : 0.3, 97.7, 1001, cpu), 0, 0);
      expect_close(linspace(0.1, 0.9, 7, cu), linspace(0.1, 0.9, 7, cpu), 0, 0);
      expect_close(linspace(5, 5, 1, cu), linspace(5, 5, 1, cpu), 0, 0);
      expect_close(linspace(0, 1, 0, cu), linspace(0, 1, 0, cpu), 0, 0);
    }
    expect_close(eye(5, 7, cu), eye(5, 7, cpu), 0, 0);
    expect_close(eye(4, std::nullopt, cu), eye(4, std::nullopt, cpu), 0, 0);
    expect_close(eye(0, 3, cu), eye(0, 3, cpu), 0, 0);
    if (dt == DType::Bool) continue;
    for (auto [lo, hi] : {std::pair<int64_t, int64_t>{0, 10}, {-50, 77}, {0, int64_t(1) << 40}}) {
      if (hi > 100 && itemsize(dt) < 8) continue;  // the wide draw needs a dtype that holds it
      if (lo < 0 && dt == DType::UInt8) continue;  // refused: the range must fit the dtype
      SCOPED_TRACE("randint [" + std::to_string(lo) + ", " + std::to_string(hi) + ")");
      manual_seed(11);
      Tensor on_cuda = randint(lo, hi, {3, 1001}, cu);
      manual_seed(11);
      expect_close(on_cuda, randint(lo, hi, {3, 1001}, cpu), 0, 0);
    }
  }
  manual_seed(12);
  Tensor empty = randint(0, 5, {0, 3}, TensorOptions(DType::Int64).device(Device("cuda")));
  EXPECT_EQ(empty.numel(), 0);
  // randperm: a stable sort of the CPU's 64-bit draws, so the CPU's permutation.
  for (DType dt : {DType::Int64, DType::Int32, DType::Int16, DType::Float32, DType::Float64})
    for (int64_t n : {0, 1, 7, 5000}) {
      SCOPED_TRACE("randperm " + std::string(dtype_name(dt)) + " " + std::to_string(n));
      manual_seed(13);
      Tensor on_cuda = randperm(n, TensorOptions(dt).device(Device("cuda")));
      manual_seed(13);
      expect_close(on_cuda, randperm(n, TensorOptions(dt)), 0, 0);
    }
}

TEST(CudaRuntime, StreamsAndEvents) {
  KILN_REQUIRE_CUDA();
  cuda::Stream s = cuda::Stream::create();
  EXPECT_NE(s, cuda::default_stream());
  EXPECT_EQ(cuda::current_stream(), cuda::default_stream());
  cuda::Event start(true), end(true);
  {
    cuda::StreamGuard guard(s);
    EXPECT_EQ(cuda::current_stream(), s);
    start.record();
    Tensor big = ones({1 << 20}).cuda();
    end.record();
    cuda::record_stream(big, cuda::default_stream());
  }
  EXPECT_EQ(cuda::current_stream(), cuda::default_stream());
  end.synchronize();
  EXPECT_TRUE(end.query());
  EXPECT_GE(start.elapsed_time(end), 0.0f);
  s.synchronize();
  EXPECT_TRUE(s.query());
  cuda::synchronize();
}

TEST(CudaAllocator, StatsFollowAllocAndFree) {
  KILN_REQUIRE_CUDA();
  cuda::synchronize();
  size_t before = cuda::memory_allocated();
  cuda::reset_peak_memory_stats();
  {
    Tensor a = empty({1 << 20}, TensorOptions().device(Device("cuda")));  // 4 MiB
    EXPECT_EQ(cuda::memory_allocated(), before + (4u << 20));
    EXPECT_GE(cuda::memory_reserved(), cuda::memory_allocated());
  }
  EXPECT_EQ(cuda::memory_allocated(), before);
  EXPECT_EQ(cuda::max_memory_allocated(), before + (4u << 20));
  // Freed memory is cached; a same-size tensor reuses it without growing the reservation.
  size_t reserved = cuda::memory_reserved();
  { Tensor b = empty({1 << 20}, TensorOptions().device(Device("cuda"))); }
  EXPECT_EQ(cuda::memory_reserved(), reserved);
  cuda::empty_cache();
  EXPECT_LE(cuda::memory_reserved(), reserved);
}

TEST(CudaAllocator, OutOfMemorySaysHowMuch) {
  KILN_REQUIRE_CUDA();
  int64_t huge = int64_t(1) << 50;  // 4 PiB of float
  testing::expect_error([&] { (void)empty({huge}, TensorOptions().device(Device("cuda"))); },
                        {"CUDA out of memory on cuda:0", "tried to allocate 4194304.00 GiB", "allocated", "reserved"});
  // The device is still usable.
  expect_close(ones({3}).cuda(), ones({3}), 0, 0);
}

TEST(CudaDispatch, AKernelLimitNamesTheOpAndDevice) {
  KILN_REQUIRE_CUDA();
  // Every prim has a CUDA path now (tests/cuda/test_cuda_ops.cpp checks it); cuBLAS has no
  // integer matmul yet, so an int64 mm names its limit.
  Tensor a = ones({2, 2}, kInt64).cuda();
  testing::expect_error([&] { (void)mm(a, a); }, {"mm: not supported yet on cuda for dtype"});
}

}  // namespace
}  // namespace kiln
