#!/usr/bin/env bash
# The host model of the GPU (internal/cudak/standin, C++) and the CUDA
# backend's C side (backend/cuda), under sanitizers:
#
#   bash scripts/sanitize.sh          both halves
#   bash scripts/sanitize.sh asan     AddressSanitizer + UBSan only
#   bash scripts/sanitize.sh tsan     ThreadSanitizer only
#
# go test -asan instruments Go and C but not C++, so the C and C++ flags are
# set here explicitly; UBSan stops at the first report. The ThreadSanitizer
# half builds the C and C++ code with -fsanitize=thread and links libtsan
# (Go's own race detector is a second TSan runtime and cannot share the
# process): it watches the model's stream thread against the calling thread,
# and the fibers of KERNEL_SYNC blocks are annotated for it. Each half builds
# the test binaries once, in a temporary folder, and runs the host model's
# suites: the model's own tests, the backend's, every kernel against the CPU
# in one thread order with small grids, and the program and optimizer suites
# that run through the backend.
set -euo pipefail
cd "$(dirname "$0")/.."

halves=("$@")
[ ${#halves[@]} -gt 0 ] || halves=(asan tsan)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/orthonet-sanitize.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=1 ORTHONET_CUDA_STANDIN=1 ORTHONET_REQUIRE_NVRTC=1
times=()

# build HALF PKG...: test binaries into $tmp/HALF.
build() {
	local half=$1
	shift
	mkdir -p "$tmp/$half"
	for p in "$@"; do
		echo "== $half: building $p"
		go test -c "${gotags[@]}" -o "$tmp/$half/$(basename "$p").test" "./$p"
	done
}

# check HALF PKG RUN: runs one test binary; any sanitizer report fails it.
check() {
	local half=$1 pkg=$2 run=$3 log
	log="$tmp/$half/$(basename "$pkg").log"
	echo "== $half: $pkg -run '$run'"
	local start=$SECONDS
	if ! (cd "$pkg" && "$tmp/$half/$(basename "$pkg").test" -test.count=1 -test.v -test.run "$run") >"$log" 2>&1; then
		tail -60 "$log" >&2
		echo "sanitize: $half: $pkg failed (log above)" >&2
		exit 1
	fi
	if grep -qE '^(==[0-9]+==ERROR|WARNING: ThreadSanitizer|SUMMARY: (Address|Undefined|Thread)Sanitizer)|runtime error:' "$log"; then
		grep -E -A30 '^(==[0-9]+==ERROR|WARNING: ThreadSanitizer)|runtime error:' "$log" | head -80 >&2
		echo "sanitize: $half: $pkg: a sanitizer reported (above)" >&2
		exit 1
	fi
	if grep -q 'no tests to run' "$log" || ! grep -q -- '--- PASS' "$log"; then
		echo "sanitize: $half: $pkg -run '$run' ran no test" >&2
		exit 1
	fi
	grep -E '^(--- |PASS|ok)' "$log" | sed 's/^/   /'
	echo "   ok ($((SECONDS - start))s)"
}

pkgs=(internal/cudak/standin backend/cuda program optim/device)
startup='^(TestStartupFailures|TestStartupFailuresWithoutTheFixes|TestMissingPieces|TestSearchPath|TestKernelCache|TestStagingRing|TestCopyOutWaits|TestRowFault|TestQFFault|TestProfile|TestCloseReportsFault|TestBadInput)$'

for half in "${halves[@]}"; do
	start=$SECONDS
	case $half in
	asan)
		flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1"
		export CGO_CFLAGS="$flags" CGO_CXXFLAGS="$flags" CGO_LDFLAGS="-fsanitize=address,undefined"
		export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
		gotags=(-asan)
		build asan "${pkgs[@]}"
		check asan internal/cudak/standin '.'
		check asan backend/cuda "$startup"
		check asan backend/cuda '^TestKernelsCompileWithNVRTC$'
		check asan backend/cuda '^TestKernelsAgreeWithCPU$/^order=0,maxgrid=2$'
		check asan program '^(TestLowerings|TestModelsAgreeOnDevice)$'
		check asan optim/device '^TestDevice'
		;;
	tsan)
		flags="-fsanitize=thread -g -O1"
		export CGO_CFLAGS="$flags" CGO_CXXFLAGS="$flags" CGO_LDFLAGS="-fsanitize=thread"
		export TSAN_OPTIONS="halt_on_error=1:report_signal_unsafe=0"
		gotags=()
		build tsan "${pkgs[@]}"
		check tsan internal/cudak/standin '.'
		check tsan backend/cuda "$startup"
		check tsan backend/cuda '^TestKernelsAgreeWithCPU$/^order=0,maxgrid=2$'
		check tsan program '^TestModelsAgreeOnDevice$/^(ffn|custom)$'
		check tsan program '^TestModelsAgreeOnDevice$/^vit$/^float32$/^rsdm-blocks$'
		check tsan optim/device '^TestDevice'
		;;
	*)
		echo "sanitize: unknown half $half (want asan or tsan)" >&2
		exit 2
		;;
	esac
	times+=("$half: $((SECONDS - start))s, building and running")
	unset CGO_CFLAGS CGO_CXXFLAGS CGO_LDFLAGS
done

echo "== time taken:"
printf '   %s\n' "${times[@]}"
echo "sanitize: ok"
