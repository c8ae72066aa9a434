// Containers: Sequential, ModuleList, ModuleDict (children named "0", "1", ... or by key) and
// ParameterList, ParameterDict (parameters named "0", "1", ... or by key), as torch.nn.
#pragma once
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/error.h"
#include "kiln/nn/module.h"

namespace kiln::nn {

class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  explicit Sequential(const std::vector<std::shared_ptr<Module>>& modules);
  void push_back(std::shared_ptr<Module> m);
  Tensor forward(const Tensor& x) override;  // each child's forward in order
  size_t size() const { return modules_.size(); }
  // The i-th module; a negative i counts from the end (layers[-1], as torch).
  const std::shared_ptr<Module>& operator[](int64_t i) const;
  // The i-th module as its concrete type; throws when it is another type.
  template <class M>
  std::shared_ptr<M> at(int64_t i) const {
    auto p = std::dynamic_pointer_cast<M>((*this)[i]);
    KILN_CHECK(p, "Sequential::at: module ", i, " is a ", (*this)[i]->type_name(), ", not the type asked for");
    return p;
  }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}
  ModuleList(std::initializer_list<std::shared_ptr<Module>> modules);
  explicit ModuleList(const std::vector<std::shared_ptr<Module>>& modules);
  void push_back(std::shared_ptr<Module> m);
  size_t size() const { return modules_.size(); }
  // The i-th module; a negative i counts from the end (layers[-1], as torch).
  const std::shared_ptr<Module>& operator[](int64_t i) const;
  // The i-th module as its concrete type; throws when it is another type.
  template <class M>
  std::shared_ptr<M> at(int64_t i) const {
    auto p = std::dynamic_pointer_cast<M>((*this)[i]);
    KILN_CHECK(p, "ModuleList::at: module ", i, " is a ", (*this)[i]->type_name(), ", not the type asked for");
    return p;
  }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

class ModuleDict : public Module {
 public:
  ModuleDict() : Module("ModuleDict") {}
  explicit ModuleDict(const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& modules);
  void insert(const std::string& key, std::shared_ptr<Module> m);  // replaces an existing key
  bool contains(const std::string& key) const;
  const std::shared_ptr<Module>& operator[](const std::string& key) const;
  // The module under `key` as its concrete type; throws when it is another type.
  template <class M>
  std::shared_ptr<M> at(const std::string& key) const {
    auto p = std::dynamic_pointer_cast<M>((*this)[key]);
    KILN_CHECK(p, "ModuleDict::at: module '", key, "' is a ", (*this)[key]->type_name(), ", not the type asked for");
    return p;
  }
  std::vector<std::string> keys() const;
  size_t size() const { return modules_.size(); }

 private:
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> modules_;
};

// Parameters registered as "0", "1", ...; each requires grad, as torch's ParameterList makes
// every tensor a Parameter. The handles returned share the registered tensors.
class ParameterList : public Module {
 public:
  ParameterList() : Module("ParameterList") {}
  ParameterList(std::initializer_list<Tensor> params);
  explicit ParameterList(const std::vector<Tensor>& params);
  void push_back(Tensor p);  // torch's append
  size_t size() const { return list_.size(); }
  const Tensor& operator[](int64_t i) const;  // a negative i counts from the end
  auto begin() const { return list_.begin(); }
  auto end() const { return list_.end(); }

 private:
  std::vector<Tensor> list_;
};

// Parameters registered under their keys, in insertion order; insert replaces an existing key.
class ParameterDict : public Module {
 public:
  ParameterDict() : Module("ParameterDict") {}
  explicit ParameterDict(const std::vector<std::pair<std::string, Tensor>>& params);
  void insert(const std::string& key, Tensor p);
  bool contains(const std::string& key) const;
  const Tensor& operator[](const std::string& key) const;
  std::vector<std::string> keys() const;
  size_t size() const { return dict_.size(); }
  auto begin() const { return dict_.begin(); }
  auto end() const { return dict_.end(); }

 private:
  std::vector<std::pair<std::string, Tensor>> dict_;
};

}  // namespace kiln::nn
