"""PyTorch reference for the convnet row of scripts/throughput.sh: the network of Gorgonia v0.9.18's
examples/convnet (28x28 images of one channel, three 3x3 convolutions with padding 1 and no bias of 32, 64
and 128 filters, each with ReLU, 2x2 max pooling and dropout 0.2; a 1152 x 625 dense layer with ReLU and
dropout 0.55; a 625 x 10 one; softmax and the example's loss -mean(log(softmax) * onehot)), trained as the
issue's floor trains it with orthonet: the 1152 x 625 weight on the Stiefel manifold stepped by RSDM-P
(r = 300, lr 0.5, done the efficient way: gather r rows, QR of an r x r matrix, scatter), Adam (lr 1e-3) on
the other weights. Prints steady samples/s over timed steps on random data, and the process's CPU time a
step (all threads), which on a shared machine says more about the work than the time does.

With --net cnn it is orthonet's own orthogonal CNN (train -model cnn) instead: --depth blocks of a 3x3
convolution with padding 1 and a bias to --channels 2^i channels, ReLU and 2x2 max pooling, a plain linear
head; every kernel on the Stiefel manifold in its flattened form (out x in*9, stepped as its transpose when
wide), stepped by RSDM-P (--r, --lr), SGD with momentum 0.9 (--lr-other) on the biases and the head, the
softmax cross-entropy loss, as cmd/train's defaults train it.

Run: /usr/bin/python3 scripts/torch_cnn.py [--net convnet|cnn] [--threads 2] [--steps 100] [--batch 32] [--dtype float32] [--device cuda]
"""
import torch
import torch.nn.functional as F

from torchref import parser, setup, step_, timed  # beside this script


def main():
    ap = parser(steps=100, warmup=10, batch=32)
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--r", type=int, default=0, help="RSDM's r (default: 300 for convnet, the first kernel's larger side for cnn)")
    ap.add_argument("--net", default="convnet", choices=["convnet", "cnn"])
    ap.add_argument("--channels", type=int, default=64)
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--lr", type=float, default=0.1, help="cnn: RSDM's step size")
    ap.add_argument("--lr-other", type=float, default=0.05, help="cnn: SGD's step size")
    ap.add_argument("--image", type=int, default=28, help="cnn: the images' side (28: MNIST, 32: CIFAR-10)")
    ap.add_argument("--in-channels", type=int, default=1, help="cnn: the images' channels")
    args = ap.parse_args()
    if args.net == "cnn":
        return orthonet_cnn(args)
    args.r = args.r or 300
    dev, sync = setup(args)
    dt = getattr(torch, args.dtype)

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
        step_(loss, adam, [w3], args.r, 0.5)
        return loss

    elapsed, cpu, loss = timed(step, args, sync)
    eye = torch.eye(625, dtype=dt, device=dev)
    print(f"pytorch {torch.__version__} on {args.device} ({args.threads} threads, {args.dtype}): "
          f"{args.steps * args.batch / elapsed:.0f} samples/s, {1e3 * elapsed / args.steps:.2f} ms/step "
          f"({1e3 * cpu / args.steps:.1f} ms of CPU time a step) "
          f"(batch {args.batch}, r {args.r}); loss {float(loss):.3f}, ||W^T W - I||_F {float(torch.linalg.norm(w3.T @ w3 - eye)):.2e}")


def orthonet_cnn(args):
    """Trains orthonet's orthogonal CNN (train -model cnn) on random data and prints its rate."""
    dev, sync = setup(args)
    dt = getattr(torch, args.dtype)
    kernels, biases = [], []
    cin, side = args.in_channels, args.image
    for i in range(args.depth):
        cout = args.channels << i
        rows, cols = cout, cin * 9
        q = torch.linalg.qr(torch.randn(max(rows, cols), min(rows, cols), dtype=dt))[0]
        w = (q if rows >= cols else q.T).reshape(cout, cin, 3, 3).contiguous().to(dev).requires_grad_()
        kernels.append(w)
        biases.append(torch.zeros(cout, dtype=dt, device=dev, requires_grad=True))
        cin = cout
        if side >= 2:
            side //= 2
    head = torch.nn.Linear(cin * side * side, 10).to(dev, dt)
    plain = biases + list(head.parameters())
    sgd = torch.optim.SGD(plain, lr=args.lr_other, momentum=0.9)
    r = args.r or min(300, max(args.channels, 9 * args.in_channels))
    x = torch.randn(args.batch, args.in_channels, args.image, args.image, dtype=dt, device=dev)
    y = torch.randint(0, 10, (args.batch,), device=dev)

    def stiefel_view(w):
        m = w.view(w.shape[0], -1)
        return m if m.shape[0] >= m.shape[1] else m.T  # orthonormal columns

    def step():
        h = x
        for w, b in zip(kernels, biases):
            h = F.relu(F.conv2d(h, w, b, padding=1))
            if h.shape[2] >= 2 and h.shape[3] >= 2:
                h = F.max_pool2d(h, 2)
        loss = F.cross_entropy(head(h.reshape(args.batch, -1)), y)
        step_(loss, sgd, kernels, r, args.lr, view=stiefel_view)
        return loss

    elapsed, cpu, loss = timed(step, args, sync)
    worst = max(float(torch.linalg.norm(stiefel_view(w).T @ stiefel_view(w) - torch.eye(stiefel_view(w).shape[1], dtype=dt, device=dev))) for w in kernels)
    print(f"pytorch {torch.__version__} on {args.device} ({args.threads} threads, {args.dtype}): "
          f"{args.steps * args.batch / elapsed:.0f} samples/s, {1e3 * elapsed / args.steps:.2f} ms/step "
          f"({1e3 * cpu / args.steps:.1f} ms of CPU time a step) "
          f"(orthonet's CNN: {args.depth} blocks from {args.channels} channels, batch {args.batch}, r {r}); loss {float(loss):.3f}, max ||W^T W - I||_F {worst:.2e}")


if __name__ == "__main__":
    main()
