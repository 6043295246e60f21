#!/usr/bin/env bash
# The GPU checks in one command, for a GPU machine lent for minutes: no Go
# there, no network, 64 MiB of files sent per call (the working tree plus
# at most 8 named ignored paths), 10 minutes a command, at most 8 files back.
#
#   bash scripts/gpu_check.sh pack [DIR]    here: builds what the GPU machine
#       runs (train, the CUDA test binaries, Fashion-MNIST's test images) into
#       one archive, DIR/gpu-check.tgz, beside DIR/build.txt (the commit, Go,
#       sizes, the GLIBC/GLIBCXX versions each binary needs); DIR must be an
#       ignored folder of this repository (default build/gpu), sent by naming
#       it in the device tool's carry; fails above 56 MiB
#   bash scripts/gpu_check.sh run DIR OUT   there: the staged checks, each
#       under its own time limit (below), into OUT/report.txt and OUT/logs.tgz
#   bash scripts/gpu_check.sh smoke [OUT]   here: pack, then run on the host
#       model of the device at small sizes, and check what both wrote, and
#       that a stage made to hang is cut (make test runs this)
#
# run's stages, their limits (seconds; 370 in all, under 6.5 minutes) and what
# each needs: a stage whose need failed is reported "not run".
#   0 machine       15  OS, glibc, GPUs, driver, PATH, where the CUDA libraries are, torch
#   1 ldd           10  each binary's libraries found, train starts
#   2 train         45  train -device cuda on a tiny FFN (blocking launches):     needs 1
#                       the libraries it loaded from where, CUBIN or PTX
#   3 cuda-tests    60  backend/cuda's tests on the device                       needs 1, 2
#   4 device-tests  60  program's and optim/device's device tests                needs 1, 2
#   5 throughput   130  train beside PyTorch (FFN, ViT), kernel profiles         needs 1, 2
#   6 memcheck      50  compute-sanitizer on the kernel comparison               needs 1, 2
# Every stage appends its header, exit code and last 30 lines to report.txt,
# and logs.tgz is made again after each (so a command killed at the device
# tool's limit still returns everything up to it). The test stages run with
# CUDA_LAUNCH_BLOCKING=1, -test.failfast (cuda-tests alone) and a
# -test.timeout 5 s below the stage's limit (Go then prints the stuck test's
# stack). run exports VIRTUAL_ENV from the python3 on PATH when that is a virtual environment
# (NVIDIA's wheels live there) and a kernel-cache folder of its own.
#
# ORTHONET_GPU_CHECK_HANG=STAGE (a stage's name) makes that stage hang, for
# the test that shows it is cut at its limit and the later ones not run.
set -euo pipefail
caller=$(pwd)
cd "$(dirname "$0")/.."
root=$(pwd)
script=$root/scripts/gpu_check.sh

readonly limit_mib=56 tree_mib=64 budget=375
readonly stages=(machine ldd train cuda-tests device-tests throughput memcheck)
readonly limits=(15 10 45 60 60 130 50)
readonly needs=("" "" "1" "1 2" "1 2" "1 2" "1 2")
readonly bins=(train cuda.test program.test optim.test)

die() {
	echo "gpu_check: $*" >&2
	exit 1
}

# Temporary folders, removed when the script exits.
tmps=()
trap 'rm -rf "${tmps[@]}"' EXIT

