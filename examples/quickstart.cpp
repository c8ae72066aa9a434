// The README's example, built with the project so it stays correct.
#include <iostream>
#include <kiln/kiln.h>
using namespace kiln;

int main() {
  manual_seed(0);
  Tensor x = randn({64, 10});                      // inputs
  Tensor y = argmax(x.narrow(1, 0, 3), 1);         // class labels a linear model can learn
  Tensor w = (randn({3, 10}) * 0.1).requires_grad_();
  Tensor b = zeros({3}).requires_grad_();
  for (int step = 0; step < 100; ++step) {
    Tensor loss = cross_entropy(linear(x, w, b), y);
    loss.backward();                               // fills w.grad(), b.grad()
    NoGradGuard no_grad;
    w.sub_(w.grad(), 0.5);                         // SGD step, in place
    b.sub_(b.grad(), 0.5);
    w.mutable_grad().zero_();
    b.mutable_grad().zero_();
    if (step % 20 == 0) std::cout << step << " " << loss.item<double>() << "\n";
  }
}
