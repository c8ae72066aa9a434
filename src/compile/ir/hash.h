// Hashing of what a recording sees (ops, attrs, tensor metadata): the key
// that selects a compiled graph (Note [Capture semantics]).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ops/registry.h"

namespace kiln::compiler {

struct Hasher {
  uint64_t h = 0xcbf29ce484222325ull;
  void mix(uint64_t v) {
    // splitmix-style mixing of 64-bit words: cheap and well spread.
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xbf58476d1ce4e5b9ull;
  }
  void mix_double(double d) {
    uint64_t u;
    std::memcpy(&u, &d, sizeof u);
    mix(u);
  }
  void mix_str(const std::string& s) {
    mix(s.size());
    for (char c : s) mix(static_cast<unsigned char>(c));
  }
  void mix_ints(IntArrayRef v) {  // a view: Shape and std::vector hash without a copy
    mix(v.size());
    for (int64_t x : v) mix(static_cast<uint64_t>(x));
  }
  void mix_attr(const AttrValue& a);
  void mix_meta(const TensorMeta& m);
};

bool attr_equal(const AttrValue& a, const AttrValue& b);

}  // namespace kiln::compiler
