"""Where PyTorch's GPU time goes in one zoo training step: kernels grouped by name.

Usage (on the GPU machine, torch_zoo.py carried in .deps/ by scripts/gpu-deps):
  python3 bench/torch/profile_kernels.py --model resnet18 --mode eager|default|reduce-overhead [--top 30]
Prints the GPU ms per step of the top kernels and of the convolution kernels together, so that
kiln's `kiln bench zoo --profile` can be read against the same workload.
"""
import argparse, collections, os, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".deps"))
import torch
import torch_zoo  # noqa: E402  (sets PyTorch's TF32 defaults as the zoo does)
from torch.profiler import profile, ProfilerActivity

ap = argparse.ArgumentParser()
ap.add_argument("--model", default="resnet18")
ap.add_argument("--mode", default="eager")
ap.add_argument("--steps", type=int, default=3)
ap.add_argument("--top", type=int, default=30)
a = ap.parse_args()

torch.manual_seed(0)
m, args, loss_fn = torch_zoo.workload(a.model, "cuda")
m = m.cuda().train()
opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
fwd = m if a.mode == "eager" else torch.compile(m, mode=None if a.mode == "default" else a.mode)

def step():
    loss = loss_fn(fwd(*args)); loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)

for _ in range(5): step()
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    for _ in range(a.steps): step()
    torch.cuda.synchronize()

by = collections.defaultdict(lambda: [0.0, 0])
for e in prof.events():
    if e.device_type == torch.autograd.DeviceType.CUDA:
        by[e.name][0] += e.device_time_total / 1000.0
        by[e.name][1] += 1
total = sum(v[0] for v in by.values()) / a.steps
conv_words = ("conv", "cudnn", "xmma", "implicit", "wgrad", "dgrad", "fprop", "winograd", "cutlass")
conv = sum(v[0] for k, v in by.items() if any(w in k.lower() for w in conv_words)) / a.steps
print(f"{a.model} {a.mode}: GPU ms per step {total:.2f}, convolution kernels {conv:.2f}, kernels per step {sum(v[1] for v in by.values()) / a.steps:.0f}")
for k, (ms, n) in sorted(by.items(), key=lambda kv: -kv[1][0])[: a.top]:
    print(f"  {ms / a.steps:8.3f} ms {n // a.steps:4d}x  {k[:150]}")
