"""Read an orthonet checkpoint (a safetensors file) with the standard library
and PyTorch only, verify its checksum, and print each tensor with, for the
orthogonal weights, ||W^T W - I||_F. With --images, build the checkpoint's
FFN in PyTorch (torch.nn.Module, the same layers as models.FFN) and classify
images with it, preprocessed as train's data are.

Run: /usr/bin/python3 scripts/load_checkpoint.py checkpoints/run-*/step-*.safetensors
     /usr/bin/python3 scripts/load_checkpoint.py CHECKPOINT --images t10k-images-idx3-ubyte.gz [--first 5] [--json]

--images takes an IDX file of images (MNIST's format, raw or gzip) or, where
Pillow is installed, a PNG or JPEG image. With the safetensors package
installed, safetensors.torch.load_file(path) returns the same tensors.
"""
import argparse
import gzip
import hashlib
import json
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64}


def load(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    meta = header.pop("__metadata__")
    # The checksum is the SHA-256 of the file with its own 64 hex digits as zeros.
    digest = meta["checksum"].split(":", 1)[1]
    zeroed = raw.replace(digest.encode(), b"0" * 64, 1)
    if hashlib.sha256(zeroed).hexdigest() != digest:
        raise ValueError(f"{path}: checksum mismatch")
    data = raw[8 + n :]
    tensors = {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        t = torch.frombuffer(bytearray(data[begin:end]), dtype=DTYPES[e["dtype"]])
        tensors[name] = t.reshape(e["shape"])
    return tensors, meta


class OrthoFFN(torch.nn.Module):
    """models.FFN: ReLU(x W_i + b_i) for fc1 ... fcD (W_i column-orthonormal),
    then x W_out + b_out. W is stored in x out, as x @ W takes it."""

    def __init__(self, tensors):
        super().__init__()
        names = []
        i = 1
        while f"model.fc{i}.W" in tensors:
            names.append(f"fc{i}")
            i += 1
        names.append("out")
        self.names = names
        self.weights = torch.nn.ParameterList(torch.nn.Parameter(tensors[f"model.{n}.W"].clone()) for n in names)
        self.biases = torch.nn.ParameterList(torch.nn.Parameter(tensors[f"model.{n}.b"].clone()) for n in names)

    def forward(self, x):
        h = x.flatten(1)
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = h @ w + b
            if i < len(self.weights) - 1:
                h = torch.relu(h)
        return h


def read_images(path):
    """Returns uint8 images (N, C, H, W) from an IDX file or a PNG/JPEG."""
    raw = open(path, "rb").read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if raw[:3] == b"\x00\x00\x08" and raw[3] in (2, 3):
        nd = raw[3]
        dims = struct.unpack(">" + "I" * nd, raw[4 : 4 + 4 * nd])
        x = torch.frombuffer(bytearray(raw[4 + 4 * nd :]), dtype=torch.uint8)
        return x.reshape((1,) * (4 - nd) + dims if nd == 2 else (dims[0], 1, dims[1], dims[2]))
    from PIL import Image  # a PNG or JPEG

    img = Image.open(path)
    mode = "L" if img.mode in ("L", "I;16", "1") else "RGB"
    x = torch.tensor(list(img.convert(mode).getdata()), dtype=torch.uint8)
    c = 1 if mode == "L" else 3
    return x.reshape(img.height, img.width, c).permute(2, 0, 1).unsqueeze(0)


def preprocess(images, shape):
    """train's preprocessing: pixels p to p/127.5 - 1, then the antialiased
    bilinear resize of data.Set.Resize to the run's image side."""
    x = images.float() / 127.5 - 1
    c, h, w = shape
    if x.shape[1] != c:
        raise ValueError(f"images of {x.shape[1]} channels; the model takes {c}")
    if x.shape[2:] != (h, w):
        x = torch.nn.functional.interpolate(x, size=(h, w), mode="bilinear", align_corners=False, antialias=True)
    return x


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--images", help="classify these images with the checkpoint's FFN")
    ap.add_argument("--first", type=int, default=0, help="only the first N images (0: all)")
    ap.add_argument("--json", action="store_true", help="print the logits as JSON")
    args = ap.parse_args()
    tensors, meta = load(args.checkpoint)
    flags = json.loads(meta.get("train.flags", "{}"))
    progress = json.loads(meta.get("train.progress", "{}"))
    if args.images is None:
        print(f"format {meta['format']} v{meta['format_version']}, model {flags.get('model')}, "
              f"step {progress.get('step')}, best test accuracy {progress.get('best_accuracy')}")
        for name, t in sorted(tensors.items()):
            line = f"{name:40s} {str(t.dtype):14s} {tuple(t.shape)}"
            if name.startswith("model.") and t.dim() == 2 and t.shape[0] >= t.shape[1] > 10:
                w = t.double()
                err = torch.linalg.norm(w.T @ w - torch.eye(w.shape[1], dtype=torch.float64))
                line += f"  ||W^T W - I||_F = {err:.2e}"
            print(line)
        return
    if flags.get("model") != "ffn":
        sys.exit(f"{args.checkpoint}: a {flags.get('model')}; this script builds the FFN only (export the model to ONNX instead: train export)")
    model = OrthoFFN(tensors).eval()
    x = read_images(args.images)
    if args.first > 0:
        x = x[: args.first]
    x = preprocess(x, json.loads(meta["train.data"])["shape"])
    with torch.no_grad():
        logits = model(x)
    if args.json:
        print(json.dumps({"logits": logits.tolist()}))
        return
    for i, row in enumerate(torch.softmax(logits.double(), dim=1)):
        p, k = row.max(0)
        print(f"{args.images}[{i}]: class {k.item()} {100 * p.item():.2f}%")


if __name__ == "__main__":
    main()
