"""PyTorch reference for the rnn row of scripts/throughput.sh: orthonet's orthogonal recurrent network (train -model
rnn, models.RNN) on random images read row by row, h_t = tanh(x_t U + h_{t-1} W + b) from h_0 = 0 and logits
h_T V + c, with W on O(--hidden) (Haar-random: the Q of a Gaussian matrix's QR, signs fixed) stepped by RSDM-P
(--r, --lr; gather r rows, QR of an r x r matrix, scatter: torchref.rsdm_p_), U, b, V and c initialised as
nn.Linear and stepped by Adam (--other adam, --lr-other 0.003; or SGD with momentum 0.9), the softmax
cross-entropy loss, as cmd/train's defaults for -model rnn train it. A step reads one row of every channel: 28 steps of 28 pixels for MNIST (--dataset mnist), 32
steps of 3 x 32 = 96 values for CIFAR-10 (--dataset cifar10), the channels of a row one after the other, as
models.RNNConfig.Channels says. Prints steady samples/s over timed steps, the process's CPU time a step, the loss
and ||W^T W - I||_F.

With --data DIR (MNIST-format IDX files, train-* and t10k-*, gzipped or not: MNIST or Fashion-MNIST) it trains
instead for --epochs epochs on the real images (pixels scaled to [-1, 1] as orthonet's data package does, batches
drawn from a seeded shuffle), --other sgd or adam on the plain parameters, and prints the test accuracy.

Run: /usr/bin/python3 scripts/torch_rnn.py [--dataset mnist|cifar10] [--hidden 128] [--r 128] [--threads 2] [--steps 300] [--batch 16] [--device cuda]
     /usr/bin/python3 scripts/torch_rnn.py --data /usr/share/datasets/fashion-mnist --epochs 3 [--other sgd --lr-other 0.05]
"""
import gzip
import os
import struct

import torch
import torch.nn.functional as F

from torchref import parser, setup, step_, timed  # beside this script


def main():
    ap = parser(steps=300, warmup=20, batch=16)
    ap.add_argument("--dataset", default="mnist", choices=["mnist", "cifar10"])
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--r", type=int, default=0, help="RSDM's r (default: the hidden size, at most 300, as train's)")
    ap.add_argument("--lr", type=float, default=0.1, help="RSDM's step size")
    ap.add_argument("--lr-other", type=float, default=0.003, help="the plain parameters' step size")
    ap.add_argument("--other", default="adam", choices=["sgd", "adam"], help="the plain parameters' optimizer")
    ap.add_argument("--data", default="", help="train on the IDX files in this folder (MNIST's format)")
    ap.add_argument("--epochs", type=int, default=3)
    args = ap.parse_args()
    dev, sync = setup(args)
    channels, side = (3, 32) if args.dataset == "cifar10" else (1, 28)
    n, classes = args.hidden, 10
    r = args.r or min(300, n)
    q, rr = torch.linalg.qr(torch.randn(n, n))
    w = (q * torch.sign(torch.diagonal(rr))).to(dev).requires_grad_()  # Haar-random on O(n)
    inp = torch.nn.Linear(channels * side, n).to(dev)
    out = torch.nn.Linear(n, classes).to(dev)
    plain = list(inp.parameters()) + list(out.parameters())
    if args.other == "adam":
        opt = torch.optim.Adam(plain, lr=args.lr_other)
    else:
        opt = torch.optim.SGD(plain, lr=args.lr_other, momentum=0.9)

    def forward(x):
        # (batch, C, H, W) to H steps of (batch, C*W): row t of every channel, channel after channel.
        rows = x.permute(2, 0, 1, 3).reshape(side, x.shape[0], channels * side)
        h = torch.tanh(inp(rows[0]))
        for t in range(1, side):
            h = torch.tanh(inp(rows[t]) + h @ w)
        return out(h)

    if args.data:
        train_on(args, dev, forward, opt, w, r)
        return
    x = torch.randn(args.batch, channels, side, side, device=dev)
    y = torch.randint(0, classes, (args.batch,), device=dev)

    def step():
        loss = F.cross_entropy(forward(x), y)
        step_(loss, opt, [w], r, args.lr)
        return loss

    elapsed, cpu, loss = timed(step, args, sync)
    eye = torch.eye(n, device=dev)
    print(f"pytorch {torch.__version__} on {args.device} ({args.threads} threads): "
          f"{args.steps * args.batch / elapsed:.0f} samples/s, {1e3 * elapsed / args.steps:.2f} ms/step "
          f"({1e3 * cpu / args.steps:.1f} ms of CPU time a step) "
          f"(orthonet's RNN on {args.dataset}: {side} steps of {channels * side}, hidden {n}, batch {args.batch}, r {r}); "
          f"loss {float(loss):.3f}, ||W^T W - I||_F {float(torch.linalg.norm(w.T @ w - eye)):.2e}")


def idx(folder, name):
    """The array in IDX file folder/name (or name.gz): images (n, 1, h, w) scaled to [-1, 1], or labels (n)."""
    path = os.path.join(folder, name)
    raw = open(path, "rb").read() if os.path.exists(path) else gzip.open(path + ".gz").read()
    dims = raw[3]
    shape = struct.unpack(">" + "I" * dims, raw[4:4 + 4 * dims])
    t = torch.frombuffer(bytearray(raw[4 + 4 * dims:]), dtype=torch.uint8)
    if dims == 1:
        return t.long()
    return (t.float() / 127.5 - 1).reshape(shape[0], 1, shape[1], shape[2])


def train_on(args, dev, forward, opt, w, r):
    """Trains for args.epochs epochs on the IDX set in args.data and prints the test accuracy and ||W^T W - I||_F."""
    xs, ys = idx(args.data, "train-images-idx3-ubyte").to(dev), idx(args.data, "train-labels-idx1-ubyte").to(dev)
    xt, yt = idx(args.data, "t10k-images-idx3-ubyte").to(dev), idx(args.data, "t10k-labels-idx1-ubyte").to(dev)
    for epoch in range(args.epochs):
        order = torch.randperm(len(xs))
        for i in range(0, len(xs) - args.batch + 1, args.batch):
            b = order[i:i + args.batch]
            step_(F.cross_entropy(forward(xs[b]), ys[b]), opt, [w], r, args.lr)
        with torch.no_grad():
            correct = sum(int((forward(xt[i:i + 500]).argmax(1) == yt[i:i + 500]).sum()) for i in range(0, len(xt), 500))
        print(f"epoch {epoch + 1}: test accuracy {100 * correct / len(xt):.2f}%", flush=True)
    eye = torch.eye(w.shape[0], device=dev)
    print(f"test accuracy: {100 * correct / len(xt):.2f}%, ||W^T W - I||_F {float(torch.linalg.norm(w.T @ w - eye)):.2e}")


if __name__ == "__main__":
    main()
