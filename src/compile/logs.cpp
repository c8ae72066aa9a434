#include "compile/logs.h"

#include <cstdlib>
#include <mutex>
#include <sstream>

#include "kiln/error.h"

namespace kiln::compiler {

namespace {
constexpr const char* kNames[] = {"graph", "aot", "guards", "recompiles", "breaks", "perf", "fusion", "code"};

unsigned parse_logs() {
  const char* env = std::getenv("KILN_LOGS");
  if (!env) return 0;
  unsigned mask = 0;
  std::stringstream ss(env);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    bool known = false;
    for (unsigned i = 0; i < std::size(kNames); ++i)
      if (item == kNames[i] || item == "all") {
        mask |= item == "all" ? ~0u : 1u << i;
        known = true;
      }
    if (!known)
      std::cerr << "[kiln] KILN_LOGS: unknown entry '" << item
                << "' (valid: graph, aot, guards, recompiles, breaks, perf, fusion, code, all)\n";
  }
  return mask;
}
}  // namespace

bool log_enabled(Log what) {
  static const unsigned mask = parse_logs();
  return (mask >> static_cast<unsigned>(what)) & 1u;
}

void log(Log what, const std::string& text) {
  if (!log_enabled(what)) return;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::cerr << "[kiln " << kNames[static_cast<unsigned>(what)] << "] " << text
            << (text.empty() || text.back() != '\n' ? "\n" : "");
}

}  // namespace kiln::compiler
