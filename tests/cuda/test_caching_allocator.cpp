// The caching allocator's bookkeeping (Note [CUDA caching allocator]) with a fake raw memory:
// runs on the CPU, so CI checks splitting, merging, stream pools, events, statistics and the
// OOM message without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>

#include "backend/cuda/caching_allocator.h"
#include "tests/unit/expect_error.h"

namespace kiln::cuda {
namespace {

// Hands out fake addresses (never dereferenced) up to `capacity` bytes; events complete when
// the test says so.
struct FakeRaw : RawMemory {
  size_t capacity = size_t(1) << 40;
  size_t in_use = 0;
  uintptr_t next = 1 << 20;
  std::map<void*, size_t> segments;
  int mallocs = 0, frees = 0;
  std::set<int*> events;
  bool events_done = false;

  void* allocate(size_t bytes) override {
    if (in_use + bytes > capacity) return nullptr;
    void* p = reinterpret_cast<void*>(next);
    next += bytes + (1 << 20);  // gaps: neighbouring segments never look adjacent
    segments[p] = bytes;
    in_use += bytes;
    ++mallocs;
    return p;
  }
  void free(void* p) override {
    in_use -= segments.at(p);
    segments.erase(p);
    ++frees;
  }
  void* record_event(StreamId) override {
    int* e = new int(0);
    events.insert(e);
    return e;
  }
  bool event_done(void*) override { return events_done; }
  void release_event(void* e) override {
    events.erase(static_cast<int*>(e));
    delete static_cast<int*>(e);
  }
  void mem_info(size_t& free_bytes, size_t& total) override {
    total = capacity;
    free_bytes = capacity - in_use;
  }
};

constexpr size_t MiB = 1 << 20;

TEST(CudaCachingAllocator, RoundsAndUsesSmallSegments) {
  FakeRaw raw;
  BlockAllocator a(&raw, 0);
  EXPECT_EQ(BlockAllocator::round_size(0), 512u);
  EXPECT_EQ(BlockAllocator::round_size(513), 1024u);
  void* p = a.allocate(1000, 0);
  MemoryStats s = a.stats();
  EXPECT_EQ(s.allocated, 1024u);
  EXPECT_EQ(s.reserved, 2 * MiB);  // one small segment
  // A second small block is carved from the same segment, right after the first.
  void* q = a.allocate(100, 0);
  EXPECT_EQ(static_cast<char*>(q), static_cast<char*>(p) + 1024);
  EXPECT_EQ(raw.mallocs, 1);
  a.free(p);
  a.free(q);
  EXPECT_EQ(a.stats().allocated, 0u);
  EXPECT_EQ(a.stats().reserved, 2 * MiB);  // cached, not returned
  EXPECT_EQ(a.stats().max_allocated, 1024u + 512u);
}

TEST(CudaCachingAllocator, SplitsAndCoalescesFreeNeighbours) {
  FakeRaw raw;
  BlockAllocator a(&raw, 0);
  // Three blocks of one 20 MiB large segment.
  void* x = a.allocate(3 * MiB, 0);
  void* y = a.allocate(3 * MiB, 0);
  void* z = a.allocate(3 * MiB, 0);
  EXPECT_EQ(raw.mallocs, 1);
  EXPECT_EQ(static_cast<char*>(y), static_cast<char*>(x) + 3 * MiB);
  EXPECT_EQ(static_cast<char*>(z), static_cast<char*>(y) + 3 * MiB);
  // Freeing x and z leaves holes; freeing y merges all three with the tail into one block, so
  // a request for the whole segment fits without a new cudaMalloc.
  a.free(x);
  a.free(z);
  a.free(y);
  void* w = a.allocate(20 * MiB - 512, 0);
  EXPECT_EQ(w, x);
  EXPECT_EQ(raw.mallocs, 1);
  a.free(w);
  // Whole free segments go back on empty_cache.
  a.empty_cache();
  EXPECT_EQ(a.stats().reserved, 0u);
  EXPECT_EQ(raw.frees, 1);
  EXPECT_TRUE(raw.segments.empty());
}

// A CUDA graph's private pool (Note [CUDA graphs]): while its capture stream is retained, that
// stream's free segments stay cached (its replays write there) and are not handed to another
// stream; once the last graph lets go, empty_cache returns them.
TEST(CudaCachingAllocator, RetainedStreamsKeepTheirSegments) {
  FakeRaw raw;
  BlockAllocator a(&raw, 0);
  const StreamId capture = 7, other = 8;
  a.retain_stream(capture);
  a.retain_stream(capture);  // two graphs share the pool
  void* p = a.allocate(4 * MiB, capture);
  void* q = a.allocate(4 * MiB, other);
  a.free(p);
  a.free(q);
  a.empty_cache();
  EXPECT_EQ(raw.frees, 1);  // only the other stream's segment
  EXPECT_EQ(a.stats().reserved, 20 * MiB);
  void* r = a.allocate(4 * MiB, other);  // not from the graph's pool
  EXPECT_NE(r, p);
  a.free(r);
  a.release_stream(capture);
  a.empty_cache();
  EXPECT_EQ(a.stats().reserved, 20 * MiB);  // the second graph still holds it
  a.release_stream(capture);
  a.empty_cache();
  EXPECT_EQ(a.stats().reserved, 0u);
  EXPECT_TRUE(raw.segments.empty());
}

TEST(CudaCachingAllocator, BigRequestsGetTheirOwnSegment) {
  FakeRaw raw;
  BlockAllocator a(&raw, 0);
  void* p = a.allocate(25 * MiB + 1, 0);
  EXPECT_EQ(a.stats().reserved, 26 * MiB);  // rounded up to 2 MiB
  // The 1 MiB - 512 tail is too small to split off a large block: the whole block is handed out.
  EXPECT_EQ(a.stats().allocated, 26 * MiB);
  a.free(p);
  // The cached block is reused for a slightly smaller request.
  void* q = a.allocate(24 * MiB, 0);
  EXPECT_EQ(p, q);
  EXPECT_EQ(raw.mallocs, 1);
  a.free(q);
}

TEST(CudaCachingAllocator, PoolsArePerStream) {
  FakeRaw raw;
  BlockAllocator a(&raw, 0);
  void* p = a.allocate(4096, /*stream=*/1);
  a.free(p);
  void* q = a.allocate(4096, /*stream=*/2);  // not stream 1's cached block
  EXPECT_NE(p, q);
  EXPECT_EQ(raw.mallocs, 2);
  void* r = a.allocate(4096, 1);
  EXPECT_EQ(p, r);
  a.free(q);
  a.free(r);
}

TEST(CudaCachingAllocator, RecordStreamDelaysReuseUntilTheEventCompletes) {
  FakeRaw raw;
  BlockAllocator a(&raw, 0);
  void* p = a.allocate(4096, 1);
  a.record_stream(p, 2);
  a.free(p);
  EXPECT_EQ(raw.events.size(), 1u);
  EXPECT_EQ(a.stats().allocated, 0u);
  // Stream 2 may still read it: a new request gets another block.
  void* q = a.allocate(4096, 1);
  EXPECT_NE(p, q);
  raw.events_done = true;
  void* r = a.allocate(4096, 1);  // events are polled first: p is free again
  EXPECT_EQ(p, r);
  EXPECT_TRUE(raw.events.empty());
  a.free(q);
  a.free(r);
}

TEST(CudaCachingAllocator, PeakStatsReset) {
  FakeRaw raw;
  BlockAllocator a(&raw, 0);
  void* p = a.allocate(8 * MiB, 0);
  void* q = a.allocate(8 * MiB, 0);
  a.free(q);
  EXPECT_EQ(a.stats().max_allocated, 16 * MiB);
  a.reset_peak_stats();
  EXPECT_EQ(a.stats().max_allocated, 8 * MiB);
  a.free(p);
}

TEST(CudaCachingAllocator, OutOfMemoryFreesTheCacheAndRetriesThenSaysHowMuch) {
  FakeRaw raw;
  raw.capacity = 64 * MiB;
  BlockAllocator a(&raw, 3);
  void* p = a.allocate(30 * MiB, 0);  // a 30 MiB segment
  void* c = a.allocate(20 * MiB, 0);  // a 20 MiB one, then cached
  a.free(c);
  EXPECT_EQ(a.stats().reserved, 50 * MiB);
  // 30 MiB does not fit next to 50 MiB reserved: the cached 20 MiB segment is released first.
  void* q = a.allocate(30 * MiB, 0);
  EXPECT_EQ(a.stats().reserved, 60 * MiB);
  EXPECT_EQ(raw.frees, 1);
  testing::expect_error([&] { a.allocate(10 * MiB, 0); },
                        {"CUDA out of memory on cuda:3", "tried to allocate 10.00 MiB", "60.00 MiB allocated",
                         "60.00 MiB reserved", "64.00 MiB in total"});
  EXPECT_GE(a.stats().num_ooms, 2u);
  a.free(p);
  a.free(q);
}

TEST(CudaCachingAllocator, FreeOfAnUnknownPointerIsAnError) {
  FakeRaw raw;
  BlockAllocator a(&raw, 0);
  int x = 0;
  testing::expect_error([&] { a.free(&x); }, {"unknown pointer"});
}

}  // namespace
}  // namespace kiln::cuda
