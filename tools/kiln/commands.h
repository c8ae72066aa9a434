#pragma once

namespace kiln::cli {

struct BenchOptions {
  int repeat = 11;
  bool json = false;
};

int cmd_info(bool json);
int cmd_ops(bool json);
int cmd_bench_ops(const BenchOptions& opts);

}  // namespace kiln::cli