# abspath P: P as an absolute path, a relative one taken from the caller's folder.
abspath() {
	case $1 in
	/*) realpath -m "$1" ;;
	*) realpath -m "$caller/$1" ;;
	esac
}

# needs_of FILE PREFIX: the highest version of PREFIX (GLIBC, GLIBCXX) that
# FILE's dynamic symbols ask for, or "-".
needs_of() {
	local v
	v=$(objdump -T "$1" 2>/dev/null | grep -oE "\b$2_[0-9][0-9.]*" | sed "s/^$2_//" | sort -uV | tail -1)
	echo "${v:--}"
}

# probe FLAGS...: links a small C++ program that throws, starts threads and
# calls dlopen, as the cgo binaries do, with g++ and FLAGS, and prints the
# highest GLIBC version it needs and the symbols of that version.
probe() {
	local d v
	d=$(mktemp -d)
	cat >"$d/p.cc" <<'EOF'
#include <dlfcn.h>
#include <pthread.h>
#include <stdexcept>
#include <string>
static void *run(void *) { return nullptr; }
int main(int argc, char **argv) {
  pthread_t t;
  pthread_create(&t, nullptr, run, nullptr);
  pthread_join(t, nullptr);
  if (argc > 5) dlopen(argv[1], RTLD_NOW);
  try {
    if (argc > 6) throw std::runtime_error(std::string(argv[0]));
  } catch (const std::exception &) {
    return 1;
  }
  return 0;
}
EOF
	if ! g++ -O1 "$@" -o "$d/p" "$d/p.cc" -pthread -ldl 2>"$d/err"; then
		echo "- (g++ $* failed: $(head -1 "$d/err"))"
		rm -rf "$d"
		return
	fi
	v=$(needs_of "$d/p" GLIBC)
	echo "$v $(objdump -T "$d/p" | grep -F "(GLIBC_$v)" | awk '{print $NF}' | sort -u | paste -sd, -)"
	rm -rf "$d"
}

# static_flags: the -static-lib* flags that link libstdc++ and libgcc into the
# binaries without raising the GLIBC version they need (GCC 12's libstdc++.a
# calls arc4random, GLIBC 2.36; its libgcc_eh _dl_find_object, 2.35), and a
# line for build.txt saying what stays dynamic and why.
static_flags() {
	local base flags=() why=() f p
	base=$(probe)
	for f in -static-libstdc++ -static-libgcc; do
		p=$(probe "$f")
		if [[ ${p%% *} != - && $(printf '%s\n%s\n' "${p%% *}" "${base%% *}" | sort -V | tail -1) == "${base%% *}" ]]; then
			flags+=("$f")
		else
			why+=("${f#-static-}: dynamic (linked statically it needs GLIBC ${p%% *} for ${p#* }, against ${base%% *} without)")
		fi
	done
	echo "${flags[*]:-}"
	if ((${#why[@]})); then
		printf '%s; ' "${why[@]:0:${#why[@]}-1}"
		echo "${why[-1]}"
	else
		echo "libstdc++ and libgcc linked statically"
	fi
}

# not_packs DIR prints the name of the first file in DIR that pack does not
# write (gpu-check.tgz, build.txt), or nothing (DIR absent, or pack's alone).
not_packs() {
	[[ -d $1 ]] || return 0
	local f
	for f in "$1"/* "$1"/.[!.]*; do
		[[ -e $f ]] || continue
		case ${f##*/} in gpu-check.tgz | build.txt) ;; *)
			echo "${f##*/}"
			return
			;;
		esac
	done
}

