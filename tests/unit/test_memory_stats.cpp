// kiln::memory_allocated / max_memory_allocated / reset_peak_memory_stats on the CPU (Note [CPU
// memory statistics] in src/backend/cpu/backend.cpp): large (cached) and small blocks alike.
#include <gtest/gtest.h>

#include "kiln/cuda.h"
#include "kiln/kiln.h"
#include "kiln/memory.h"
#include "tests/unit/expect_error.h"

namespace kiln {
namespace {

TEST(MemoryStats, CpuCountsLiveTensorsAndTheirPeak) {
  const size_t base = memory_allocated(kCPU);
  reset_peak_memory_stats(kCPU);
  EXPECT_EQ(max_memory_allocated(kCPU), base);
  {
    Tensor big = empty({1 << 20});  // 4 MiB: a cached block, counted at its (exact) size
    EXPECT_EQ(memory_allocated(kCPU), base + (4u << 20));
    {
      Tensor small = empty({100});  // 400 bytes, in one allocation with its storage
      EXPECT_GE(memory_allocated(kCPU), base + (4u << 20) + 400);
      EXPECT_LT(memory_allocated(kCPU), base + (4u << 20) + 400 + 64);
    }
    EXPECT_EQ(memory_allocated(kCPU), base + (4u << 20));
    // A view allocates nothing.
    Tensor v = big.view({1024, 1024}).t();
    EXPECT_EQ(memory_allocated(kCPU), base + (4u << 20));
  }
  EXPECT_EQ(memory_allocated(kCPU), base);
  EXPECT_GE(max_memory_allocated(kCPU), base + (4u << 20) + 400);
  // The default device is the CPU.
  EXPECT_EQ(max_memory_allocated(), max_memory_allocated(kCPU));
  reset_peak_memory_stats();
  EXPECT_EQ(max_memory_allocated(kCPU), memory_allocated(kCPU));
}

TEST(MemoryStats, OtherDevicesAreClearErrors) {
  testing::expect_error([] { (void)memory_allocated(Device("meta")); }, {"memory_allocated", "cpu and cuda", "meta"});
  if (!cuda::is_available()) {
    // Without a GPU the CUDA statistics say why, as kiln::cuda's do.
    EXPECT_THROW((void)max_memory_allocated(Device("cuda")), Error);
  }
}

}  // namespace
}  // namespace kiln
