// libFuzzer target: arbitrary bytes into the in-memory safetensors and .npy readers.
// A reader may only answer with a kiln::Error; anything else (another exception, a
// sanitizer report, a crash) is a bug. Built and run by scripts/fuzz.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kiln/io.h"

namespace {

// Reads every byte of a tensor, so a view past its data shows up under AddressSanitizer.
uint8_t touch(const kiln::Tensor& t) {
  kiln::Tensor c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  uint8_t acc = 0;
  for (size_t i = 0; i < c.nbytes(); ++i) acc ^= p[i];
  return acc;
}

bool same_bytes(const kiln::Tensor& a, const kiln::Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes().vec() != b.sizes().vec()) return false;
  kiln::Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.nbytes() == 0 || std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  volatile uint8_t sink = 0;
  try {
    kiln::StateDict sd = kiln::safetensors::load(data, size);
    for (const auto& [key, t] : sd) sink = sink ^ touch(t);
    // Whatever the reader accepts, the writer must write back losslessly.
    kiln::StateDict again = kiln::safetensors::load(kiln::safetensors::save(sd));
    if (again.size() != sd.size()) __builtin_trap();
    for (const auto& [key, t] : sd)
      if (!again.contains(key) || !same_bytes(again.at(key), t)) __builtin_trap();
  } catch (const kiln::Error&) {
  }
  try {
    kiln::Tensor t = kiln::load_npy(data, size);
    sink = sink ^ touch(t);
    std::vector<uint8_t> bytes = kiln::save_npy(t);
    if (!same_bytes(kiln::load_npy(bytes.data(), bytes.size()), t)) __builtin_trap();
  } catch (const kiln::Error&) {
  }
  return 0;
}
