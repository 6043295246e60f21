#!/usr/bin/env bash
# Training throughput of cmd/train on the compiled executor and on Gorgonia's
# tape machine, beside the PyTorch references, one after the other on this
# machine: the paper's FFN (batch 16, RSDM-P r = 300) and the paper-size ViT
# (batch 32, 1x32x32 Fashion-MNIST). Samples/s are steady-state rates, from the
# metrics.csv of each run after its first few logged steps.
#
# The convnet rows: Gorgonia's examples/convnet network, unchanged (batch 32,
# its 1152 x 625 dense weight stepped by RSDM-P r = 300, Adam on the rest), as
# a compiled program on the CPU and on the tape machine, float32 and float64
# (internal/gorgoniaex's harness, -mode throughput: samples/s after the first
# fifth of the steps), beside scripts/torch_cnn.py at 1 and 2 threads, and the
# ratios of issue 31's floors (compiled >= 3x the tape machine, >= 1.0x
# PyTorch's best, float32).
#
# The cnn rows: orthonet's default CNN (train -model cnn, batch 32, float32)
# beside scripts/torch_cnn.py --net cnn at 1 and 2 threads, and issue 32's floor
# (orthonet >= 1.0x PyTorch's best).
#
# The rnn rows: orthonet's default RNN (train -model rnn: Fashion-MNIST read row
# by row, 28 steps of 28 pixels, hidden 128, its recurrent weight on O(128)
# stepped by RSDM-P r = 128, Adam on the rest, batch 16, float32) beside
# scripts/torch_rnn.py at 1 and 2 threads, and issue 39's floor (orthonet >=
# 1.0x PyTorch's best).
#
# Run: bash scripts/throughput.sh [ffn|vit|convnet|cnn|rnn|all]   (needs python3-torch
# for the PyTorch rows; the ViT takes several minutes)
#      bash scripts/throughput.sh cuda   on a GPU machine: train -device cuda
# (the CUDA backend, RSDM-P and RGD) beside scripts/torch_*.py --device cuda,
# then the device profile of each model (-kernel-profile); PROFILE_OUT=folder
# keeps the profile runs' logs there (ffn-cuda-profile.log, vit-cuda-profile.log:
# new files; where one is there already the script refuses, exit 2, before any
# run), TRAIN=binary runs that train instead of building one, PYTHON the python3
# of the PyTorch rows (default /usr/bin/python3).
#
# Everything else goes into a temporary folder of the script's own, removed
# when it exits; it replaces and removes no other file.
set -euo pipefail
here=$PWD # the caller's folder: a relative PROFILE_OUT is taken from it
cd "$(dirname "$0")/.."
what=${1:-all}
python=${PYTHON:-/usr/bin/python3}
kept=()
[[ $what != cuda ]] || kept=(ffn-cuda-profile vit-cuda-profile)
if [[ -n ${PROFILE_OUT:-} ]]; then
	[[ $PROFILE_OUT == /* ]] || PROFILE_OUT=$(realpath -m -- "$here/$PROFILE_OUT")
	for name in "${kept[@]}"; do
		if [[ -e $PROFILE_OUT/$name.log || -L $PROFILE_OUT/$name.log ]]; then
			echo "throughput: $PROFILE_OUT/$name.log exists: the script replaces no file; give another PROFILE_OUT, or move it" >&2
			exit 2
		fi
	done
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if [[ -n ${TRAIN:-} ]]; then
	cp "$TRAIN" "$out/train"
elif [[ $what == cuda ]]; then
	go build -o "$out/train" ./cmd/train
elif [[ $what != convnet ]]; then
	go build -tags openblas -o "$out/train" ./cmd/train
fi

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

# keep NAME: copies a run's log to PROFILE_OUT when it is set, as a new file:
# written beside it and hard-linked into place, which never replaces a file.
keep() {
	[[ -n ${PROFILE_OUT:-} ]] || return 0
	local t
	mkdir -p "$PROFILE_OUT"
	t=$(mktemp "$PROFILE_OUT/.$1.log.XXXXXX")
	cp "$out/$1.log" "$t"
	chmod 644 "$t"
	if ! ln "$t" "$PROFILE_OUT/$1.log"; then
		rm -f "$t"
		echo "throughput: $PROFILE_OUT/$1.log appeared meanwhile: not replaced" >&2
		return 1
	fi
	rm -f "$t"
}

run_torch() { # name script args...
	local name=$1 script=$2
	shift 2
	if ! "$python" -c 'import torch' 2>/dev/null; then
		printf '%-28s %8s\n' "$name" "(no torch)"
		return
	fi
	local line
	line=$("$python" "$script" "$@" 2>&1 | tail -1)
	printf '%-28s %8s samples/s\n' "$name" "$(sed -E 's/.*: ([0-9.]+) samples.*/\1/' <<<"$line")"
}

# against_torch NET BATCH STEPS SCRIPT [ARGS...] times orthonet's default
# NET (train -model NET) and the same network in PyTorch (SCRIPT ARGS, STEPS
# steps) on 1 and 2 threads, and prints orthonet's rate against PyTorch's
# best.
against_torch() {
	local net=$1 batch=$2 steps=$3 script=$4
	shift 4
	local rows
	rows=("$(run_go "$net-program" program "$batch" -model "$net" -limit-train 9600)")
	rows+=("$(run_torch "$net-torch-1-thread" "$script" "$@" --threads 1 --steps "$steps")")
	rows+=("$(run_torch "$net-torch-2-threads" "$script" "$@" --threads 2 --steps "$steps")")
	printf '%s\n' "${rows[@]}"
	printf '%s\n' "${rows[@]}" | awk -v net="$net" '{r[NR] = $2 + 0} END {
		best = (r[2] > r[3]) ? r[2] : r[3]
		printf "%s float32: orthonet %.2fx PyTorch'"'"'s best of 1 and 2 threads (floor 1.0)\n", net, (best > 0 ? r[1] / best : 0) }'
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
if [[ $what == convnet || $what == all ]]; then
	go run -tags openblas ./internal/gorgoniaex/run -o "$out/convnet" convnet
	declare -A rate
	for dt in float32 float64; do
		for be in cpu tape; do
			steps=300
			[[ $be == tape ]] && steps=60
			rate[$be-$dt]=$("$out/convnet" -mode throughput -backend "$be" -dtype "$dt" -batch 32 -steps "$steps" 2>/dev/null |
				sed -E 's/.*"samples_per_second":([0-9.]+).*/\1/')
			name=convnet-program-$dt
			[[ $be == tape ]] && name=convnet-tape-$dt
			printf '%-28s %8.1f samples/s\n' "$name" "${rate[$be-$dt]}"
		done
	done
	for t in 1 2; do
		name=convnet-torch-$t-thread; [[ $t == 2 ]] && name=convnet-torch-2-threads
		line=$(run_torch "$name" scripts/torch_cnn.py --threads "$t" --steps 100)
		echo "$line"
		rate[torch-$t]=$(awk '{print $2}' <<<"$line")
	done
	awk -v p="${rate[cpu-float32]}" -v p64="${rate[cpu-float64]}" -v t="${rate[tape-float32]}" -v t64="${rate[tape-float64]}" \
		-v a="${rate[torch-1]}" -v b="${rate[torch-2]}" 'BEGIN {
		best = (a + 0 > b + 0) ? a : b
		printf "convnet float32: compiled %.2fx the tape machine (floor 3), %.2fx PyTorch'"'"'s best (floor 1.0); float64: %.2fx the tape machine\n",
			p / t, (best + 0 > 0 ? p / best : 0), p64 / t64 }'
fi
if [[ $what == cnn || $what == all ]]; then
	against_torch cnn 32 200 scripts/torch_cnn.py --net cnn
fi
if [[ $what == rnn || $what == all ]]; then
	against_torch rnn 16 300 scripts/torch_rnn.py
fi
if [[ $what == cuda ]]; then
	run_go ffn-cuda-rsdm program 16 -device cuda -limit-train 16000
	run_go ffn-cuda-rgd program 16 -device cuda -optim rgd -limit-train 3200
	run_torch ffn-torch-cuda scripts/torch_ffn.py --device cuda --steps 1000
	run_go vit-cuda-rsdm program 32 -device cuda -model vit -limit-train 3200
	run_go vit-cuda-rgd program 32 -device cuda -model vit -optim rgd -limit-train 1600
	run_torch vit-torch-cuda scripts/torch_vit.py --device cuda --steps 100
	run_go rnn-cuda-rsdm program 16 -device cuda -model rnn -limit-train 3200
	run_torch rnn-torch-cuda scripts/torch_rnn.py --device cuda --steps 300
	for m in ffn vit; do
		args=(-device cuda -limit-train 1600)
		batch=16
		if [[ $m == vit ]]; then args+=(-model vit); batch=32; fi
		run_go "$m-cuda-profile" program "$batch" "${args[@]}" -kernel-profile
		keep "$m-cuda-profile"
		sed -n '/device profile/,$p' "$out/$m-cuda-profile.log" | head -30
	done
fi
