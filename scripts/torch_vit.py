"""PyTorch reference for cmd/train's ViT throughput: the paper's orthogonal ViT as models.ViT builds it
(4x4 patches of a 32x32 image, a class token and position embedding, pre-LayerNorm blocks of multi-head
self-attention whose W_q, W_k, W_v are d x d Stiefel weights without bias, an MLP with tanh-GELU, dropout,
a final LayerNorm and a linear head), RSDM-P on W_q, W_k, W_v done the efficient way (gather r rows, QR of
an r x r matrix, scatter) and SGD with momentum 0.9 on the rest, as `train -model vit` does by default.
Prints samples/s over timed steps on random data.

Run: python3 scripts/torch_vit.py [--device cuda] [--batch 32] [--channels 1] [--steps 20] [--threads 2]
"""
import math

import torch
import torch.nn.functional as F

from torchref import parser, setup, step_, timed  # beside this script


def main():
    ap = parser(steps=20, warmup=3, batch=32)
    ap.add_argument("--channels", type=int, default=1)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--mlp", type=int, default=256)
    ap.add_argument("--patch", type=int, default=4)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--r", type=int, default=300)
    args = ap.parse_args()
    dev, sync = setup(args)
    d, p, classes = args.dim, args.patch, 10
    tokens = (32 // p) ** 2
    pdim = p * p * args.channels

    def linear(i, o):
        bound = 1 / math.sqrt(i)
        return [(torch.rand(i, o, device=dev) * 2 - 1).mul_(bound).requires_grad_(),
                torch.zeros(o, device=dev, requires_grad=True)]

    def ortho():
        return torch.linalg.qr(torch.randn(d, d, device=dev))[0].requires_grad_()

    embed = linear(pdim, d)
    cls = (0.02 * torch.randn(1, 1, d, device=dev)).requires_grad_()
    pos = (0.02 * torch.randn(1, tokens + 1, d, device=dev)).requires_grad_()
    blocks = []
    for _ in range(args.depth):
        blocks.append({
            "ln1": [torch.ones(d, device=dev, requires_grad=True), torch.zeros(d, device=dev, requires_grad=True)],
            "wq": ortho(), "wk": ortho(), "wv": ortho(), "out": linear(d, d),
            "ln2": [torch.ones(d, device=dev, requires_grad=True), torch.zeros(d, device=dev, requires_grad=True)],
            "fc1": linear(d, args.mlp), "fc2": linear(args.mlp, d),
        })
    norm = [torch.ones(d, device=dev, requires_grad=True), torch.zeros(d, device=dev, requires_grad=True)]
    head = linear(d, classes)
    stiefel = [b[k] for b in blocks for k in ("wq", "wk", "wv")]
    plain = embed + [cls, pos] + norm + head
    for b in blocks:
        plain += b["ln1"] + b["out"] + b["ln2"] + b["fc1"] + b["fc2"]
    sgd = torch.optim.SGD(plain, lr=0.05, momentum=0.9)

    x = torch.randn(args.batch, tokens, pdim, device=dev)
    y = torch.randint(0, classes, (args.batch,), device=dev)
    h_, dh = args.heads, d // args.heads

    def forward():
        t = x @ embed[0] + embed[1]
        t = torch.cat([cls.expand(args.batch, 1, d), t], 1) + pos
        t = F.dropout(t, args.dropout)
        for b in blocks:
            h = F.layer_norm(t, (d,), *b["ln1"])
            q, k, v = ((h @ b[w]).view(args.batch, -1, h_, dh).transpose(1, 2) for w in ("wq", "wk", "wv"))
            att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dh), -1) @ v
            att = att.transpose(1, 2).reshape(args.batch, -1, d) @ b["out"][0] + b["out"][1]
            t = t + F.dropout(att, args.dropout)
            h = F.layer_norm(t, (d,), *b["ln2"])
            h = F.dropout(F.gelu(h @ b["fc1"][0] + b["fc1"][1], approximate="tanh"), args.dropout)
            t = t + F.dropout(h @ b["fc2"][0] + b["fc2"][1], args.dropout)
        return F.layer_norm(t[:, 0], (d,), *norm) @ head[0] + head[1]

    def step():
        loss = F.cross_entropy(forward(), y)
        step_(loss, sgd, stiefel, args.r, 0.1)
        return loss

    dt, _, loss = timed(step, args, sync)
    feas = max(float(torch.linalg.norm(w.T @ w - torch.eye(d, device=dev))) for w in stiefel)
    print(f"pytorch {torch.__version__} on {args.device} ({args.threads} threads): "
          f"{args.steps * args.batch / dt:.1f} samples/s, {dt / args.steps:.3f} s/step "
          f"(batch {args.batch}, dim {d}, depth {args.depth}, r {args.r}); loss {float(loss):.3f}, "
          f"max ||W^T W - I||_F {feas:.2e}")


if __name__ == "__main__":
    main()
