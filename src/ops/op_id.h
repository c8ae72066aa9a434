// OpId: one enumerator per op in ops.def.
#pragma once
#include <cstdint>

namespace kiln {

enum class OpId : uint16_t {
#define KILN_OP(name, ...) name,
#include "ops/ops.def"
#undef KILN_OP
};

inline constexpr int kNumOps = 0
#define KILN_OP(name, ...) +1
#include "ops/ops.def"
#undef KILN_OP
    ;
// Note [Op table]: adding or removing an op changes this count; update it
// together with the op's meta/decomposition/VJP/kernels and test samples.
static_assert(kNumOps == 310, "ops.def changed: update kNumOps' expected value and the op's pieces");

const char* op_name(OpId op);

}  // namespace kiln
