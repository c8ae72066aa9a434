// KILN_LOGS=graph,aot,guards,recompiles,breaks,perf,fusion,code: what each compile stage did, on stderr.
#pragma once
#include <iostream>
#include <string>

namespace kiln::compiler {

enum class Log { Graph, Aot, Guards, Recompiles, Breaks, Perf, Fusion, Code };
bool log_enabled(Log what);
// Prints "[kiln <what>] text" when enabled.
void log(Log what, const std::string& text);

}  // namespace kiln::compiler
