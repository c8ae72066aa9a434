#include "ops/registry.h"

#include "ops/save_rule.h"

#include <array>

namespace kiln {

namespace {
using enum OpKind;
using enum SaveMask;

std::array<OpInfo, kNumOps>& table() {
  static std::array<OpInfo, kNumOps> t = {{
#define KILN_OP(name, kind, flags, save, sig) OpInfo{#name, kind, static_cast<uint32_t>(flags), save, sig},
#include "ops/ops.def"
#undef KILN_OP
  }};
  return t;
}

template <class Fn>
bool set_once(Fn& slot, Fn fn, OpId op, const char* what) {
  KILN_CHECK(slot == nullptr, "internal: ", what, " for op ", op_name(op), " registered twice");
  slot = fn;
  return true;
}
}  // namespace

const char* op_name(OpId op) { return table()[static_cast<size_t>(op)].name; }
OpInfo& op_info(OpId op) { return table()[static_cast<size_t>(op)]; }

bool register_meta(OpId op, MetaFn fn) { return set_once(op_info(op).meta, fn, op, "meta function"); }
bool register_decomp(OpId op, DecompFn fn) { return set_once(op_info(op).decomp, fn, op, "decomposition"); }
bool register_vjp(OpId op, VjpFn fn) { return set_once(op_info(op).vjp, fn, op, "VJP rule"); }
namespace {
std::array<SaveRuleFn, kNumOps>& save_rules() {
  static std::array<SaveRuleFn, kNumOps> r{};
  return r;
}
}  // namespace
bool register_save_rule(OpId op, SaveRuleFn fn) {
  return set_once(save_rules()[static_cast<size_t>(op)], fn, op, "save rule");
}
SaveRuleFn save_rule(OpId op) { return save_rules()[static_cast<size_t>(op)]; }
bool register_kernel(OpId op, DeviceType device, KernelFn fn) {
  return set_once(op_info(op).kernels[static_cast<int>(device)], fn, op, "kernel");
}

}  // namespace kiln
