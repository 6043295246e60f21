"""PyTorch reference for the rnn row of scripts/throughput.sh: orthonet's orthogonal recurrent network (train -model
rnn, models.RNN) on random images read row by row, h_t = tanh(x_t U + h_{t-1} W + b) from h_0 = 0 and logits
h_T V + c, with W on O(--hidden) (Haar-random: the Q of a Gaussian matrix's QR, signs fixed) stepped by RSDM-P
(--r, --lr; gather r rows, QR of an r x r matrix, scatter: torchref.rsdm_p_), U, b, V and c initialised as
nn.Linear and stepped by SGD with momentum 0.9 (--lr-other), the softmax cross-entropy loss, as cmd/train's
defaults train it. A step reads one row of every channel: 28 steps of 28 pixels for MNIST (--dataset mnist), 32
steps of 3 x 32 = 96 values for CIFAR-10 (--dataset cifar10), the channels of a row one after the other, as
models.RNNConfig.Channels says. Prints steady samples/s over timed steps, the process's CPU time a step, the loss
and ||W^T W - I||_F.

Run: /usr/bin/python3 scripts/torch_rnn.py [--dataset mnist|cifar10] [--hidden 128] [--r 128] [--threads 2] [--steps 300] [--batch 16] [--device cuda]
"""
import torch
import torch.nn.functional as F

from torchref import parser, setup, step_, timed  # beside this script


def main():
    ap = parser(steps=300, warmup=20, batch=16)
    ap.add_argument("--dataset", default="mnist", choices=["mnist", "cifar10"])
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--r", type=int, default=0, help="RSDM's r (default: the hidden size, at most 300, as train's)")
    ap.add_argument("--lr", type=float, default=0.1, help="RSDM's step size")
    ap.add_argument("--lr-other", type=float, default=0.05, help="SGD's step size")
    args = ap.parse_args()
    dev, sync = setup(args)
    channels, side = (3, 32) if args.dataset == "cifar10" else (1, 28)
    n, classes = args.hidden, 10
    r = args.r or min(300, n)
    q, rr = torch.linalg.qr(torch.randn(n, n))
    w = (q * torch.sign(torch.diagonal(rr))).to(dev).requires_grad_()  # Haar-random on O(n)
    inp = torch.nn.Linear(channels * side, n).to(dev)
    out = torch.nn.Linear(n, classes).to(dev)
    sgd = torch.optim.SGD(list(inp.parameters()) + list(out.parameters()), lr=args.lr_other, momentum=0.9)
    x = torch.randn(args.batch, channels, side, side, device=dev)
    y = torch.randint(0, classes, (args.batch,), device=dev)

    def step():
        # (batch, C, H, W) to H steps of (batch, C*W): row t of every channel, channel after channel.
        rows = x.permute(2, 0, 1, 3).reshape(side, args.batch, channels * side)
        h = torch.tanh(inp(rows[0]))
        for t in range(1, side):
            h = torch.tanh(inp(rows[t]) + h @ w)
        loss = F.cross_entropy(out(h), y)
        step_(loss, sgd, [w], r, args.lr)
        return loss

    elapsed, cpu, loss = timed(step, args, sync)
    eye = torch.eye(n, device=dev)
    print(f"pytorch {torch.__version__} on {args.device} ({args.threads} threads): "
          f"{args.steps * args.batch / elapsed:.0f} samples/s, {1e3 * elapsed / args.steps:.2f} ms/step "
          f"({1e3 * cpu / args.steps:.1f} ms of CPU time a step) "
          f"(orthonet's RNN on {args.dataset}: {side} steps of {channels * side}, hidden {n}, batch {args.batch}, r {r}); "
          f"loss {float(loss):.3f}, ||W^T W - I||_F {float(torch.linalg.norm(w.T @ w - eye)):.2e}")


if __name__ == "__main__":
    main()
