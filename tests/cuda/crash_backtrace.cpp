// On the GPU machine a crash of a CUDA test binary is otherwise a bare "Segmentation fault" in a
// log that comes back hours of work later: print the stack first (addresses resolve with
// addr2line against the binary and libkiln), then die of the same signal.
#include <execinfo.h>
#include <unistd.h>

#include <csignal>
#include <initializer_list>

namespace {

void print_stack_and_reraise(int sig) {
  void* frames[64];
  int n = backtrace(frames, 64);
  const char msg[] = "\n*** fatal signal in a CUDA test; stack:\n";
  (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

[[maybe_unused]] const bool installed = [] {
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, print_stack_and_reraise);
  return true;
}();

}  // namespace
