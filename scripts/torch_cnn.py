"""PyTorch reference for the convnet row of scripts/throughput.sh: the network of Gorgonia v0.9.18's
examples/convnet (28x28 images of one channel, three 3x3 convolutions with padding 1 and no bias of 32, 64
and 128 filters, each with ReLU, 2x2 max pooling and dropout 0.2; a 1152 x 625 dense layer with ReLU and
dropout 0.55; a 625 x 10 one; softmax and the example's loss -mean(log(softmax) * onehot)), trained as the
issue's floor trains it with orthonet: the 1152 x 625 weight on the Stiefel manifold stepped by RSDM-P
(r = 300, lr 0.5, done the efficient way: gather r rows, QR of an r x r matrix, scatter), Adam (lr 1e-3) on
the other weights. Prints steady samples/s over timed steps on random data, and the process's CPU time a
step (all threads), which on a shared machine says more about the work than the time does.

Run: /usr/bin/python3 scripts/torch_cnn.py [--threads 2] [--steps 100] [--batch 32] [--dtype float32] [--device cuda]
"""
import argparse
import time

import torch
import torch.nn.functional as F

from torch_ffn import rsdm_p_  # the same RSDM-P step, beside this script


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--r", type=int, default=300)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    dev = torch.device(args.device)
    dt = getattr(torch, args.dtype)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

    def glorot(*shape):
        fan_in = shape[1] * (shape[2] * shape[3] if len(shape) == 4 else 1)
        fan_out = shape[0] * (shape[2] * shape[3] if len(shape) == 4 else 1)
        return (torch.randn(*shape, dtype=dt, device=dev) * (2 / (fan_in + fan_out)) ** 0.5).requires_grad_()

    w0, w1, w2 = glorot(32, 1, 3, 3), glorot(64, 32, 3, 3), glorot(128, 64, 3, 3)
    w3 = torch.linalg.qr(torch.randn(128 * 3 * 3, 625, dtype=dt))[0].to(dev).requires_grad_()  # orthonormal columns
    w4 = glorot(625, 10)
    adam = torch.optim.Adam([w0, w1, w2, w4], lr=1e-3)
    x = torch.randn(args.batch, 1, 28, 28, dtype=dt, device=dev)
    y = F.one_hot(torch.randint(0, 10, (args.batch,), device=dev), 10).to(dt)

    def forward():
        h = x
        for w in (w0, w1, w2):
            h = F.dropout(F.max_pool2d(F.relu(F.conv2d(h, w, padding=1)), 2), 0.2)
        h = F.dropout(F.relu(h.reshape(args.batch, -1) @ w3), 0.55)
        return h @ w4

    def step():
        loss = -(F.log_softmax(forward(), 1) * y).mean()
        adam.zero_grad()
        w3.grad = None
        loss.backward()
        adam.step()
        with torch.no_grad():
            rsdm_p_(w3, w3.grad, args.r, 0.5)
        return loss

    for _ in range(args.warmup):
        step()
    sync()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(args.steps):
        loss = step()
    sync()
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    eye = torch.eye(625, dtype=dt, device=dev)
    print(f"pytorch {torch.__version__} on {args.device} ({args.threads} threads, {args.dtype}): "
          f"{args.steps * args.batch / elapsed:.0f} samples/s, {1e3 * elapsed / args.steps:.2f} ms/step "
          f"({1e3 * cpu / args.steps:.1f} ms of CPU time a step) "
          f"(batch {args.batch}, r {args.r}); loss {float(loss):.3f}, ||W^T W - I||_F {float(torch.linalg.norm(w3.T @ w3 - eye)):.2e}")


if __name__ == "__main__":
    main()
