"""Read an orthonet checkpoint (a safetensors file) with the standard library
and PyTorch only, verify its checksum, and print each tensor with, for the
orthogonal weights, ||W^T W - I||_F.

Run: /usr/bin/python3 scripts/load_checkpoint.py checkpoints/run-*/step-*.safetensors

With the safetensors package installed, safetensors.torch.load_file(path)
returns the same tensors.
"""
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


def main():
    tensors, meta = load(sys.argv[1])
    flags = json.loads(meta.get("train.flags", "{}"))
    progress = json.loads(meta.get("train.progress", "{}"))
    print(f"format {meta['format']} v{meta['format_version']}, model {flags.get('model')}, "
          f"step {progress.get('step')}, best test accuracy {progress.get('best_accuracy')}")
    for name, t in sorted(tensors.items()):
        line = f"{name:40s} {str(t.dtype):14s} {tuple(t.shape)}"
        if name.startswith("model.") and t.dim() == 2 and t.shape[0] >= t.shape[1] > 10:
            w = t.double()
            err = torch.linalg.norm(w.T @ w - torch.eye(w.shape[1], dtype=torch.float64))
            line += f"  ||W^T W - I||_F = {err:.2e}"
        print(line)


if __name__ == "__main__":
    main()
