// Per-thread free lists for the small objects every op makes (Note [Impl pool]).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <new>

namespace kiln {

// Note [Impl pool]
// Every op makes a TensorImpl and (unless a view) a VersionCounter, and a recording makes and
// drops thousands of each per call, more than malloc's per-thread cache keeps:
// then each allocation and free takes malloc's slow paths. Their blocks (with the shared_ptr control block) come from a
// per-thread free list instead, last freed first out, so a new tensor usually lands in memory that is still in cache. A
// block freed on another thread joins that thread's list; each list keeps at most kMaxFree blocks and is given back
// when its thread ends.
template <size_t Size, size_t Align>
class FreeList {
 public:
  // A block of Size bytes aligned to Align.
  static void* pop() {
    if (Block* b = head) {
      head = b->next;
      --count;
      return b;
    }
    return ::operator new(Size, std::align_val_t(Align));
  }
  // Gives back a block that pop() returned (on any thread).
  static void push(void* p) {
    if (count >= kMaxFree || draining) {
      ::operator delete(p, std::align_val_t(Align));
      return;
    }
    if (!registered) {  // the thread's first block: free the list when the thread ends
      registered = true;
      static thread_local Drain drain;
      (void)drain;
    }
    head = new (p) Block{head};
    ++count;
  }

 private:
  static constexpr uint32_t kMaxFree = 8192;
  struct Block {
    Block* next;
  };
  struct Drain {
    ~Drain() {
      draining = true;
      while (Block* b = head) {
        head = b->next;
        ::operator delete(b, std::align_val_t(Align));
      }
      count = 0;
    }
  };
  static inline thread_local Block* head = nullptr;
  static inline thread_local uint32_t count = 0;
  static inline thread_local bool registered = false;
  static inline thread_local bool draining = false;
};

// An allocator over the free lists, for std::allocate_shared (one block: object and control).
template <class T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() = default;
  template <class U>
  PoolAllocator(const PoolAllocator<U>&) {}
  T* allocate(size_t n) {
    if (n != 1) return static_cast<T*>(::operator new(n * sizeof(T)));
    return static_cast<T*>(FreeList<sizeof(T), std::max(alignof(T), sizeof(void*))>::pop());
  }
  void deallocate(T* p, size_t n) {
    if (n != 1) return ::operator delete(p);
    FreeList<sizeof(T), std::max(alignof(T), sizeof(void*))>::push(p);
  }
  template <class U>
  bool operator==(const PoolAllocator<U>&) const {
    return true;
  }
};

}  // namespace kiln
