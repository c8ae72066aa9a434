// The README's example, built with the project so it stays correct.
#include <iostream>
#include <kiln/kiln.h>
using namespace kiln;

struct Net : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2;
  Net() : Module("Net") {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(10, 32));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(32, 3));
  }
  Tensor forward(const Tensor& x) override { return fc2->forward(relu(fc1->forward(x))); }
};

int main() {
  manual_seed(0);
  Tensor x = randn({256, 10});                     // inputs
  Tensor y = argmax(x.narrow(1, 0, 3), 1);         // labels a small network can learn
  auto net = std::make_shared<Net>();
  optim::AdamW opt(net->parameters(), {.lr = 1e-2});
  for (int step = 0; step <= 200; ++step) {
    Tensor loss = cross_entropy(net->forward(x), y);
    opt.zero_grad();
    loss.backward();                               // fills each parameter's grad()
    opt.step();
    if (step % 50 == 0) std::cout << step << " " << loss.item<double>() << "\n";
  }
  save("net.safetensors", *net);                   // its state_dict, loadable with kiln::load
}
