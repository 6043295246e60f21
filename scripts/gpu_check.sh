#!/usr/bin/env bash
# The GPU checks in one command, for the day a session has a GPU machine (no
# Go there, no network, 64 MiB of files per call):
#
#   bash scripts/gpu_check.sh pack DIR      here: builds what the GPU machine
#                                           runs (train, the CUDA test binaries,
#                                           Fashion-MNIST's test set) into DIR
#   bash scripts/gpu_check.sh run DIR OUT   there: the CUDA backend's tests on the
#                                           GPU, the throughput table beside
#                                           scripts/torch_*.py --device cuda, and
#                                           each model's kernel profile, into OUT
#   bash scripts/gpu_check.sh smoke OUT     pack and run on the host model of the
#                                           device at small sizes, checking that
#                                           every part produced its figures (make
#                                           test runs this)
#
# OUT holds tests-*.txt (go test -v output), throughput.txt (samples/s a row),
# profile-ffn.txt and profile-vit.txt (-kernel-profile), and machine.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

pack() { # DIR
	local dir=$1
	mkdir -p "$dir/data"
	local ld=(-ldflags "-s -w")
	go build "${ld[@]}" -o "$dir/train" ./cmd/train
	go test -c "${ld[@]}" -o "$dir/cuda.test" ./backend/cuda
	go test -c "${ld[@]}" -o "$dir/program.test" ./program
	go test -c "${ld[@]}" -o "$dir/optim.test" ./optim/device
	cp scripts/torch_ffn.py scripts/torch_vit.py "$dir/"
	# Fashion-MNIST's test set, also as the training set: the runs measure
	# throughput, not accuracy, and it keeps DIR small.
	local src=/usr/share/datasets/fashion-mnist
	for k in images-idx3 labels-idx1; do
		cp "$src/t10k-$k-ubyte.gz" "$dir/data/t10k-$k-ubyte.gz"
		cp "$src/t10k-$k-ubyte.gz" "$dir/data/train-$k-ubyte.gz"
	done
}

# steady METRICS BATCH: samples/s between the 5th logged training row and the last.
steady() {
	awk -F, -v b="$2" '$1=="train"{n++; if(n==5){s0=$3;t0=$4} s=$3;t=$4}
		END{if(n<6){print "n/a"} else printf "%.1f", (s-s0)*b/(t-t0)}' "$1"
}

