// A fixture for tests that compile C++: each test compiles into a cache of its own (cold),
// removed afterwards.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "compile/jit/cpp_jit.h"

namespace kiln::testing {

class FreshJitCache : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("kiln-" + std::string(info->test_suite_name()) + "-test-" + std::to_string(getpid()) + "-" + info->name());
    std::filesystem::remove_all(dir_);
    setenv("KILN_CACHE_DIR", dir_.c_str(), 1);
    compiler::jit::reset_memory_cache();
  }
  void TearDown() override {
    unsetenv("KILN_CACHE_DIR");
    std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
};

}  // namespace kiln::testing
