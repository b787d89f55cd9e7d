"""PyTorch's float32 convolution (cuDNN, TF32 off) of a ResNet layer: the
reference for the native benchmark's `conv2d resnet layer` figures
(`WF_BENCH_RESNET=1`). Batch 32, 56x56x64 images, 3x3x64x64 filter, same
padding, channels-last as webfusion's NHWC; operands resident."""
import time

import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.backends.cudnn.benchmark = True

x = (torch.rand(32, 64, 56, 56, device="cuda") * 2 - 1).to(memory_format=torch.channels_last)
w = (torch.rand(64, 64, 3, 3, device="cuda") * 0.2 - 0.1).to(memory_format=torch.channels_last)
dy = (torch.rand(32, 64, 56, 56, device="cuda") * 2 - 1).to(memory_format=torch.channels_last)
flop = 2 * 32 * 56 * 56 * 64 * 64 * 9


def timed(name, f):
    for _ in range(5):
        f()
    torch.cuda.synchronize()
    iters = 50
    t = time.perf_counter()
    for _ in range(iters):
        f()
    torch.cuda.synchronize()
    s = (time.perf_counter() - t) / iters
    print(f"torch float32 {name}: {s * 1e3:.3f} ms = {flop / s / 1e12:.2f} TFLOP/s")


timed("conv2d resnet layer", lambda: torch.nn.functional.conv2d(x, w, padding=1))
timed(
    "conv2d resnet layer input grad",
    lambda: torch.nn.grad.conv2d_input(x.shape, w, dy, padding=1),
)
