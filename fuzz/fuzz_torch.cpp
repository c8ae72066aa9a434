// libFuzzer target: arbitrary bytes into kiln::pytorch::load, the torch.save reader (zip
// archive + restricted unpickler). It may only answer with a kiln::Error; anything else (another
// exception, a sanitizer report, a leak, a crash) is a bug. Built and run by scripts/fuzz.
#include <cstddef>
#include <cstdint>

#include "kiln/io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  volatile uint8_t sink = 0;
  try {
    kiln::StateDict sd = kiln::pytorch::load(data, size);
    for (const auto& [key, t] : sd) {
      // Every byte of every tensor must be readable (a view past its storage shows up under ASan).
      const auto* p = static_cast<const uint8_t*>(t.data_ptr());
      for (size_t i = 0; i < t.nbytes(); ++i) sink = sink ^ p[i];
      if (!t.is_contiguous()) __builtin_trap();  // the reader promises owned contiguous tensors
    }
  } catch (const kiln::Error&) {
  }
  return 0;
}
