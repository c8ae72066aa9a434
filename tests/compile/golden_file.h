// Golden snapshot files under tests/golden/compile: compares a text with its file, or rewrites
// the file with KILN_UPDATE_GOLDEN=1 (then read the diff before committing).
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#ifndef KILN_GOLDEN_DIR
#error "KILN_GOLDEN_DIR must name tests/golden/compile"
#endif

namespace kiln::testing {

inline void expect_golden_file(const std::string& file, const std::string& text, const std::string& what) {
  const std::string path = std::string(KILN_GOLDEN_DIR) + "/" + file;
  if (std::getenv("KILN_UPDATE_GOLDEN")) {
    std::ofstream(path) << text;
    return;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << "missing golden file " << path << " (run with KILN_UPDATE_GOLDEN=1 to create it)";
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(text, want.str()) << what << " changed; if intended, rerun with KILN_UPDATE_GOLDEN=1";
}

}  // namespace kiln::testing