pack() { # [DIR]
	local dir rel
	dir=$(abspath "${1:-build/gpu}")
	[[ $dir == "$root"/* ]] || die "pack: $dir is outside the repository ($root): the device tool sends only the repository's working tree and the ignored paths named in its carry"
	rel=${dir#"$root"/}
	git -C "$root" check-ignore -q "$rel/" ||
		die "pack: $rel is not ignored by git: it would travel with every call as part of the working tree (and git add -A would commit it); give an ignored folder such as build/gpu and name it in the device tool's carry"
	local foreign
	foreign=$(not_packs "$dir")
	[[ -z $foreign ]] || die "pack: $rel holds $foreign, not pack's: give an empty or new folder"
	mkdir -p "$dir"
	rm -f "$dir/gpu-check.tgz" "$dir/build.txt"

	local stage static why
	stage=$(mktemp -d)
	tmps+=("$stage")
	{
		read -r static
		read -r why
	} < <(static_flags)
	local ldflags="-s -w"
	[[ -n $static ]] && ldflags+=" -extldflags '$static'"
	local b=$stage/gpu-check
	mkdir -p "$b/data"
	go build -trimpath -ldflags "$ldflags" -o "$b/train" ./cmd/train
	go test -c -trimpath -ldflags "$ldflags" -o "$b/cuda.test" ./backend/cuda
	go test -c -trimpath -ldflags "$ldflags" -o "$b/program.test" ./program
	go test -c -trimpath -ldflags "$ldflags" -o "$b/optim.test" ./optim/device
	cp scripts/torchref.py scripts/torch_ffn.py scripts/torch_vit.py "$b/"
	# Fashion-MNIST's test set once: run links it as the training set too
	# (the runs measure speed, not accuracy).
	local src=/usr/share/datasets/fashion-mnist k
	for k in images-idx3 labels-idx1; do
		cp "$src/t10k-$k-ubyte.gz" "$b/data/"
	done
	tar -C "$stage" -czf "$dir/gpu-check.tgz" gpu-check

	local commit dirty="" bytes
	commit=$(git rev-parse HEAD)
	[[ -n $(git status --porcelain --untracked-files=no) ]] && dirty=" (with uncommitted changes)"
	bytes=$(stat -c %s "$dir/gpu-check.tgz")
	{
		echo "gpu_check pack"
		echo "commit: $commit$dirty"
		echo "go: $(go version | sed 's/^go version //')"
		echo "built: $(date -u +%FT%TZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), glibc $(getconf GNU_LIBC_VERSION | cut -d' ' -f2), $(g++ --version | head -1)"
		echo "flags: -trimpath -ldflags \"$ldflags\""
		echo "linking: $why"
		echo
		printf '%-32s %10s  %-6s %-8s %s\n' file bytes GLIBC GLIBCXX "dynamic libraries (readelf -d)"
		local f
		for f in "${bins[@]}"; do
			printf '%-32s %10s  %-6s %-8s %s\n' "$f" "$(stat -c %s "$b/$f")" "$(needs_of "$b/$f" GLIBC)" "$(needs_of "$b/$f" GLIBCXX)" \
				"$(readelf -d "$b/$f" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | paste -sd' ' -)"
		done
		for f in "$b"/data/* "$b"/*.py; do
			printf '%-32s %10s\n' "${f#"$b"/}" "$(stat -c %s "$f")"
		done
		echo
		echo "archive: $rel/gpu-check.tgz, $bytes bytes ($(awk -v n="$bytes" 'BEGIN{printf "%.1f", n/1048576}') MiB; limit $limit_mib MiB)"
	} >"$dir/build.txt"
	local tree sent
	tree=$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- | tail -1 | cut -f1)
	sent=$((tree + bytes + $(stat -c %s "$dir/build.txt")))
	echo "sent with the working tree: $sent bytes ($(awk -v n="$sent" 'BEGIN{printf "%.1f", n/1048576}') MiB of the device tool's $tree_mib MiB)" >>"$dir/build.txt"
	cat "$dir/build.txt"
	if ((bytes + $(stat -c %s "$dir/build.txt") > limit_mib * 1048576)); then
		die "pack: $rel is over $limit_mib MiB"
	fi
	((sent <= tree_mib * 1048576)) || die "pack: the working tree and $rel are over the device tool's $tree_mib MiB"
	echo "gpu_check: send $rel (the device tool's carry: [\"$rel\"]); there: bash scripts/gpu_check.sh run $rel \"\$OUT\""
}

# steady METRICS BATCH: samples/s between the 5th logged training row and the last.
steady() {
	awk -F, -v b="$2" '$1=="train"{n++; if(n==5){s0=$3;t0=$4} s=$3;t=$4}
		END{if(n<6){print "n/a"} else printf "%.1f", (s-s0)*b/(t-t0)}' "$1"
}

# stage NAME: runs one stage (run calls it under timeout, with BIN, WORK,
# GPU, SMALL and STAGE_LIMIT set); its output is the stage's log.
stage() {
	set +e # a stage's exit status is its last command's, or what it returns
	local name=$1
	if [[ ${ORTHONET_GPU_CHECK_HANG:-} == "$name" ]]; then
		echo "hanging on purpose (ORTHONET_GPU_CHECK_HANG=$name)"
		sleep 3600
	fi
	local tt=$((STAGE_LIMIT - 5))
	case $name in
	machine)
		echo "date: $(date -u +%FT%TZ), host $(hostname)"
		echo "os: $( (. /etc/os-release && echo "$PRETTY_NAME") 2>/dev/null || uname -a), kernel $(uname -r)"
		echo "glibc: $(getconf GNU_LIBC_VERSION 2>/dev/null || echo '?'); libstdc++: $(ldconfig -p 2>/dev/null | grep -m1 'libstdc++.so.6 ' | sed 's/.*=> //')"
		echo "cpu: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
		echo "host model: ${ORTHONET_CUDA_STANDIN:-0}"
		echo "--- nvidia-smi"
		nvidia-smi -L 2>&1 || true
		nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1 || true
		echo "--- environment"
		echo "PATH=$PATH"
		echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
		echo "VIRTUAL_ENV=${VIRTUAL_ENV:-} CONDA_PREFIX=${CONDA_PREFIX:-} CUDA_HOME=${CUDA_HOME:-} CUDA_PATH=${CUDA_PATH:-}"
		echo "python3: $(command -v python3 || echo none) -> $(readlink -f "$(command -v python3 2>/dev/null)" 2>/dev/null || true)"
		echo "--- CUDA libraries"
		ldconfig -p 2>/dev/null | grep -E 'lib(cuda|nvrtc|nvrtc-builtins|cublas|cublasLt|cusolver|cusparse|nvJitLink)\.so' || echo "(none in ldconfig's cache)"
		local d
		for d in /usr/local/nvidia/lib64 /usr/local/cuda/lib64 "${VIRTUAL_ENV:-/nonexistent}"/lib/python3*/site-packages/nvidia/*/lib; do
			[[ -d $d ]] || continue
			local f found=()
			for f in "$d"/lib{cuda,nvrtc,cublas,cusolver,cusparse,nvJitLink}*; do
				[[ -e $f ]] && found+=("${f##*/}")
			done
			echo "$d: ${found[*]:-(none)}"
		done
		echo "compute-sanitizer: $(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || echo none)"
		echo "--- torch"
		timeout 30 python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "available", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")' 2>&1 | tail -3 || true
		echo "--- build.txt"
		cat "$BUILD_TXT"
		;;
	ldd)
		local b rc=0
		for b in "${bins[@]}"; do
			echo "--- $b"
			ldd "$BIN/$b" 2>&1 || rc=1
			if ldd "$BIN/$b" 2>&1 | grep -q 'not found'; then
				echo "FAIL: $b: a library or version is not found"
				rc=1
			fi
		done
		echo "--- train -h"
		if "$BIN/train" -h >/dev/null 2>&1; then echo "train starts"; else
			echo "FAIL: train -h: exit $?"
			rc=1
		fi
		return $rc
		;;
	train)
		CUDA_LAUNCH_BLOCKING=1 "$BIN/train" -device cuda -data "$BIN/data" -hidden 64 -r 16 -batch 16 -limit-train 640 \
			-limit-test 200 -schedule const -eval-every -1 -out "$WORK/runs/train"
		;;
	cuda-tests)
		cd "$root/backend/cuda"
		local run=()
		[[ -n $SMALL ]] && run=(-test.run 'TestCopyOutWaits|TestRowFault|TestDriverStartRace')
		ORTHONET_CUDA_GPU=$GPU CUDA_LAUNCH_BLOCKING=1 "$BIN/cuda.test" -test.v -test.count=1 -test.failfast \
			-test.timeout "${tt}s" "${run[@]}"
		;;
	device-tests)
		local prun=Device\|Lowerings orun=Device short=() rc=0
		[[ -n $SMALL ]] && prun=TestModelsAgreeOnDevice/ffn short=(-test.short)
		# No -test.failfast here: the cuda-tests stage has shown that launches
		# work, and a difference past a tolerance must not hide the tests after it.
		(cd "$root/program" && ORTHONET_CUDA_GPU=$GPU CUDA_LAUNCH_BLOCKING=1 "$BIN/program.test" -test.v -test.count=1 \
			-test.timeout "$((tt * 2 / 3))s" -test.run "$prun") || rc=1
		(cd "$root/optim/device" && ORTHONET_CUDA_GPU=$GPU CUDA_LAUNCH_BLOCKING=1 "$BIN/optim.test" -test.v -test.count=1 \
			-test.timeout "$((tt / 3))s" -test.run "$orun" "${short[@]}") || rc=1
		return $rc
		;;
	throughput) throughput ;;
	memcheck)
		if [[ $GPU != 1 ]]; then
			echo "skipped: the host model of the device has no GPU memory to check"
			return 0
		fi
		local cs
		cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
		if [[ -z $cs ]]; then
			echo "skipped: no compute-sanitizer on PATH or in /usr/local/cuda/bin"
			return 0
		fi
		cd "$root/backend/cuda"
		ORTHONET_CUDA_GPU=1 "$cs" --tool memcheck --error-exitcode 9 --print-limit 20 "$BIN/cuda.test" -test.v -test.count=1 \
			-test.failfast -test.timeout "${tt}s" -test.run '^TestKernelsAgreeWithCPU$'
		;;
	*) die "no stage $name" ;;
	esac
}

