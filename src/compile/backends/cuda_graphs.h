// Mode "reduce-overhead" on a GPU: a compiled graph replayed as one CUDA graph (Note [CUDA graphs
// in reduce-overhead] in cuda_graphs.cpp).
#pragma once
#include <memory>

#include "compile/backends/backend.h"

namespace kiln::compiler {

// `run` (a backend's runner of graph g) wrapped so that, where every value of g lives on one
// CUDA device and no op draws random numbers, its first call runs as usual, its second is
// captured as a CUDA graph, and later calls replay it. Elsewhere `run` itself.
GraphFn with_cuda_graphs(const Graph& g, GraphFn run, std::shared_ptr<KernelCounts> counts);

}  // namespace kiln::compiler
