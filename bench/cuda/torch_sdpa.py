"""PyTorch's scaled_dot_product_attention at the shapes bench/cuda/flash_attention.cu times, per
backend (cuDNN, flash, memory-efficient), forward and backward, median ms and TFLOP/s with the
same flop counts (forward 4 N L S E, halved when causal; backward 2.5x the forward).
    python3 bench/cuda/torch_sdpa.py
"""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

CASES = [("gpt2", torch.bfloat16, 8, 12, 1024, 64, True), ("gpt_nano", torch.bfloat16, 16, 12, 256, 64, True),
         ("gpt2", torch.float32, 8, 12, 1024, 64, True), ("E128c", torch.bfloat16, 1, 16, 2048, 128, True)]
BACKENDS = [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION),
            ("efficient", SDPBackend.EFFICIENT_ATTENTION)]


def median_ms(fn, reps=20):
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[len(times) // 2]


for name, dtype, b, h, l, e, causal in CASES:
    q, k, v = (torch.randn(b, h, l, e, device="cuda", dtype=dtype, requires_grad=True) for _ in range(3))
    flops = 4.0 * b * h * l * l * e * (0.5 if causal else 1.0)
    for bname, backend in BACKENDS:
        try:
            with sdpa_kernel(backend):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                go = torch.randn_like(out)
                fwd = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                bwd = median_ms(lambda: torch.autograd.grad(out, (q, k, v), go, retain_graph=True))
            print(f"torch {bname:9s} {name:9s} {str(dtype):15s} N={b*h} L={l} E={e} causal={int(causal)}: "
                  f"forward {fwd:.3f} ms ({flops / fwd * 1e-9:.1f} TFLOP/s), backward {bwd:.3f} ms "
                  f"({2.5 * flops / bwd * 1e-9:.1f} TFLOP/s)")
        except Exception as ex:  # a backend that does not take this case
            print(f"torch {bname:9s} {name:9s} {str(dtype):15s}: not available ({str(ex).splitlines()[0][:80]})")
