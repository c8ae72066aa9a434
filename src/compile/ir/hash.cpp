#include "compile/ir/hash.h"

#include "core/sym_table.h"

namespace kiln::compiler {

namespace {
// A symbolic value hashes by its expression (the same in every call), not its tag.
uint64_t int_key(int64_t raw) {
  if (!SymInt::raw_is_symbolic(raw)) return static_cast<uint64_t>(raw);
  const SymTable* t = active_sym_table();
  KILN_CHECK(t, "internal: a symbolic attr hashed outside its recording");
  return t->hash(raw) ^ 0x5f3c9d2a11ull;
}
}  // namespace

void Hasher::mix_attr(const AttrValue& a) {
  mix(a.index());
  std::visit(
      [&](const auto& v) {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, std::monostate>) {
        } else if constexpr (std::is_same_v<V, bool>)
          mix(static_cast<uint64_t>(v));
        else if constexpr (std::is_same_v<V, int64_t>)
          mix(int_key(v));
        else if constexpr (std::is_same_v<V, double>)
          mix_double(v);
        else if constexpr (std::is_same_v<V, Scalar>) {
          mix(static_cast<uint64_t>(v.dtype()));
          if (v.is_floating_point())
            mix_double(v.to_double());
          else
            mix(int_key(v.to_long()));
        } else if constexpr (std::is_same_v<V, DType>)
          mix(static_cast<uint64_t>(v));
        else if constexpr (std::is_same_v<V, Device>)
          mix((static_cast<uint64_t>(v.type) << 8) | static_cast<uint8_t>(v.index));
        else if constexpr (std::is_same_v<V, std::vector<int64_t>>) {
          mix(v.size());
          for (int64_t x : v) mix(int_key(x));
        }
        else if constexpr (std::is_same_v<V, std::vector<double>>) {
          mix(v.size());
          for (double d : v) mix_double(d);
        } else
          mix_str(v);
      },
      a);
}

void Hasher::mix_meta(const TensorMeta& m) {
  mix_ints(m.sizes);
  mix_ints(m.strides);
  mix(static_cast<uint64_t>(m.storage_offset));
  mix(static_cast<uint64_t>(m.dtype));
  mix((static_cast<uint64_t>(m.device.type) << 8) | static_cast<uint8_t>(m.device.index));
}

bool attr_equal(const AttrValue& a, const AttrValue& b) {
  if (a.index() != b.index()) return false;
  if (const auto* s = std::get_if<Scalar>(&a)) {
    const Scalar& t = std::get<Scalar>(b);
    if (s->dtype() != t.dtype()) return false;
    if (s->is_floating_point()) {
      double x = s->to_double(), y = t.to_double();
      return std::memcmp(&x, &y, sizeof x) == 0;  // bitwise: -0.0 and NaN payloads differ
    }
    return s->to_long() == t.to_long();
  }
  if (const auto* d = std::get_if<double>(&a)) {
    double y = std::get<double>(b);
    return std::memcmp(d, &y, sizeof y) == 0;
  }
  if (const auto* dv = std::get_if<std::vector<double>>(&a)) {
    const auto& w = std::get<std::vector<double>>(b);
    return dv->size() == w.size() &&
           (dv->empty() || std::memcmp(dv->data(), w.data(), dv->size() * sizeof(double)) == 0);
  }
  return a == b;
}

}  // namespace kiln::compiler
