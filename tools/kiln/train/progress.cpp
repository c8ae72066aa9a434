#include "tools/kiln/train/progress.h"

#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>

namespace kiln::train {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  auto s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  return buf;
}

Progress::Progress(std::ostream& out, int64_t total_steps, int64_t start_step, int64_t samples_per_step, bool bar,
                   bool lines)
    : out_(out),
      total_(total_steps),
      start_(start_step),
      samples_per_step_(samples_per_step),
      bar_(bar),
      lines_(lines),
      t0_(std::chrono::steady_clock::now()),
      last_step_(start_step) {}

double Progress::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

double Progress::samples_per_second() const {
  double t = elapsed();
  return t > 0 ? static_cast<double>((last_step_ - start_) * samples_per_step_) / t : 0;
}

void Progress::update(int64_t step_done, double loss) {
  last_step_ = step_done;
  last_loss_ = loss;
  if (bar_) draw(step_done, loss, step_done == total_);
}

void Progress::draw(int64_t step_done, double loss, bool force) {
  double t = elapsed();
  if (!force && t - last_draw_ < 0.1) return;  // at most ten redraws a second
  last_draw_ = t;
  int64_t done = step_done - start_;
  double rate = t > 0 ? static_cast<double>(done) / t : 0;
  double eta = rate > 0 ? static_cast<double>(total_ - step_done) / rate : NAN;
  constexpr int kWidth = 24;
  int filled = total_ > 0 ? static_cast<int>(kWidth * step_done / total_) : kWidth;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  char buf[256];
  std::snprintf(buf, sizeof buf, "\r\033[Kstep %lld/%lld [%s] loss %.4f | %.0f samples/s | ETA %s",
                static_cast<long long>(step_done), static_cast<long long>(total_), bar.c_str(), loss,
                rate * static_cast<double>(samples_per_step_), format_duration(eta).c_str());
  out_ << buf << std::flush;
  drawn_ = true;
}

void Progress::interval(int64_t step_done, double interval_loss) {
  if (!lines_) return;
  double t = elapsed();
  double rate = t > 0 ? static_cast<double>(step_done - start_) / t : 0;
  double eta = rate > 0 ? static_cast<double>(total_ - step_done) / rate : NAN;
  char buf[256];
  std::snprintf(buf, sizeof buf, "step %lld/%lld  loss %.4f  %.0f samples/s  elapsed %s  ETA %s\n",
                static_cast<long long>(step_done), static_cast<long long>(total_), interval_loss,
                rate * static_cast<double>(samples_per_step_), format_duration(t).c_str(),
                format_duration(eta).c_str());
  out_ << buf << std::flush;
}

void Progress::finish() {
  if (bar_ && drawn_) {
    if (last_step_ != total_) draw(last_step_, last_loss_, true);  // the final step forced a draw already
    out_ << "\n" << std::flush;
  }
}

}  // namespace kiln::train
