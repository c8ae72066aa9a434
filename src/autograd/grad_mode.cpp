#include "kiln/autograd.h"

namespace kiln {
namespace {
thread_local bool tls_grad_enabled = true;
}
bool is_grad_enabled() { return tls_grad_enabled; }
void set_grad_enabled(bool enabled) { tls_grad_enabled = enabled; }
NoGradGuard::NoGradGuard() : prev_(tls_grad_enabled) { tls_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { tls_grad_enabled = prev_; }
EnableGradGuard::EnableGradGuard() : prev_(tls_grad_enabled) { tls_grad_enabled = true; }
EnableGradGuard::~EnableGradGuard() { tls_grad_enabled = prev_; }
}  // namespace kiln
