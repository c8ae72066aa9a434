// Layout passes: where a compiled graph lays values out otherwise than eager's contiguous
// default (Note [Channels-last graphs] in layout.cpp).
#pragma once
#include "compile/ir/graph.h"

namespace kiln::compiler::lower {

// Whether graphs on device d get channels-last convolutions: KILN_CHANNELS_LAST=cuda (or 1)
// for CUDA graphs, =all for every device (the CPU's convolutions stay NCHW and their outputs are
// converted: for tests), =0 or unset for none.
bool channels_last_enabled(Device d);

// Lays out the activations of g's 2-d convolutions channels-last (NHWC) where the graph can:
// conversions before convolutions whose input is not, the layout carried through the
// pointwise and reduction work between them, views re-derived; graph inputs and outputs keep
// their layouts. g must be pure; a symbolic graph is left alone. Nodes are inserted: where
// *boundary is given (the joint graph's first backward node), it is moved to stay the index of
// the same node. Returns how many convolutions run NHWC.
int channels_last_convolutions(Graph& g, size_t* boundary = nullptr);

// Convolutions made NHWC by every call so far, in this process (tests compare it around a compile).
int64_t nhwc_convolutions();

}  // namespace kiln::compiler::lower
