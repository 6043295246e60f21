"""PyTorch CPU reference for cmd/train's throughput: the paper's orthogonal FFN
(five 1024-wide Stiefel layers, ReLU, a 1024 x 10 output layer, batch 16) with
RSDM-P done the efficient way (gather r rows, QR of an r x r matrix, scatter)
and SGD with momentum 0.9 on the rest. Prints samples/s over timed steps.

Run: /usr/bin/python3 scripts/torch_ffn.py [--steps 300] [--r 300] [--threads 2] [--device cuda]
"""
import torch

from torchref import parser, setup, step_, timed  # beside this script


def main():
    ap = parser(steps=300, warmup=20, batch=16)
    ap.add_argument("--r", type=int, default=300)
    args = ap.parse_args()
    dev, sync = setup(args)
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
        step_(torch.nn.functional.cross_entropy(out(h), y), sgd, ortho, args.r, 0.1)

    dt, _, _ = timed(step, args, sync)
    print(f"pytorch {torch.__version__} on {args.device} ({args.threads} threads): {args.steps * args.batch / dt:.0f} samples/s, "
          f"{1e3 * dt / args.steps:.2f} ms/step (batch {args.batch}, r {args.r})")


if __name__ == "__main__":
    main()