run() { # DIR OUT [small]
	local dir=$1 out=$2 small=${3:-}
	mkdir -p "$out"
	out=$(cd "$out" && pwd)
	dir=$(cd "$dir" && pwd)
	{
		echo "date: $(date -u +%FT%TZ)"
		echo "cpu: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
		nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || true
		echo "host model: ${ORTHONET_CUDA_STANDIN:-0}"
	} >"$out/machine.txt"

	# The tests, on the device (the host model in smoke runs).
	local gpu=1
	[[ ${ORTHONET_CUDA_STANDIN:-} == 1 ]] && gpu=0
	(cd "$root/backend/cuda" && ORTHONET_CUDA_GPU=$gpu "$dir/cuda.test" -test.v -test.count=1 ${small:+-test.run 'TestCopyOutWaits|TestRowFault'}) >"$out/tests-cuda.txt" 2>&1 || echo "FAIL: cuda tests" >>"$out/failures.txt"
	(cd "$root/program" && ORTHONET_CUDA_GPU=$gpu "$dir/program.test" -test.v -test.count=1 -test.run "${small:+TestModelsAgreeOnDevice/ffn}${small:-Device|Lowerings}") >"$out/tests-program.txt" 2>&1 || echo "FAIL: program tests" >>"$out/failures.txt"
	(cd "$root/optim/device" && ORTHONET_CUDA_GPU=$gpu "$dir/optim.test" -test.v -test.count=1 -test.run Device ${small:+-test.short}) >"$out/tests-optim.txt" 2>&1 || echo "FAIL: optim tests" >>"$out/failures.txt"

	# Throughput: train on the device beside PyTorch on the same device.
	local work
	work=$(mktemp -d)
	# Images each run trains on: RSDM, RGD, the profile; PyTorch's steps.
	local ffn=() vit=(-model vit) r=() ffnn=(16000 3200 1600) vitn=(3200 1600 800) torchffn=1000 torchvit=100
	if [[ -n $small ]]; then
		# RSDM's r goes to the RSDM runs only: train refuses -r with -optim rgd.
		ffn=(-hidden 64) vit=(-model vit -dim 32 -depth 1 -heads 2 -mlp 32) r=(-r 16)
		ffnn=(160 160 32) vitn=(256 256 64) torchffn=0 torchvit=0
	fi
	go_row() { # NAME BATCH ARGS...
		local name=$1 batch=$2
		shift 2
		if "$dir/train" -device cuda -data "$dir/data" -batch "$batch" -schedule const -eval-every -1 -limit-test 100 -out "$work/$name" "$@" >"$work/$name.log" 2>&1; then
			printf '%-24s %8s samples/s\n' "$name" "$(steady "$(ls "$work/$name"/run-*/metrics.csv)" "$batch")"
		else
			printf '%-24s %8s (%s)\n' "$name" failed "$(tail -1 "$work/$name.log")"
			echo "FAIL: $name" >>"$out/failures.txt"
		fi
	}
	torch_row() { # NAME SCRIPT STEPS ARGS...
		local name=$1 script=$2 steps=$3
		shift 3
		if [[ $steps == 0 ]] || ! python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
			printf '%-24s %8s\n' "$name" "(no torch on cuda)"
			return
		fi
		printf '%-24s %8s samples/s\n' "$name" "$(python3 "$dir/$script" --device cuda --steps "$steps" "$@" 2>&1 | tail -1 | sed -E 's/.*: ([0-9.]+) samples.*/\1/')"
	}
	{
		go_row ffn-rsdm 16 "${ffn[@]}" "${r[@]}" -limit-train "${ffnn[0]}"
		go_row ffn-rgd 16 "${ffn[@]}" -optim rgd -lr 0.01 -limit-train "${ffnn[1]}"
		torch_row ffn-torch torch_ffn.py "$torchffn"
		go_row vit-rsdm 32 "${vit[@]}" "${r[@]}" -lr 0.5 -other adam -lr-other 5e-4 -limit-train "${vitn[0]}"
		go_row vit-rgd 32 "${vit[@]}" -optim rgd -lr 0.05 -other adam -lr-other 5e-4 -limit-train "${vitn[1]}"
		torch_row vit-torch torch_vit.py "$torchvit"
	} >"$out/throughput.txt"

	# Where a step's time goes on the device, kernel by kernel.
	"$dir/train" -device cuda -data "$dir/data" -batch 16 -schedule const -eval-every -1 -limit-test 100 -kernel-profile \
		"${ffn[@]}" "${r[@]}" -limit-train "${ffnn[2]}" -out "$work/pf" >"$out/profile-ffn.txt" 2>&1 || echo "FAIL: ffn profile" >>"$out/failures.txt"
	"$dir/train" -device cuda -data "$dir/data" -batch 32 -schedule const -eval-every -1 -limit-test 100 -kernel-profile \
		"${vit[@]}" "${r[@]}" -limit-train "${vitn[2]}" -out "$work/pv" >"$out/profile-vit.txt" 2>&1 || echo "FAIL: vit profile" >>"$out/failures.txt"
	rm -rf "$work"
	cat "$out/throughput.txt"
	if [[ -e $out/failures.txt ]]; then
		cat "$out/failures.txt" >&2
		return 1
	fi
}

# smoke OUT: pack and run at small sizes on the host model, then check that
# every part wrote its figures.
smoke() {
	local out=$1 dir
	dir=$(mktemp -d)
	trap 'rm -rf "$dir"' RETURN
	pack "$dir"
	ORTHONET_CUDA_STANDIN=1 run "$dir" "$out" small
	grep -q '^--- PASS' "$out/tests-cuda.txt"
	grep -q '^--- PASS' "$out/tests-program.txt"
	grep -q '^--- PASS' "$out/tests-optim.txt"
	for row in ffn-rsdm ffn-rgd vit-rsdm vit-rgd; do
		grep -Eq "^$row +[0-9.]+ samples/s" "$out/throughput.txt" || { echo "gpu_check: no figure for $row" >&2; return 1; }
	done
	grep -q 'device profile' "$out/profile-ffn.txt" && grep -q 'device profile' "$out/profile-vit.txt" ||
		{ echo "gpu_check: a kernel profile is missing" >&2; return 1; }
	grep -q 'host model' "$out/profile-ffn.txt" || { echo "gpu_check: train did not say it ran on the host model" >&2; return 1; }
	echo "gpu_check: smoke run on the host model passed (figures in $out)"
}

case ${1:-} in
pack) pack "$2" ;;
run) run "$2" "$3" ;;
smoke) smoke "${2:-out/gpu-check}" ;;
*)
	sed -n '2,17p' "$0" >&2
	exit 2
	;;
esac
