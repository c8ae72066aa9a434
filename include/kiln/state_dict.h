// StateDict: named tensors in insertion order, as torch's OrderedDict state_dict.
// Shared by nn::Module, optimizers, safetensors files and checkpoints.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

class StateDict {
 public:
  using Item = std::pair<std::string, Tensor>;

  // Inserts `key`, or replaces the tensor of an existing key in place (order kept).
  void insert(const std::string& key, Tensor value) {
    auto [it, added] = index_.emplace(key, items_.size());
    if (!added) {
      items_[it->second].second = std::move(value);
      return;
    }
    items_.emplace_back(key, std::move(value));
  }
  const Tensor* find(const std::string& key) const {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  bool contains(const std::string& key) const { return find(key) != nullptr; }
  const Tensor& at(const std::string& key) const {
    const Tensor* t = find(key);
    KILN_CHECK(t, "StateDict: no key '", key, "'");
    return *t;
  }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    out.reserve(items_.size());
    for (const auto& [k, v] : items_) out.push_back(k);
    return out;
  }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }
  const std::vector<Item>& items() const { return items_; }

 private:
  std::vector<Item> items_;
  // Key -> position in items_, so that building a dict of n tensors (a file with many) is
  // n log n, not n^2. Ordered rather than hashed: names come from untrusted files.
  std::map<std::string, size_t> index_;
};

}  // namespace kiln
