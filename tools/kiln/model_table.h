// The model loop shared by `kiln bench zoo` and `kiln bench compile`: one JSON line per model
// with --json, else a table row as each model finishes (the table again at the end with --json).
// A model that fails is reported and the others still run; returns exit code 1 if any failed.
#pragma once
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kiln/error.h"

namespace kiln::cli {

inline int run_model_table(const std::vector<std::string>& names, bool json,
                           const std::function<nlohmann::json(const std::string&)>& run,
                           const std::function<nlohmann::json(const std::string&, const std::string&)>& error_row,
                           const std::function<void()>& header, const std::function<void(const nlohmann::json&)>& row) {
  if (!json) header();
  std::fflush(stdout);
  std::vector<nlohmann::json> rows;
  bool failed = false;
  for (const std::string& name : names) {
    nlohmann::json r;
    try {
      r = run(name);
    } catch (const Error& e) {
      r = error_row(name, e.what());
      failed = true;
    }
    // A run may give several rows (an array): one JSON line each.
    const std::vector<nlohmann::json> got = r.is_array() ? r.get<std::vector<nlohmann::json>>() : std::vector{r};
    for (const nlohmann::json& x : got) {
      if (json)
        std::printf("%s\n", x.dump().c_str());
      else
        row(x);
      rows.push_back(x);
    }
    std::fflush(stdout);
  }
  if (json) {
    header();
    for (const auto& r : rows) row(r);
  }
  return failed ? 1 : 0;
}

}  // namespace kiln::cli
