// The eager demo: a two-layer MLP learns to classify points of three
// interleaved spirals, trained with kiln's autograd and plain SGD.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <kiln/kiln.h>
#include <string>

using namespace kiln;

int main(int argc, char** argv) {
  int steps = argc > 1 ? std::atoi(argv[1]) : 300;
  manual_seed(0);

  // Three spirals of 200 points each: x in R^2, label = spiral index.
  const int64_t per_class = 200, classes = 3, n = per_class * classes;
  std::vector<float> xs;
  std::vector<int64_t> ys;
  for (int64_t c = 0; c < classes; ++c) {
    for (int64_t i = 0; i < per_class; ++i) {
      double r = static_cast<double>(i) / per_class;
      double theta = c * 4.0 + r * 4.0 + 0.2 * std::sin(13.0 * i);
      xs.push_back(static_cast<float>(r * std::sin(theta)));
      xs.push_back(static_cast<float>(r * std::cos(theta)));
      ys.push_back(c);
    }
  }
  Tensor x = tensor<float>(xs, {n, 2});
  Tensor y = tensor<int64_t>(ys, {n});

  // Parameters with PyTorch's Linear initialisation: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  auto init = [](int64_t out, int64_t in) {
    double bound = 1.0 / std::sqrt(static_cast<double>(in));
    return rand({out, in}).mul(2 * bound).sub(bound).requires_grad_(true);
  };
  const int64_t hidden = 64;
  Tensor w1 = init(hidden, 2), b1 = zeros({hidden}).requires_grad_(true);
  Tensor w2 = init(hidden, hidden), b2 = zeros({hidden}).requires_grad_(true);
  Tensor w3 = init(classes, hidden), b3 = zeros({classes}).requires_grad_(true);
  std::vector<Tensor> params = {w1, b1, w2, b2, w3, b3};

  const double lr = 0.5;
  std::printf("kiln %s eager demo: MLP 2-%lld-%lld-%lld on %lld spiral points, SGD lr %.2f\n", version(),
              static_cast<long long>(hidden), static_cast<long long>(hidden), static_cast<long long>(classes),
              static_cast<long long>(n), lr);
  for (int step = 0; step <= steps; ++step) {
    Tensor h = relu(linear(x, w1, b1));
    h = relu(linear(h, w2, b2));
    Tensor logits = linear(h, w3, b3);
    Tensor loss = cross_entropy(logits, y);
    loss.backward();
    {
      NoGradGuard no_grad;
      for (Tensor& p : params) {
        p.sub_(p.grad(), lr);
        p.mutable_grad().zero_();
      }
    }
    if (step % 25 == 0) {
      double acc = (argmax(logits, 1) == y).to(kFloat32).mean().item<double>();
      std::printf("step %4d  loss %.4f  train accuracy %5.1f%%\n", step, loss.item<double>(), 100.0 * acc);
    }
  }
  return 0;
}