# throughput: the rows of train on the device (samples/s) beside PyTorch on
# the same device, then each model's kernel profile; the table last.
throughput() {
	local runs=$WORK/runs logs=$WORK/logs/throughput table=$WORK/logs/throughput.txt rc=0
	mkdir -p "$runs" "$logs"
	: >"$table"
	# RSDM's r goes to the RSDM runs only: train refuses -r with -optim rgd.
	local ffn=(-epochs 4 -time-limit 6s) vit=(-model vit -epochs 1 -time-limit 8s) r=() prof=(-time-limit 4s)
	local ffnp=(-epochs 4) vitp=(-model vit -epochs 1) vitb=32 torchffn=500 torchvit=50 row=30
	if [[ -n $SMALL ]]; then
		# The host model runs every kernel's threads one by one: a ViT step of
		# 65 tokens of 32 takes it seconds. Six steps make the six rows
		# that steady needs.
		local tiny=(-model vit -dim 16 -depth 1 -heads 2 -mlp 16 -patch 8)
		ffn=(-hidden 64 -limit-train 160) vit=("${tiny[@]}" -limit-train 48) r=(-r 16) prof=()
		ffnp=(-hidden 64 -limit-train 32) vitp=("${tiny[@]}" -limit-train 16) vitb=8
		torchffn=0 torchvit=0 row=$((STAGE_LIMIT / 3))
	fi
	go_row() { # NAME BATCH ARGS...
		local name=$1 batch=$2
		shift 2
		if timeout "$row" "$BIN/train" -device cuda -data "$BIN/data" -batch "$batch" -schedule const -eval-every -1 \
			-limit-test 100 -out "$runs/$name" "$@" >"$logs/$name.log" 2>&1; then
			printf '%-24s %8s samples/s\n' "$name" "$(steady "$(ls "$runs/$name"/run-*/metrics.csv)" "$batch")" >>"$table"
		else
			printf '%-24s %8s (%s)\n' "$name" failed "$(tail -1 "$logs/$name.log")" >>"$table"
			rc=1
		fi
	}
	torch_row() { # NAME SCRIPT STEPS ARGS...
		local name=$1 script=$2 steps=$3
		shift 3
		if [[ $steps == 0 ]] || ! timeout 30 python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
			printf '%-24s %8s\n' "$name" "(no torch on cuda)" >>"$table"
			return
		fi
		printf '%-24s %8s samples/s\n' "$name" "$(timeout "$row" python3 "$BIN/$script" --device cuda --steps "$steps" "$@" 2>&1 |
			tee "$logs/$name.log" | tail -1 | sed -E 's/.*: ([0-9.]+) samples.*/\1/')" >>"$table"
	}
	go_row ffn-rsdm 16 "${ffn[@]}" "${r[@]}"
	go_row ffn-rgd 16 "${ffn[@]}" -optim rgd -lr 0.01
	torch_row ffn-torch torch_ffn.py "$torchffn"
	go_row vit-rsdm "$vitb" "${vit[@]}" "${r[@]}" -lr 0.5 -other adam -lr-other 5e-4
	go_row vit-rgd "$vitb" "${vit[@]}" -optim rgd -lr 0.05 -other adam -lr-other 5e-4
	torch_row vit-torch torch_vit.py "$torchvit"
	local m
	for m in ffn vit; do
		local args=("${ffnp[@]}") batch=16
		[[ $m == vit ]] && args=("${vitp[@]}") batch=$vitb
		if timeout "$row" "$BIN/train" -device cuda -data "$BIN/data" -batch "$batch" -schedule const -eval-every -1 -limit-test 100 \
			-kernel-profile "${args[@]}" "${r[@]}" "${prof[@]}" -out "$runs/profile-$m" >"$logs/profile-$m.log" 2>&1 &&
			grep -q 'device profile' "$logs/profile-$m.log"; then
			echo "--- kernel profile, $m"
			sed -n '/device profile/,/^test accuracy/p' "$logs/profile-$m.log"
		else
			echo "FAIL: the $m kernel profile: $(tail -1 "$logs/profile-$m.log")"
			rc=1
		fi
	done
	echo "--- throughput"
	cat "$table"
	return $rc
}

