// Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict.
#include "kiln/nn/container.h"

namespace kiln::nn {
namespace {
// Index i of a container of n items, a negative i counting from the end (Python's rule).
size_t position(int64_t i, size_t n, const char* what, const char* items) {
  const int64_t size = static_cast<int64_t>(n), j = i < 0 ? i + size : i;
  KILN_CHECK(j >= 0 && j < size, what, ": index ", i, " out of range for ", n, " ", items);
  return static_cast<size_t>(j);
}
}  // namespace

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
const std::shared_ptr<Module>& Sequential::operator[](int64_t i) const {
  return modules_[position(i, modules_.size(), "Sequential", "modules")];
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
const std::shared_ptr<Module>& ModuleList::operator[](int64_t i) const {
  return modules_[position(i, modules_.size(), "ModuleList", "modules")];
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

ParameterList::ParameterList(std::initializer_list<Tensor> params) : Module("ParameterList") {
  for (auto& p : params) push_back(p);
}
ParameterList::ParameterList(const std::vector<Tensor>& params) : Module("ParameterList") {
  for (auto& p : params) push_back(p);
}
void ParameterList::push_back(Tensor p) {
  list_.push_back(register_parameter(std::to_string(list_.size()), std::move(p)));
}
const Tensor& ParameterList::operator[](int64_t i) const {
  return list_[position(i, list_.size(), "ParameterList", "parameters")];
}

ParameterDict::ParameterDict(const std::vector<std::pair<std::string, Tensor>>& params) : Module("ParameterDict") {
  for (auto& [k, p] : params) insert(k, p);
}
void ParameterDict::insert(const std::string& key, Tensor p) {
  Tensor& registered = register_parameter(key, std::move(p));
  for (auto& [k, v] : dict_)
    if (k == key) {
      v = registered;
      return;
    }
  dict_.emplace_back(key, registered);
}
bool ParameterDict::contains(const std::string& key) const {
  for (auto& [k, v] : dict_)
    if (k == key) return true;
  return false;
}
const Tensor& ParameterDict::operator[](const std::string& key) const {
  for (auto& [k, v] : dict_)
    if (k == key) return v;
  KILN_FAIL("ParameterDict: no parameter with key '", key, "'");
}
std::vector<std::string> ParameterDict::keys() const {
  std::vector<std::string> out;
  for (auto& [k, v] : dict_) out.push_back(k);
  return out;
}

}  // namespace kiln::nn
