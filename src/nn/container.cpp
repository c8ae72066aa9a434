// Sequential, ModuleList, ModuleDict.
#include "kiln/nn/container.h"

namespace kiln::nn {

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) : Module("Sequential") {
  for (auto& m : modules) push_back(m);
}
Sequential::Sequential(const std::vector<std::shared_ptr<Module>>& modules) : Module("Sequential") {
  for (auto& m : modules) push_back(m);
}
void Sequential::push_back(std::shared_ptr<Module> m) {
  register_module(std::to_string(modules_.size()), m);
  modules_.push_back(std::move(m));
}
Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (auto& m : modules_) y = m->forward(y);
  return y;
}
const std::shared_ptr<Module>& Sequential::operator[](size_t i) const {
  KILN_CHECK(i < modules_.size(), "Sequential: index ", i, " out of range for ", modules_.size(), " modules");
  return modules_[i];
}

ModuleList::ModuleList(std::initializer_list<std::shared_ptr<Module>> modules) : Module("ModuleList") {
  for (auto& m : modules) push_back(m);
}
ModuleList::ModuleList(const std::vector<std::shared_ptr<Module>>& modules) : Module("ModuleList") {
  for (auto& m : modules) push_back(m);
}
void ModuleList::push_back(std::shared_ptr<Module> m) {
  register_module(std::to_string(modules_.size()), m);
  modules_.push_back(std::move(m));
}
const std::shared_ptr<Module>& ModuleList::operator[](size_t i) const {
  KILN_CHECK(i < modules_.size(), "ModuleList: index ", i, " out of range for ", modules_.size(), " modules");
  return modules_[i];
}

ModuleDict::ModuleDict(const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& modules)
    : Module("ModuleDict") {
  for (auto& [k, m] : modules) insert(k, m);
}
void ModuleDict::insert(const std::string& key, std::shared_ptr<Module> m) {
  register_module(key, m);
  for (auto& [k, v] : modules_)
    if (k == key) {
      v = std::move(m);
      return;
    }
  modules_.emplace_back(key, std::move(m));
}
bool ModuleDict::contains(const std::string& key) const {
  for (auto& [k, v] : modules_)
    if (k == key) return true;
  return false;
}
const std::shared_ptr<Module>& ModuleDict::operator[](const std::string& key) const {
  for (auto& [k, v] : modules_)
    if (k == key) return v;
  KILN_FAIL("ModuleDict: no module with key '", key, "'");
}
std::vector<std::string> ModuleDict::keys() const {
  std::vector<std::string> out;
  for (auto& [k, v] : modules_) out.push_back(k);
  return out;
}

}  // namespace kiln::nn
