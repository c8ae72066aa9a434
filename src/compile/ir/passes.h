// Generic graph passes. Each keeps the graph's meaning under the buffer
// semantics of graph.h (writes and views included) and leaves it verified.
#pragma once
#include "compile/ir/graph.h"

namespace kiln::compiler {

// Removes nodes whose outputs are unused and that write nothing. Returns how many.
int dead_code_elimination(Graph& g);
// Merges nodes that compute the same op on the same inputs with equal attrs
// (not random, not writing, and never on buffers that a write may change).
int common_subexpression_elimination(Graph& g);
// Lets the readers of a same-dtype copy whose input has its layout read that input instead,
// where nothing can tell them apart (Note [Copy elision]). Only for graphs that are not
// differentiated again. Returns how many copies went.
int elide_copies(Graph& g);
// Per value, the value it is a view of, transitively (views alias input 0 of their node); itself
// where it is no view.
std::vector<int> view_roots(const Graph& g);
// Renumbers values in definition order, dropping values no node defines.
void compact(Graph& g);

}  // namespace kiln::compiler
