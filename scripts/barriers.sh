#!/usr/bin/env bash
# Shows that every barrier (__syncthreads) of internal/cudak/kernels.cu, and
# every wait of the host for the stream in backend/cuda/driver.c
# (cuStreamSynchronize, cuEventSynchronize), is needed by some test: for
# each in turn, a copy of the repository without it runs the kernel suites
# on the host model of the GPU (internal/cudak/..., backend/cuda,
# -failfast), which must fail. The host model runs a block's threads in
# several orders (forward, reversed, seeded random: internal/cudak/standin),
# so a missing barrier shows as a wrong result, and runs the stream only
# when the host waits, so a missing wait shows as a result read before it
# was written. Prints each barrier's and wait's line with the first test
# that failed, and exits 1 if removing one passes every test.
#
#   bash scripts/barriers.sh [LINE...]   (default: every barrier and wait;
#                                         lines given: those barriers only;
#                                         make barriers)
#   bash scripts/barriers.sh waits       (the waits only)
#
# It writes only under a temporary folder of its own, removed at exit; the
# copy is of the files git tracks, as they are in the working tree. Each
# barrier takes a build and up to a few minutes of tests on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
src=internal/cudak/kernels.cu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

lines=("$@")
waits=()
if ((${#lines[@]} == 0)) || [[ $* == waits ]]; then
	mapfile -t waits < <(grep -n 'return A->cu\(Stream\|Event\)Synchronize(' backend/cuda/driver.c | cut -d: -f1)
fi
if [[ $* == waits ]]; then
	lines=()
elif ((${#lines[@]} == 0)); then
	# Barriers in code, not in comments or the macro that names them.
	mapfile -t lines < <(grep -n '__syncthreads();' "$src" | grep -v '^[0-9]*:[[:space:]]*//' | cut -d: -f1)
fi
echo "barriers: ${#lines[@]} in $src (lines ${lines[*]})"

copy=$tmp/repo
mkdir -p "$copy"
git ls-files -z | (cd "$root" && xargs -0 cp --parents -t "$copy")

# verdict WHAT FILE LINE LOG PKG... runs the tests of PKG... in the copy,
# whose FILE lacks the barrier or wait at LINE, logging to LOG, and says
# whether WHAT is needed: some test fails without it. It counts the
# unneeded.
verdict() {
	local what=$1 file=$2 l=$3 log=$4 failed
	shift 4
	if (cd "$copy" && go test -count=1 -failfast "$@" >"$log" 2>&1); then
		echo "$what: NOT NEEDED: every test passes without it ($(sed -n "${l}p" "$file" | sed 's/^[[:space:]]*//'))"
		unneeded=$((unneeded + 1))
	else
		# The first failing test, else what ended the run (a panic, the
		# model's abort on a barrier, a timeout).
		failed=$(grep -m1 -oE -- '--- FAIL: [^ ]+' "$log" ||
			grep -m1 -E 'panic:|fatal error|signal:|orthonet host model|test timed out|FAIL' "$log" || echo "(no failure line in the log)")
		echo "$what: needed: $failed"
	fi
}

unneeded=0
for l in "${lines[@]}"; do
	if ! sed -n "${l}p" "$src" | grep -q '__syncthreads();'; then
		echo "line $l: no barrier there" >&2
		exit 2
	fi
	sed "${l}s/__syncthreads();/\/* barrier removed *\//" "$src" >"$copy/$src"
	# The model includes kernels.cu from a file of its own package: touch
	# that file so that the build cache compiles the changed kernels.
	{ cat "$root/internal/cudak/standin/model_launch.cc"; echo "// without the barrier at kernels.cu:$l"; } \
		>"$copy/internal/cudak/standin/model_launch.cc"
	verdict "line $l" "$src" "$l" "$tmp/line-$l.log" ./internal/cudak/... ./backend/cuda
done
cp "$root/$src" "$copy/$src"
cp "$root/internal/cudak/standin/model_launch.cc" "$copy/internal/cudak/standin/model_launch.cc"

# The host's waits for the stream: each made to return at once.
drv=backend/cuda/driver.c
for l in "${waits[@]}"; do
	sed "${l}s/return A->cu\(Stream\|Event\)Synchronize([a-z]*);/return 0; \/* wait removed *\//" "$drv" >"$copy/$drv"
	if ! grep -q 'wait removed' "$copy/$drv"; then
		echo "$drv:$l: no wait there" >&2
		exit 2
	fi
	verdict "$drv:$l" "$drv" "$l" "$tmp/wait-$l.log" ./backend/cuda
	cp "$root/$drv" "$copy/$drv"
done
total=$((${#lines[@]} + ${#waits[@]}))
if ((unneeded > 0)); then
	echo "barriers: $unneeded of $total barriers and waits needed by no test" >&2
	exit 1
fi
echo "barriers: each of the ${#lines[@]} barriers and ${#waits[@]} waits is needed by some test"
