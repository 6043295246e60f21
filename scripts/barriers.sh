#!/usr/bin/env bash
# Shows that every barrier (__syncthreads) of internal/cudak/kernels.cu is
# needed by some test: for each in turn, a copy of the repository without
# that barrier runs the kernel suites on the host model of the GPU
# (internal/cudak/..., backend/cuda, -failfast), which must fail. The host
# model runs a block's threads in several orders (forward, reversed, seeded
# random: internal/cudak/standin), so a missing barrier shows as a wrong
# result. Prints each barrier's line with the first test that failed, and
# exits 1 if removing one passes every test.
#
#   bash scripts/barriers.sh [LINE...]   (default: every barrier; make barriers)
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
if ((${#lines[@]} == 0)); then
	# Barriers in code, not in comments or the macro that names them.
	mapfile -t lines < <(grep -n '__syncthreads();' "$src" | grep -v '^[0-9]*:[[:space:]]*//' | cut -d: -f1)
fi
echo "barriers: ${#lines[@]} in $src (lines ${lines[*]})"

copy=$tmp/repo
mkdir -p "$copy"
git ls-files -z | (cd "$root" && xargs -0 cp --parents -t "$copy")

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
	log=$tmp/line-$l.log
	if (cd "$copy" && go test -count=1 -failfast ./internal/cudak/... ./backend/cuda >"$log" 2>&1); then
		echo "line $l: NOT NEEDED: every test passes without it ($(sed -n "${l}p" "$src" | sed 's/^[[:space:]]*//'))"
		unneeded=$((unneeded + 1))
	else
		# The first failing test, else what ended the run (a panic, the
		# model's abort on a barrier, a timeout).
		failed=$(grep -m1 -oE -- '--- FAIL: [^ ]+' "$log" ||
			grep -m1 -E 'panic:|fatal error|signal:|orthonet host model|test timed out|FAIL' "$log" || echo "(no failure line in the log)")
		echo "line $l: needed: $failed"
	fi
done
cp "$root/$src" "$copy/$src"
if ((unneeded > 0)); then
	echo "barriers: $unneeded of ${#lines[@]} needed by no test" >&2
	exit 1
fi
echo "barriers: each of the ${#lines[@]} is needed by some test"
