"""What the PyTorch references scripts/torch_ffn.py, torch_vit.py, torch_cnn.py and torch_rnn.py share: RSDM-P's
step done the efficient way, their common flags and set-up, the training step of SGD or Adam with RSDM-P, and the
timed loop."""
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


def parser(steps, warmup, batch):
    """The flags every reference takes, with its own defaults: --device, --threads, --steps, --warmup, --batch."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=steps)
    ap.add_argument("--warmup", type=int, default=warmup)
    ap.add_argument("--batch", type=int, default=batch)
    return ap


def setup(args):
    """Sets the threads and the seed; returns the device and a function that waits for it."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    dev = torch.device(args.device)
    return dev, (torch.cuda.synchronize if dev.type == "cuda" else (lambda: None))


def step_(loss, opt, stiefel, r, lr, view=lambda w: w):
    """One training step from loss: opt on its parameters, RSDM-P with size r and step lr on the Stiefel weights
    (each as view(w), a matrix with orthonormal columns)."""
    opt.zero_grad()
    for w in stiefel:
        w.grad = None
    loss.backward()
    opt.step()
    with torch.no_grad():
        for w in stiefel:
            rsdm_p_(view(w), view(w.grad), r, lr)


def timed(step, args, sync):
    """Runs step args.warmup times, then args.steps timed times; returns the wall and CPU seconds of the timed
    steps and the last step's result."""
    for _ in range(args.warmup):
        step()
    sync()
    t0, c0 = time.perf_counter(), time.process_time()
    out = None
    for _ in range(args.steps):
        out = step()
    sync()
    return time.perf_counter() - t0, time.process_time() - c0, out
