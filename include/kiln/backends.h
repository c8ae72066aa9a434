// Optional CPU libraries kiln was built with, as torch.backends.mkldnn: whether oneDNN
// computes the CPU convolutions, and switching it off at run time.
#pragma once
#include <string>

namespace kiln::backends::onednn {

// True when kiln was built with oneDNN (Debian's libdnnl-dev, CMake option KILN_ONEDNN).
bool is_available();
// True when float convolutions go to oneDNN: available, not switched off by KILN_ONEDNN=0
// (read once) or set_enabled(false). torch.backends.mkldnn.enabled.
bool enabled();
void set_enabled(bool on);
// oneDNN's version ("2.6.3") and the instruction set its kernels use ("avx512_core_bf16");
// empty strings when not available.
std::string version();
std::string isa();

}  // namespace kiln::backends::onednn
