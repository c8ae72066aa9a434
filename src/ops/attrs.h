// Attrs: the non-tensor arguments of an op call, in the order its ops.def
// signature lists them.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/sym_table.h"
#include "kiln/device.h"
#include "kiln/dtype.h"
#include "kiln/error.h"
#include "kiln/scalar.h"

namespace kiln {

using AttrValue = std::variant<std::monostate, bool, int64_t, double, Scalar, DType, Device,
                               std::vector<int64_t>, std::vector<double>, std::string>;

// Note [Symbolic attrs]
// While a compiled function is recorded, a size attr may hold a symbolic
// SymInt (tagged, Note [SymInt encoding]). Attrs then keeps two lists: the
// values in this call, which everything reads (meta functions, kernels,
// decompositions, VJP rules), and the symbolic originals, which only the
// recorder reads (symbolic_values()) to hash and store the expression. So a
// tag never reaches code that computes with sizes.
class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<AttrValue> v) : v_(v) {
    if (symbols_live()) split_symbolic();
  }
  explicit Attrs(std::vector<AttrValue> v) : v_(std::move(v)) {
    if (symbols_live()) split_symbolic();
  }

  size_t size() const { return v_.size(); }
  const AttrValue& operator[](size_t k) const { return v_.at(k); }
  void push_back(AttrValue a) {
    if (sym_) {
      auto s = std::make_shared<std::vector<AttrValue>>(*sym_);
      s->push_back(a);
      sym_ = std::move(s);
    }
    v_.push_back(std::move(a));
    if (symbols_live()) split_symbolic();
  }
  const std::vector<AttrValue>& values() const { return v_; }
  // The recorder's view: symbolic entries as written (Note [Symbolic attrs]).
  const std::vector<AttrValue>& symbolic_values() const { return sym_ ? *sym_ : v_; }
  bool has_symbolic() const { return sym_ != nullptr; }

  bool none(size_t k) const { return std::holds_alternative<std::monostate>(at(k)); }
  int64_t i(size_t k) const { return get<int64_t>(k); }
  double f(size_t k) const {
    const auto& a = at(k);
    if (auto* d = std::get_if<double>(&a)) return *d;
    if (auto* s = std::get_if<Scalar>(&a)) return s->to_double();
    return static_cast<double>(get<int64_t>(k));
  }
  bool b(size_t k) const { return get<bool>(k); }
  const Scalar& s(size_t k) const { return get<Scalar>(k); }
  DType dtype(size_t k) const { return get<DType>(k); }
  Device device(size_t k) const { return get<Device>(k); }
  const std::vector<int64_t>& ints(size_t k) const { return get<std::vector<int64_t>>(k); }
  const std::vector<double>& doubles(size_t k) const { return get<std::vector<double>>(k); }
  const std::string& str(size_t k) const { return get<std::string>(k); }
  std::optional<int64_t> opt_i(size_t k) const { return none(k) ? std::nullopt : std::optional(i(k)); }
  std::optional<double> opt_f(size_t k) const { return none(k) ? std::nullopt : std::optional(f(k)); }
  std::optional<bool> opt_b(size_t k) const { return none(k) ? std::nullopt : std::optional(b(k)); }
  std::optional<Scalar> opt_s(size_t k) const { return none(k) ? std::nullopt : std::optional(s(k)); }
  std::optional<DType> opt_dtype(size_t k) const { return none(k) ? std::nullopt : std::optional(dtype(k)); }
  std::optional<std::string> opt_str(size_t k) const { return none(k) ? std::nullopt : std::optional(str(k)); }

 private:
  const AttrValue& at(size_t k) const {
    KILN_CHECK(k < v_.size(), "internal: op attribute ", k, " missing (have ", v_.size(), ")");
    return v_[k];
  }
  template <class T>
  const T& get(size_t k) const {
    const auto* p = std::get_if<T>(&at(k));
    KILN_CHECK(p, "internal: op attribute ", k, " has the wrong type");
    return *p;
  }
  void split_symbolic();
  std::vector<AttrValue> v_;
  std::shared_ptr<const std::vector<AttrValue>> sym_;  // null unless some value was symbolic
};

// Whether a value holds a symbolic SymInt; its value in this call.
bool attr_is_symbolic(const AttrValue& a);
AttrValue attr_hint(const AttrValue& a);
// While a composite that was given symbolic attrs runs its decomposition, its attrs are at hand
// for the recorder to match the sizes the decomposition computes as numbers (Note [Dynamic shapes]).
class SymAttrScope {
 public:
  explicit SymAttrScope(const Attrs& a);
  ~SymAttrScope();
  SymAttrScope(const SymAttrScope&) = delete;
  SymAttrScope& operator=(const SymAttrScope&) = delete;

 private:
  bool pushed_ = false;
};
// The symbolic attrs of the composites being decomposed on this thread, innermost last.
const std::vector<const std::vector<AttrValue>*>& sym_attr_context();

// Whether attrs' symbolic values belong to this thread's active table (a graph replayed in
// another recording carries tags that mean nothing there).
bool attrs_live(const Attrs& attrs);

// Optional values as attrs (std::nullopt → monostate).
template <class T>
AttrValue opt_attr(const std::optional<T>& v) {
  if (!v) return std::monostate{};
  return AttrValue(*v);
}

}  // namespace kiln
