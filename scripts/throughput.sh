#!/usr/bin/env bash
# Training throughput of cmd/train on the compiled executor and on Gorgonia's
# tape machine, beside the PyTorch references, one after the other on this
# machine: the paper's FFN (batch 16, RSDM-P r = 300) and the paper-size ViT
# (batch 32, 1x32x32 Fashion-MNIST). Samples/s are steady-state rates, from the
# metrics.csv of each run after its first few logged steps.
#
# Run: bash scripts/throughput.sh [ffn|vit|all]   (needs python3-torch for the
# PyTorch rows; the ViT takes several minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
go build -tags openblas -o "$out/train" ./cmd/train

# steady METRICS BATCH: samples/s between the 5th logged training row and the last.
steady() {
	awk -F, -v b="$2" '$1=="train"{n++; if(n==5){s0=$3;t0=$4} s=$3;t=$4}
		END{if(n<6){print "n/a"} else printf "%.1f", (s-s0)*b/(t-t0)}' "$1"
}

run_go() { # name engine batch args...
	local name=$1 engine=$2 batch=$3
	shift 3
	"$out/train" -engine "$engine" -batch "$batch" -schedule const -eval-every -1 -limit-test 100 -out "$out/$name" "$@" >"$out/$name.log" 2>&1
	printf '%-28s %8s samples/s\n' "$name" "$(steady "$(ls "$out/$name"/run-*/metrics.csv)" "$batch")"
}

run_torch() { # name script args...
	local name=$1 script=$2
	shift 2
	if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
		printf '%-28s %8s\n' "$name" "(no torch)"
		return
	fi
	local line
	line=$(/usr/bin/python3 "$script" "$@" 2>&1 | tail -1)
	printf '%-28s %8s samples/s\n' "$name" "$(sed -E 's/.*: ([0-9.]+) samples.*/\1/' <<<"$line")"
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%F)"
if [[ $what == ffn || $what == all ]]; then
	run_go ffn-program program 16 -limit-train 9600
	run_go ffn-tape tape 16 -limit-train 9600
	run_torch ffn-torch-1-thread scripts/torch_ffn.py --threads 1 --steps 300
	run_torch ffn-torch-2-threads scripts/torch_ffn.py --threads 2 --steps 300
fi
if [[ $what == vit || $what == all ]]; then
	run_go vit-program program 32 -model vit -limit-train 960
	run_go vit-tape tape 32 -model vit -limit-train 640
	run_torch vit-torch-1-thread scripts/torch_vit.py --threads 1 --steps 12
	run_torch vit-torch-2-threads scripts/torch_vit.py --threads 2 --steps 12
fi
