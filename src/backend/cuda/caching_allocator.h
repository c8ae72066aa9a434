// Note [CUDA caching allocator]
// cudaMalloc/cudaFree synchronize the device and cost tens of microseconds, so, as PyTorch's
// CUDACachingAllocator, kiln obtains memory in segments and hands out blocks of them:
//  - sizes round up to 512 bytes; requests of at most 1 MiB come from 2 MiB segments (the small
//    pool), larger ones from segments of 20 MiB (requests under 10 MiB) or the size rounded up to
//    2 MiB (the large pool);
//  - a free block is found best-fit in the pool of the requesting stream; a larger block is split
//    and the remainder stays cached; a freed block merges with free neighbours of its segment;
//  - a block used on another stream (record_stream) is reused only after an event recorded on that
//    stream at free time has completed, so the other stream's work has finished reading it;
//  - when the device is out of memory, unused segments are returned and the request retried once,
//    then a kiln::Error says how much was asked, allocated and reserved.
// BlockAllocator is this bookkeeping in plain C++: the raw memory and events come from a
// RawMemory (cudaMalloc in backend/cuda/allocator.cpp; a fake one in tests/cuda), so the
// splitting, merging, statistics and the OOM message are tested without a GPU.
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::cuda {

// Streams are opaque ids to the bookkeeping (a cudaStream_t's address).
using StreamId = uintptr_t;

// Where segments and events come from.
struct RawMemory {
  virtual ~RawMemory() = default;
  // nullptr when the device is out of memory (never throws for that).
  virtual void* allocate(size_t bytes) = 0;
  virtual void free(void* ptr) = 0;
  // An event recorded on `stream` now; polled by event_done, then released.
  virtual void* record_event(StreamId stream) = 0;
  virtual bool event_done(void* event) = 0;
  virtual void release_event(void* event) = 0;
  // Free and total device memory for the OOM message; zeros when unknown.
  virtual void mem_info(size_t& free_bytes, size_t& total_bytes) { free_bytes = total_bytes = 0; }
};

struct MemoryStats {
  size_t allocated = 0;      // bytes in blocks handed out (rounded sizes)
  size_t max_allocated = 0;  // peak of `allocated` since the last reset
  size_t reserved = 0;       // bytes in segments obtained from RawMemory
  size_t max_reserved = 0;
  size_t num_allocs = 0;    // allocate() calls that succeeded
  size_t num_segments = 0;  // segments currently held
  size_t num_ooms = 0;      // raw allocation failures (before and after the retry)
};

class BlockAllocator {
 public:
  static constexpr size_t kMinBlock = 512;
  static constexpr size_t kSmallSize = 1 << 20;  // largest request served by the small pool
  static constexpr size_t kSmallSegment = 2 << 20;
  static constexpr size_t kLargeSegment = 20 << 20;  // for requests in (1 MiB, 10 MiB)
  static constexpr size_t kMinLargeAlloc = 10 << 20;
  static constexpr size_t kRoundLarge = 2 << 20;

  // `device` only names the device in error messages.
  BlockAllocator(RawMemory* raw, int device) : raw_(raw), device_(device) {}
  ~BlockAllocator();
  BlockAllocator(const BlockAllocator&) = delete;
  BlockAllocator& operator=(const BlockAllocator&) = delete;

  // A block of at least `bytes` (0 gives a valid, distinct pointer) for use on `stream`.
  void* allocate(size_t bytes, StreamId stream);
  void free(void* ptr);
  // The block holding `ptr` is used by `stream` too (Note [CUDA caching allocator]).
  void record_stream(void* ptr, StreamId stream);
  // Returns every unused whole segment to RawMemory (waiting for no events: blocks with
  // pending events stay).
  void empty_cache();
  // While retained (a count: graphs captured on one stream each hold it), the free segments of
  // `stream`'s blocks are not returned to RawMemory: a CUDA graph captured on that stream
  // replays at the addresses of its private pool (Note [CUDA graphs] in backend/cuda/graph.cpp).
  void retain_stream(StreamId stream);
  void release_stream(StreamId stream);
  MemoryStats stats() const;
  void reset_peak_stats();

  static size_t round_size(size_t bytes);
  static std::string format_size(size_t bytes);  // "20.00 MiB"

 private:
  struct Block {
    size_t size = 0;
    char* ptr = nullptr;
    StreamId stream = 0;
    bool allocated = false;
    bool small = false;
    Block* prev = nullptr;  // neighbours within the segment
    Block* next = nullptr;
    std::set<StreamId> stream_uses;  // other streams that used it (record_stream)
    int pending_events = 0;
  };
  struct BlockLess {
    bool operator()(const Block* a, const Block* b) const {
      if (a->stream != b->stream) return a->stream < b->stream;
      if (a->size != b->size) return a->size < b->size;
      return a->ptr < b->ptr;
    }
  };
  using Pool = std::set<Block*, BlockLess>;

  Pool& pool_for(bool small) { return small ? small_pool_ : large_pool_; }
  Block* find_free(size_t size, StreamId stream, bool small);
  Block* new_segment(size_t size, StreamId stream, bool small);
  bool release_free_segments();  // true when any was released
  void free_block(Block* b);     // back to its pool, merged with free neighbours
  void process_events();
  [[noreturn]] void throw_oom(size_t bytes, size_t segment);

  RawMemory* raw_;
  int device_;
  mutable std::mutex mu_;
  Pool small_pool_, large_pool_;
  std::unordered_map<char*, Block*> live_;  // allocated blocks by pointer
  struct PendingEvent {
    void* event;
    Block* block;
  };
  std::vector<PendingEvent> events_;
  std::unordered_map<StreamId, int> retained_;
  MemoryStats stats_;
};

// The device's BlockAllocator's retain_stream/release_stream (backend/cuda/allocator.cpp).
void retain_pool(int device, StreamId stream);
void release_pool(int device, StreamId stream);

}  // namespace kiln::cuda