run() { # DIR OUT [small]
	local dir out small=${3:-}
	dir=$(abspath "$1")
	out=$(abspath "$2")
	[[ -f $dir/gpu-check.tgz ]] || die "run: no $dir/gpu-check.tgz: make it here with bash scripts/gpu_check.sh pack"
	tar -tzf "$dir/gpu-check.tgz" gpu-check/train >/dev/null 2>&1 ||
		die "run: $dir/gpu-check.tgz is not a pack of gpu_check.sh (no gpu-check/train in it)"
	# run writes report.txt and logs.tgz into OUT and never replaces files
	# it did not write in this run.
	local f
	for f in report.txt logs.tgz logs.tgz.tmp; do
		[[ ! -e $out/$f ]] || die "run: $out/$f exists: give an OUT without report.txt and logs.tgz (run writes them)"
	done
	mkdir -p "$out"
	local start=$SECONDS work
	work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
	tmps+=("$work")
	tar -C "$work" -xzf "$dir/gpu-check.tgz"
	local k
	for k in images-idx3 labels-idx1; do # the test images serve as the training set too
		ln -s "t10k-$k-ubyte.gz" "$work/gpu-check/data/train-$k-ubyte.gz"
	done
	mkdir -p "$work/logs" "$work/cache" "$work/runs"
	cp "$dir/build.txt" "$work/logs/build.txt" 2>/dev/null || echo "(no build.txt)" >"$work/logs/build.txt"
	export BIN=$work/gpu-check WORK=$work SMALL=$small BUILD_TXT=$work/logs/build.txt
	export GPU=1
	[[ ${ORTHONET_CUDA_STANDIN:-} == 1 ]] && GPU=0
	export XDG_CACHE_HOME=$work/cache # compiled kernels, shared by the stages
	if [[ -z ${VIRTUAL_ENV:-} ]] && command -v python3 >/dev/null; then
		local venv
		venv=$(timeout 10 python3 -c 'import sys; print(sys.prefix if sys.prefix != sys.base_prefix else "")' 2>/dev/null || true)
		[[ -n $venv ]] && export VIRTUAL_ENV=$venv
	fi
	local report=$out/report.txt
	{
		echo "gpu_check run: $(date -u +%FT%TZ) on $(hostname); host model: ${ORTHONET_CUDA_STANDIN:-0}; small: ${small:-no}"
		echo "stages' limits: $(for i in "${!stages[@]}"; do printf '%s %ss, ' "${stages[$i]}" "${limits[$i]}"; done)whole run under $budget s"
	} >"$report"
	local i codes=() status=0 scale=1 total=$budget
	if [[ -n $small ]]; then
		# The host model is many times slower than a GPU, and make test's
		# machine is shared: the stages that run the device get 4 times
		# their limits there (machine and ldd keep theirs).
		scale=4 total=$((budget * 4))
		echo "small sizes on the host model: the limits of stages 2-6 times $scale, whole run under $total s" >>"$report"
	fi
	for i in "${!stages[@]}"; do
		local name=${stages[$i]} limit=${limits[$i]} why="" n
		((i >= 2)) && limit=$((limit * scale))
		for n in ${needs[$i]}; do
			[[ ${codes[$n]} == 0 ]] || why="stage $n ${stages[$n]} ${codes[$n]/#[0-9]*/failed}"
			[[ -n $why ]] && break
		done
		local left=$((total - (SECONDS - start) - 5))
		if [[ -z $why ]] && ((left < limit)); then
			limit=$left
			((limit < 10)) && why="no time left of the $total s"
		fi
		if [[ -n $why ]]; then
			codes[i]="not run"
			printf '\n== stage %d %s: not run (%s) ==\n' "$i" "$name" "$why" >>"$report"
			continue
		fi
		local log=$work/logs/$i-$name.log t0=$SECONDS rc=0
		STAGE_LIMIT=$limit timeout -k 5 "$limit" bash "$script" stage "$name" >"$log" 2>&1 || rc=$?
		codes[i]=$rc
		local how=""
		((rc == 124 || rc == 137)) && how=": cut at its limit of $limit s"
		{
			printf '\n== stage %d %s (limit %d s) ==\n' "$i" "$name" "$limit"
			printf 'exit %d after %d s%s\n' "$rc" $((SECONDS - t0)) "$how"
			echo "--- last 30 lines of logs/$i-$name.log"
			tail -n 30 "$log"
		} >>"$report"
		((rc == 0)) || status=1
		cp "$report" "$work/logs/report.txt"
		tar -C "$work" -czf "$out/logs.tgz.tmp" logs && mv "$out/logs.tgz.tmp" "$out/logs.tgz"
	done
	{
		echo
		printf 'summary:'
		for i in "${!stages[@]}"; do printf ' %s %s,' "${stages[$i]}" "${codes[$i]}"; done
		printf ' %d s in all\n' $((SECONDS - start))
	} >>"$report"
	cp "$report" "$work/logs/report.txt"
	tar -C "$work" -czf "$out/logs.tgz.tmp" logs && mv "$out/logs.tgz.tmp" "$out/logs.tgz"
	tail -n 1 "$report"
	return $status
}

