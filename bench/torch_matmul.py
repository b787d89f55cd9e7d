"""PyTorch's float32 matmul (TF32 off) on CUDA: the reference the native
benchmark's real-GPU matmul figures are compared with. Prints kernel-only
throughput (operands resident, like `W2 matmul N resident`) and end to end
(upload, multiply, read back, like `W2 matmul N`)."""
import sys
import time

import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

for n in [int(v) for v in sys.argv[1:]] or [1024, 4096]:
    a = torch.rand(n, n, device="cuda") * 2 - 1
    b = torch.rand(n, n, device="cuda") * 2 - 1
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    iters = 50
    t = time.perf_counter()
    for _ in range(iters):
        c = a @ b
    torch.cuda.synchronize()
    resident = (time.perf_counter() - t) / iters
    host = a.cpu()
    t = time.perf_counter()
    for _ in range(10):
        c = (host.cuda() @ b).cpu()
    end_to_end = (time.perf_counter() - t) / 10
    flop = 2 * n**3
    print(f"torch float32 matmul {n}: resident {resident * 1e3:.3f} ms = {flop / resident / 1e12:.2f} TFLOP/s; "
          f"end to end {end_to_end * 1e3:.2f} ms = {flop / end_to_end / 1e12:.2f} TFLOP/s")
