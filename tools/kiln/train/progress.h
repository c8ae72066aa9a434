// The training progress display: a live bar redrawn in place on a terminal, plain lines
// (one per logged interval) otherwise.
#pragma once
#include <chrono>
#include <cstdint>
#include <iosfwd>

namespace kiln::train {

class Progress {
 public:
  Progress(std::ostream& out, int64_t total_steps, int64_t start_step, int64_t samples_per_step, bool bar,
           bool lines);
  // After every step; `loss` is the running mean of the current interval.
  void update(int64_t step_done, double loss);
  // At the end of a logged interval (plain-line mode prints here).
  void interval(int64_t step_done, double interval_loss);
  void finish();
  double samples_per_second() const;

 private:
  void draw(int64_t step_done, double loss, bool force);
  double elapsed() const;

  std::ostream& out_;
  int64_t total_, start_, samples_per_step_;
  bool bar_, lines_;
  std::chrono::steady_clock::time_point t0_;
  double last_draw_ = -1;
  int64_t last_step_ = 0;
  double last_loss_ = 0;
  bool drawn_ = false;
};

std::string format_duration(double seconds);  // "1:05", "1:02:03"

}  // namespace kiln::train