# smoke [OUT]: pack once (build/gpu-smoke), run on the host model at small
# sizes, then again with a stage made to hang, checking each floor.
# smoke_mark marks a folder smoke made: a later smoke may replace it.
readonly smoke_mark=.made-by-gpu_check-smoke

# smoke_replaceable OUT says whether smoke may write OUT: absent, or made by
# an earlier smoke (marked); anything else is the user's and is refused.
smoke_replaceable() {
	[[ ! -e $1 || -f $1/$smoke_mark ]]
}

smoke() {
	local out final dir=$root/build/gpu-smoke
	final=$(abspath "${1:-out/gpu-check}")
	smoke_replaceable "$final" || die "smoke: $final exists and was not made by gpu_check.sh smoke: give a new folder"
	[[ -z $(not_packs "$dir") ]] || die "smoke: $dir holds files that are not pack's"
	# Everything is written into new folders, renamed into place at the end.
	mkdir -p "$(dirname "$final")" "$(dirname "$dir")"
	out=$(mktemp -d "$final.new.XXXXXX")
	tmps+=("$out")
	touch "$out/$smoke_mark"
	local newdir
	newdir=$(mktemp -d "$dir.new.XXXXXX")
	tmps+=("$newdir")
	smoke_checks "$newdir" "$out"
	replace "$newdir" "$dir"
	replace "$out" "$final"
	echo "gpu_check: see $final"
}

