// Which saved tensors an op's VJP reads, given which of its inputs need a gradient.
#pragma once
#include <cstdint>

#include "ops/registry.h"

namespace kiln {

// Note [Saving what the VJP reads]
// The op table's save column (SaveIn / SaveOut) says what a VJP may read; a save rule narrows it
// to what it reads for the inputs that need a gradient, as PyTorch's derivatives.yaml saves
// `other` of mul only when `self` needs one. A tensor never saved cannot make backward raise
// "modified by an in-place operation": `y = x * w.detach(); w.add_(1)` is no error (PyTorch
// agrees), and `conv2d(x, w, b)` never saves b. The rule must keep every tensor the VJP reads
// for the inputs that need a gradient (a VJP finds the others undefined), and it is decided once,
// when the node is recorded (VjpCall::needs is fixed then too: it is which next edges exist).
struct SaveSet {
  uint64_t inputs = ~uint64_t{0};   // bit k: input k (inputs past 63 are always saved)
  uint64_t outputs = ~uint64_t{0};  // bit k: output k
  // Bit k: input k is read for its layout only (sizes, strides, offset: as_strided's), so a
  // storage-less stand-in is saved and a later write into it is no error (PyTorch saves a
  // TensorGeometry there).
  uint64_t geometry = 0;
};
// needs: bit i set when input i needs a gradient (inputs past 63: not given).
using SaveRuleFn = SaveSet (*)(uint64_t needs, const Attrs& attrs);

bool register_save_rule(OpId op, SaveRuleFn fn);
// Null where the op has none (its save column decides alone).
SaveRuleFn save_rule(OpId op);

// Whether input k / output k of a recorded call of op is saved.
inline bool saves_input(const SaveSet& s, size_t k) { return k >= 64 || ((s.inputs >> k) & 1u) != 0; }
inline bool saves_input(OpId op, const SaveSet& s, size_t k) {
  return (static_cast<uint8_t>(op_info(op).save) & static_cast<uint8_t>(SaveMask::SaveIn)) && saves_input(s, k);
}
inline bool saves_output(OpId op, const SaveSet& s, size_t k) {
  return (static_cast<uint8_t>(op_info(op).save) & static_cast<uint8_t>(SaveMask::SaveOut)) &&
         (k >= 64 || ((s.outputs >> k) & 1u) != 0);
}
inline SaveSet save_set(OpId op, uint64_t needs, const Attrs& attrs) {
  SaveRuleFn fn = save_rule(op);
  return fn ? fn(needs, attrs) : SaveSet{};
}

}  // namespace kiln

#define KILN_REGISTER_SAVE_RULE(op, fn) \
  [[maybe_unused]] static const bool KILN_CONCAT(kiln_save_rule_, op) = ::kiln::register_save_rule(::kiln::OpId::op, fn)
