"""PyTorch's side of `kiln bench zoo --profile`: the GPU time per kernel of a few eager training
steps of one zoo workload (../shared/reference/torch_zoo.py), so kiln's per-op profile can be set
against the same steps in PyTorch, eager or under torch.compile. Usage (on the GPU machine):
  python3 bench/cuda/torch_profile.py --model gpt2 --prec bf16 [--mode eager|default|reduce-overhead] [--steps 3] [--top 40]
The last line sums the kernels whose names say convolution (cuDNN's, its layout transposes, and
any fused kernel whose name mentions one): torch.compile's NHWC convolutions need no transposes.
"""
import argparse, os, sys

import torch
from torch.profiler import ProfilerActivity, profile

here = os.path.dirname(os.path.abspath(__file__))
# torch_zoo.py: carried in .deps/ by scripts/gpu-deps, or beside the checkout in ../shared/reference.
for ref in (os.path.join(here, "..", "..", ".deps"), os.path.join(here, "..", "..", "..", "shared", "reference")):
    if os.path.exists(os.path.join(ref, "torch_zoo.py")):
        sys.path.insert(0, ref)
import torch_zoo  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gpt2")
    ap.add_argument("--prec", default="bf16")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--mode", default="eager", help="eager, or a torch.compile mode: default, reduce-overhead")
    a = ap.parse_args()
    torch.manual_seed(0)
    m, args, loss_fn = torch_zoo.workload(a.model, "cuda")
    m = m.to("cuda").train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    ctx = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if a.prec == "bf16" else (lambda: torch.autocast("cuda", enabled=False))

    fwd = m if a.mode == "eager" else torch.compile(m, mode=None if a.mode == "default" else a.mode)

    def step():
        with ctx():
            loss = loss_fn(fwd(*args))
        loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)

    for _ in range(3 if a.mode == "eager" else 5):  # torch.compile compiles on the first
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(a.steps):
            step()
        torch.cuda.synchronize()
    rows = {}
    for e in prof.key_averages():
        t = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
        if t and e.device_type == torch.autograd.DeviceType.CUDA:
            rows[e.key] = (e.count, t / 1000.0)
    total = sum(ms for _, ms in rows.values())
    print(f"torch {torch.__version__} profile: {a.model} {a.prec} {a.mode}, {a.steps} steps, GPU ms per kernel")
    for k, (n, ms) in sorted(rows.items(), key=lambda kv: -kv[1][1])[: a.top]:
        print(f"{k[:90]:90s} {n:6d} {ms:9.3f} {100 * ms / total:5.1f}")
    print(f"{'total':90s} {sum(n for n, _ in rows.values()):6d} {total:9.3f}")
    words = ("conv", "cudnn", "xmma", "implicit", "wgrad", "dgrad", "fprop", "winograd", "cutlass", "nhwc", "nchw")
    conv = sum(ms for k, (_, ms) in rows.items() if any(w in k.lower() for w in words) and "bn_" not in k)
    print(f"{'convolution kernels (by name)':90s} {'':6s} {conv:9.3f}")


if __name__ == "__main__":
    main()
