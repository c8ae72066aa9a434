// Attrs that hold symbolic sizes (Note [Symbolic attrs]).
#include "ops/attrs.h"

namespace kiln {

bool attr_is_symbolic(const AttrValue& a) {
  if (const auto* i = std::get_if<int64_t>(&a)) return SymInt::raw_is_symbolic(*i);
  if (const auto* s = std::get_if<Scalar>(&a)) return s->is_integral() && SymInt::raw_is_symbolic(s->to_long());
  if (const auto* v = std::get_if<std::vector<int64_t>>(&a))
    for (int64_t x : *v)
      if (SymInt::raw_is_symbolic(x)) return true;
  return false;
}

AttrValue attr_hint(const AttrValue& a) {
  if (const auto* i = std::get_if<int64_t>(&a)) return SymInt::from_raw(*i).expect_int();
  if (const auto* s = std::get_if<Scalar>(&a); s && s->is_integral() && SymInt::raw_is_symbolic(s->to_long()))
    return Scalar(SymInt::from_raw(s->to_long()).expect_int());
  if (const auto* v = std::get_if<std::vector<int64_t>>(&a)) {
    std::vector<int64_t> out(*v);
    for (int64_t& x : out) x = SymInt::from_raw(x).expect_int();
    return out;
  }
  return a;
}

bool attrs_live(const Attrs& attrs) {
  const SymTable* t = active_sym_table();
  if (!t) return false;
  for (const AttrValue& a : attrs.symbolic_values()) {
    if (const auto* i = std::get_if<int64_t>(&a); i && SymInt::raw_is_symbolic(*i) && !t->owns(*i)) return false;
    if (const auto* v = std::get_if<std::vector<int64_t>>(&a))
      for (int64_t x : *v)
        if (SymInt::raw_is_symbolic(x) && !t->owns(x)) return false;
  }
  return true;
}

namespace {
thread_local std::vector<const std::vector<AttrValue>*> tls_context;
}
SymAttrScope::SymAttrScope(const Attrs& a) {
  if (!a.has_symbolic()) return;
  tls_context.push_back(&a.symbolic_values());
  pushed_ = true;
}
SymAttrScope::~SymAttrScope() {
  if (pushed_) tls_context.pop_back();
}
const std::vector<const std::vector<AttrValue>*>& sym_attr_context() { return tls_context; }

void Attrs::split_symbolic() {
  bool any = false;
  for (const AttrValue& a : v_) any = any || attr_is_symbolic(a);
  if (!any) return;
  if (!sym_) sym_ = std::make_shared<const std::vector<AttrValue>>(v_);
  for (AttrValue& a : v_) a = attr_hint(a);
}

}  // namespace kiln
