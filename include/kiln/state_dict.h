// StateDict: named tensors in insertion order, as torch's OrderedDict state_dict.
// Shared by nn::Module, optimizers, safetensors files and checkpoints.
#pragma once
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
    for (auto& [k, v] : items_)
      if (k == key) {
        v = std::move(value);
        return;
      }
    items_.emplace_back(key, std::move(value));
  }
  const Tensor* find(const std::string& key) const {
    for (const auto& [k, v] : items_)
      if (k == key) return &v;
    return nullptr;
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
};

}  // namespace kiln