# replace NEW OLD renames the folder NEW to OLD, first removing OLD, which
# smoke_replaceable or not_packs allowed.
replace() {
	local old
	if [[ -e $2 ]]; then
		old=$(mktemp -d "$2.old.XXXXXX")
		mv "$2" "$old/x"
		tmps+=("$old")
	fi
	mv "$1" "$2"
}

# smoke_checks DIR OUT: smoke's checks, packing into DIR, writing into OUT.
smoke_checks() {
	local dir=$1 out=$2
	# No file smoke or run did not make is lost: a user's folder is refused,
	# as is an OUT holding a report, and an archive that is not a pack.
	local user=$out/user
	mkdir -p "$user"
	echo keep >"$user/mine.txt"
	bash "$script" smoke "$user" >/dev/null 2>&1 && die "smoke: smoke into a folder of the user's did not refuse"
	[[ $(cat "$user/mine.txt" 2>/dev/null) == keep ]] || die "smoke: smoke into a folder of the user's lost its file"
	echo "an earlier report" >"$user/report.txt"
	echo "not a pack" | gzip >"$user/gpu-check.tgz"
	bash "$script" run "$user" "$user" >/dev/null 2>&1 && die "smoke: run of an archive that is not a pack did not refuse"
	[[ $(cat "$user/report.txt") == "an earlier report" ]] || die "smoke: run of a bad pack replaced OUT/report.txt"
	rm -rf "$user"
	# pack refuses a folder that the device tool would not send, or would
	# send with every call.
	local d want msg
	for d in "/tmp/gpu-check-outside:is outside the repository" "docs/gpu-check:is not ignored by git"; do
		want=${d#*:}
		msg=$(bash "$script" pack "${d%%:*}" 2>&1) && die "smoke: pack ${d%%:*} did not refuse"
		[[ $msg == *"$want"* ]] || die "smoke: pack ${d%%:*} refused with \"$msg\", not saying it $want"
	done
	pack "$dir" >"$out/pack.txt"
	local b f
	for b in "${bins[@]}"; do
		grep -Eq "^$b +[0-9]+ +[0-9][0-9.]* +([0-9][0-9.]*|-) " "$dir/build.txt" ||
			die "smoke: build.txt gives no GLIBC/GLIBCXX needs for $b"
	done
	(($(stat -c %s "$dir/gpu-check.tgz") <= limit_mib * 1048576)) || die "smoke: the pack is over $limit_mib MiB"

	ORTHONET_CUDA_STANDIN=1 run "$dir" "$out/run" small >/dev/null || die "smoke: run on the host model failed: see $out/run/report.txt"
	local rep=$out/run/report.txt i
	for i in "${!stages[@]}"; do
		grep -q "^== stage $i ${stages[$i]} (limit" "$rep" || die "smoke: report.txt lacks stage $i ${stages[$i]}"
	done
	[[ $(grep -c '^exit 0 after' "$rep") == "${#stages[@]}" ]] || die "smoke: not every stage exited 0: see $rep"
	(($(find "$out/run" -type f | wc -l) <= 8)) || die "smoke: over 8 files in $out/run"
	local logs
	logs=$(tar -tzf "$out/run/logs.tgz")
	for i in "${!stages[@]}"; do
		grep -qx "logs/$i-${stages[$i]}.log" <<<"$logs" || die "smoke: logs.tgz lacks logs/$i-${stages[$i]}.log"
	done
	mkdir -p "$out/run.logs"
	tar -xzf "$out/run/logs.tgz" -C "$out/run.logs" logs
	if ! grep -q '^--- PASS' "$out/run.logs/logs/3-cuda-tests.log" ||
		! grep -q '^--- PASS: TestModelsAgreeOnDevice' "$out/run.logs/logs/4-device-tests.log" ||
		! grep -q '^--- PASS: TestDeviceAgrees' "$out/run.logs/logs/4-device-tests.log"; then
		die "smoke: a test stage passed no test"
	fi
	grep -q 'train: device cuda on the host model' "$out/run.logs/logs/2-train.log" || die "smoke: train did not say it ran on the host model"
	for f in ffn-rsdm ffn-rgd vit-rsdm vit-rgd; do
		grep -Eq "^$f +[0-9.]+ samples/s" "$out/run.logs/logs/throughput.txt" || die "smoke: no figure for $f"
	done
	[[ $(grep -c '^--- kernel profile' "$out/run.logs/logs/5-throughput.log") == 2 ]] || die "smoke: a kernel profile is missing"

	# A stage that hangs is cut at its limit, the later ones are not run.
	local t0=$SECONDS
	ORTHONET_CUDA_STANDIN=1 ORTHONET_GPU_CHECK_HANG=ldd run "$dir" "$out/hang" small >/dev/null && die "smoke: a run with a hung stage passed"
	rep=$out/hang/report.txt
	grep -q '^exit 0 after' <(sed -n '/^== stage 0 machine/,/^== stage 1/p' "$rep") || die "smoke: stage 0 did not run before the hang"
	grep -q "^exit 124 after 1[0-4] s: cut at its limit of ${limits[1]} s" "$rep" || die "smoke: the hung stage was not cut at its limit: see $rep"
	for i in 2 3 4 5 6; do
		grep -q "^== stage $i ${stages[$i]}: not run (stage 1 ldd failed) ==" "$rep" || die "smoke: stage $i is not reported as not run"
	done
	grep -qx 'logs/1-ldd.log' <(tar -tzf "$out/hang/logs.tgz") || die "smoke: the hung stage's log is not in logs.tgz"
	echo "gpu_check: smoke passed: pack $(sed -n 's/^archive: .*(\([0-9.]*\) MiB.*/\1/p' "$dir/build.txt") MiB, every stage on the host model exit 0," \
		"a hung stage cut at ${limits[1]} s ($((SECONDS - t0)) s for that run), no file of the user's replaced"
}

case ${1:-} in
pack) pack "${2:-}" ;;
run)
	[[ $# -ge 3 ]] || die "usage: run DIR OUT"
	run "$2" "$3" "${4:-}"
	;;
stage) stage "$2" ;;
smoke) smoke "${2:-}" ;;
*)
	sed -n '2,35p' "$script" >&2
	exit 2
	;;
esac
