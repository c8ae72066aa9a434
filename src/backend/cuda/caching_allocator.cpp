// The caching allocator's block bookkeeping (Note [CUDA caching allocator]). Plain C++: built
// with or without CUDA.
#include "backend/cuda/caching_allocator.h"

#include <algorithm>
#include <cstdio>

#include "kiln/error.h"

namespace kiln::cuda {

size_t BlockAllocator::round_size(size_t bytes) {
  if (bytes < kMinBlock) return kMinBlock;
  return (bytes + kMinBlock - 1) / kMinBlock * kMinBlock;
}

std::string BlockAllocator::format_size(size_t bytes) {
  char buf[64];
  if (bytes < (1 << 10))
    std::snprintf(buf, sizeof buf, "%zu bytes", bytes);
  else if (bytes < (1 << 20))
    std::snprintf(buf, sizeof buf, "%.2f KiB", bytes / 1024.0);
  else if (bytes < (size_t(1) << 30))
    std::snprintf(buf, sizeof buf, "%.2f MiB", bytes / 1048576.0);
  else
    std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / 1073741824.0);
  return buf;
}

BlockAllocator::~BlockAllocator() {
  // Only at exit: live tensors may still point into segments, so nothing is returned here
  // (the driver reclaims device memory with the process).
  std::lock_guard<std::mutex> lock(mu_);
  for (const PendingEvent& e : events_) raw_->release_event(e.event);
}

// Best fit within the stream's pool: the smallest free block of at least `size`.
BlockAllocator::Block* BlockAllocator::find_free(size_t size, StreamId stream, bool small) {
  Pool& pool = pool_for(small);
  Block key;
  key.stream = stream;
  key.size = size;
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  Block* b = *it;
  pool.erase(it);
  return b;
}

BlockAllocator::Block* BlockAllocator::new_segment(size_t size, StreamId stream, bool small) {
  size_t seg = small ? kSmallSegment
                     : (size < kMinLargeAlloc ? kLargeSegment : (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge);
  void* p = raw_->allocate(seg);
  if (!p) {
    ++stats_.num_ooms;
    // Out of memory: return what is cached and try once more.
    process_events();
    if (release_free_segments()) p = raw_->allocate(seg);
    if (!p) {
      ++stats_.num_ooms;
      throw_oom(size, seg);
    }
  }
  auto* b = new Block;
  b->size = seg;
  b->ptr = static_cast<char*>(p);
  b->stream = stream;
  b->small = small;
  stats_.reserved += seg;
  stats_.max_reserved = std::max(stats_.max_reserved, stats_.reserved);
  ++stats_.num_segments;
  return b;
}

void BlockAllocator::throw_oom(size_t bytes, size_t segment) {
  size_t free_bytes = 0, total = 0;
  raw_->mem_info(free_bytes, total);
  std::string device_part;
  if (total) {
    device_part = "; the device has " + format_size(total) + " in total, of which " + format_size(free_bytes) + " free";
  }
  KILN_FAIL("CUDA out of memory on cuda:", device_, ": tried to allocate ", format_size(bytes), " (a segment of ",
            format_size(segment), "); kiln has ", format_size(stats_.allocated), " allocated to tensors and ",
            format_size(stats_.reserved), " reserved by the caching allocator (cached segments were already freed)",
            device_part);
}

bool BlockAllocator::release_free_segments() {
  bool any = false;
  for (Pool* pool : {&small_pool_, &large_pool_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* b = *it;
      if (b->prev || b->next || retained_.count(b->stream)) {  // in use, or a graph's pool
        ++it;
        continue;
      }
      raw_->free(b->ptr);
      stats_.reserved -= b->size;
      --stats_.num_segments;
      it = pool->erase(it);
      delete b;
      any = true;
    }
  }
  return any;
}

void* BlockAllocator::allocate(size_t bytes, StreamId stream) {
  std::lock_guard<std::mutex> lock(mu_);
  process_events();
  size_t size = round_size(bytes);
  bool small = size <= kSmallSize;
  Block* b = find_free(size, stream, small);
  if (!b) b = new_segment(size, stream, small);
  // Split when the remainder is worth keeping: any remainder in the small pool, more than
  // 1 MiB in the large one (smaller tails of large blocks would only fragment it).
  size_t rest = b->size - size;
  if (small ? rest >= kMinBlock : rest > kSmallSize) {
    auto* tail = new Block;
    tail->size = rest;
    tail->ptr = b->ptr + size;
    tail->stream = stream;
    tail->small = small;
    tail->prev = b;
    tail->next = b->next;
    if (b->next) b->next->prev = tail;
    b->next = tail;
    b->size = size;
    pool_for(small).insert(tail);
  }
  b->allocated = true;
  live_[b->ptr] = b;
  stats_.allocated += b->size;
  stats_.max_allocated = std::max(stats_.max_allocated, stats_.allocated);
  ++stats_.num_allocs;
  return b->ptr;
}

void BlockAllocator::free(void* ptr) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(static_cast<char*>(ptr));
  KILN_CHECK(it != live_.end(), "internal: CUDA caching allocator: free of an unknown pointer");
  Block* b = it->second;
  live_.erase(it);
  b->allocated = false;
  stats_.allocated -= b->size;
  if (!b->stream_uses.empty()) {
    // Other streams may still read it: reuse only once their work so far is done.
    for (StreamId s : b->stream_uses) {
      events_.push_back({raw_->record_event(s), b});
      ++b->pending_events;
    }
    b->stream_uses.clear();
    return;
  }
  free_block(b);
}

void BlockAllocator::record_stream(void* ptr, StreamId stream) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(static_cast<char*>(ptr));
  KILN_CHECK(it != live_.end(), "record_stream: the tensor's memory is not from the CUDA caching allocator");
  if (stream != it->second->stream) it->second->stream_uses.insert(stream);
}

void BlockAllocator::process_events() {
  for (size_t i = 0; i < events_.size();) {
    if (!raw_->event_done(events_[i].event)) {
      ++i;
      continue;
    }
    Block* b = events_[i].block;
    raw_->release_event(events_[i].event);
    events_[i] = events_.back();
    events_.pop_back();
    if (--b->pending_events == 0) free_block(b);
  }
}

void BlockAllocator::free_block(Block* b) {
  Pool& pool = pool_for(b->small);
  auto mergeable = [](Block* n) { return n && !n->allocated && n->pending_events == 0; };
  if (mergeable(b->prev)) {
    Block* p = b->prev;
    pool.erase(p);
    p->size += b->size;
    p->next = b->next;
    if (b->next) b->next->prev = p;
    delete b;
    b = p;
  }
  if (mergeable(b->next)) {
    Block* n = b->next;
    pool.erase(n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    delete n;
  }
  pool.insert(b);
}

void BlockAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  process_events();
  release_free_segments();
}

void BlockAllocator::retain_stream(StreamId stream) {
  std::lock_guard<std::mutex> lock(mu_);
  ++retained_[stream];
}

void BlockAllocator::release_stream(StreamId stream) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = retained_.find(stream);
  if (it != retained_.end() && --it->second == 0) retained_.erase(it);
}

MemoryStats BlockAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void BlockAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.max_allocated = stats_.allocated;
  stats_.max_reserved = stats_.reserved;
}

}  // namespace kiln::cuda
