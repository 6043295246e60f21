"""PyTorch CPU reference for cmd/train's throughput: the paper's orthogonal FFN
(five 1024-wide Stiefel layers, ReLU, a 1024 x 10 output layer, batch 16) with
RSDM-P done the efficient way (gather r rows, QR of an r x r matrix, scatter)
and SGD with momentum 0.9 on the rest. Prints samples/s over timed steps.

Run: /usr/bin/python3 scripts/torch_ffn.py [--steps 300] [--r 300] [--threads 2] [--device cuda]
"""
import argparse
import time

import torch


def rsdm_p_(x, g, r, lr):
    """One RSDM-P step on x (n x p, orthonormal columns) in place."""
    n = x.shape[0]
    idx = torch.randperm(n, device=x.device)[:r]
    xs, gs = x[idx], g[idx]
    b = gs @ xs.T
    a = (b - b.T) / 2
    eye = torch.eye(r, device=x.device)
    q, rr = torch.linalg.qr(eye - lr * a)
    q = q * torch.sign(torch.diagonal(rr))
    x[idx] = xs + (q - eye) @ xs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--r", type=int, default=300)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    dev = torch.device(args.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    width, depth, classes = 1024, 5, 10
    ortho = [torch.linalg.qr(torch.randn(width, width))[0].to(dev).requires_grad_() for _ in range(depth)]
    biases = [torch.zeros(width, device=dev, requires_grad=True) for _ in range(depth)]
    out = torch.nn.Linear(width, classes).to(dev)
    plain = biases + list(out.parameters())
    sgd = torch.optim.SGD(plain, lr=0.01, momentum=0.9)
    x = torch.randn(args.batch, width, device=dev)
    y = torch.randint(0, classes, (args.batch,), device=dev)

    def step():
        h = x
        for w, b in zip(ortho, biases):
            h = torch.relu(h @ w + b)
        loss = torch.nn.functional.cross_entropy(out(h), y)
        sgd.zero_grad()
        for w in ortho:
            w.grad = None
        loss.backward()
        sgd.step()
        with torch.no_grad():
            for w in ortho:
                rsdm_p_(w, w.grad, args.r, 0.1)

    for _ in range(args.warmup):
        step()
    sync()
    t = time.perf_counter()
    for _ in range(args.steps):
        step()
    sync()
    dt = time.perf_counter() - t
    print(f"pytorch {torch.__version__} on {args.device} ({args.threads} threads): {args.steps * args.batch / dt:.0f} samples/s, "
          f"{1e3 * dt / args.steps:.2f} ms/step (batch {args.batch}, r {args.r})")


if __name__ == "__main__":
    main()
