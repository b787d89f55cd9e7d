"""PyTorch (CUDA, float32, TF32 off) running the end-to-end workloads of
`benches/workloads.rs` as that file writes them: each iteration takes the
host array, computes on the GPU and reads the result back to the host. Run
beside `WF_BENCH_QUICK=1 cargo bench --bench workloads` on the same machine;
prints the median of `ITERS` iterations after a warm-up, one line each."""
import statistics
import time

import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = "cuda"
ITERS = 50
gen = torch.Generator().manual_seed(0)


def host(*shape, lo=-1.0, hi=1.0):
    return torch.rand(*shape, generator=gen) * (hi - lo) + lo


def timed(name, f):
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    times = []
    for _ in range(ITERS):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    print(f"{name}: {statistics.median(times) * 1e3:.3f} ms")


w1 = host(1 << 20)


def W1():
    x = w1.to(dev)
    y = torch.tanh(torch.exp(x * 0.5 + 0.1) * x)
    y = torch.tanh((torch.sigmoid(y - 0.2) + x) * 1.5)
    y = torch.tanh(torch.exp(torch.sigmoid(y + x) * 0.9) - x)
    return y.cpu()


MLP = [784, 512, 512, 10]
BATCH = 256
layers = [
    [host(MLP[l], MLP[l + 1], lo=-0.05, hi=0.05).to(dev), host(MLP[l + 1], lo=-0.01, hi=0.01).to(dev)]
    for l in range(3)
]
x3 = host(BATCH, MLP[0])
labels = torch.zeros(BATCH, 10)
labels[torch.arange(BATCH), torch.randint(0, 10, (BATCH,), generator=gen)] = 1.0


def forward(x):
    acts, pre = [x], []
    for i, (w, b) in enumerate(layers):
        z = acts[i] @ w + b
        pre.append(z)
        acts.append(torch.relu(z) if i < 2 else z)
    return acts, pre


def W3():
    acts, _ = forward(x3.to(dev))
    return torch.softmax(acts[3], -1).cpu()


def W4():
    x, y = x3.to(dev), labels.to(dev)
    acts, pre = forward(x)
    logp = torch.log_softmax(acts[3], -1)
    loss = -(y * logp).sum() / BATCH
    grad = (torch.exp(logp) - y) / BATCH
    for i in reversed(range(3)):
        w, b = layers[i]
        dw = acts[i].T @ grad
        db = grad.sum(0)
        if i > 0:
            grad = (grad @ w.T) * (pre[i - 1] > 0)
        layers[i] = [w - dw * 0.01, b - db * 0.01]
    return loss.cpu()


w5 = host(1024, 4096)


def W5():
    return w5.to(dev).sum(-1).cpu()


w6 = host(16)


def W6():
    y = w6.to(dev)
    for i in range(1000):
        y = [lambda v: v + 0.01, lambda v: v * 0.999, lambda v: v - 0.005, lambda v: torch.clamp(v, min=-2.0)][i % 4](y)
    return y.cpu()


w7 = host(1024, 1024)


def W7():
    return torch.softmax(w7.to(dev), -1).cpu()


for name, f in [("W1", W1), ("W3", W3), ("W4", W4), ("W5", W5), ("W6", W6), ("W7", W7)]:
    timed(name, f)
