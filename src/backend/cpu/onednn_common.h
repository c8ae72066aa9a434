// What kiln's oneDNN users share (onednn_conv.cpp, onednn_matmul.cpp): the CPU engine and the
// thread hook. Included only where KILN_HAVE_ONEDNN is defined (CMakeLists.txt sets it per file).
#pragma once
#include <omp.h>

#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "core/parallel.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace kiln::cpu::onednn {

inline dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// The thread hook: oneDNN (OpenMP runtime) runs on omp_get_max_threads() threads, so this
// sets it to kiln's budget around each build and call, and to 1 inside a kiln parallel
// region so threads never multiply. The thread-budget work joins here.
inline int onednn_threads() { return in_parallel_region() ? 1 : get_num_threads(); }
struct OmpThreads {
  int prev;
  explicit OmpThreads(int n) : prev(omp_get_max_threads()) {
    if (n != prev) omp_set_num_threads(n);
  }
  ~OmpThreads() {
    if (omp_get_max_threads() != prev) omp_set_num_threads(prev);
  }
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;
};

// A bounded LRU map of built primitives (most recently used at the front), shared by threads.
// Entry has a bool `ok`, left false when oneDNN refused the case (kiln's kernels then run it).
template <class Key, class Entry, size_t kCapacity = 256>
class PrimitiveCache {
 public:
  template <class Build>
  std::shared_ptr<const Entry> get(const Key& k, const Build& build) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = index_.find(k);
      if (it != index_.end()) {
        order_.splice(order_.begin(), order_, it->second);
        return it->second->second;
      }
    }
    auto e = std::make_shared<Entry>();
    try {
      *e = build();
    } catch (const dnnl::error&) {
      e->ok = false;
    }
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(k);
    if (it != index_.end()) return it->second->second;
    order_.emplace_front(k, e);
    index_[k] = order_.begin();
    if (order_.size() > kCapacity) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
    return e;
  }

 private:
  using Item = std::pair<Key, std::shared_ptr<const Entry>>;
  std::mutex mu_;
  std::list<Item> order_;
  std::map<Key, typename std::list<Item>::iterator> index_;
};

}  // namespace kiln::cpu::onednn
