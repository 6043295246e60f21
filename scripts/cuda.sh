#!/usr/bin/env bash
# orthonet's CUDA build (make cuda, make cuda-legacy, make cuda-test, make cuda-pack).
#
#   scripts/cuda.sh build         finds the CUDA headers and libraries (driver, cuBLAS, cuSOLVER,
#                                 NVRTC), vendors the modules into build/cuda/src and builds the CUDA
#                                 backend (tag gpu) into build/cuda/bin/{train,train-cpu,bench,*.test}
#   scripts/cuda.sh build-legacy  the same plus Gorgonia's CUDA machine (tags gpu cuda): also needs
#                                 nvcc and cuDNN 9; patches gorgonia.org/cu for the headers found
#                                 (internal/tools/cupatch) and compiles Gorgonia's kernels to PTX
#                                 (internal/tools/ptxgen)
#   scripts/cuda.sh test          runs the cuda tests on the GPU (the legacy ones where built)
#   scripts/cuda.sh pack          writes .cuda/{go,vendor}.tar.xz: what build needs on a GPU machine
#                                 that has no Go and no network (build finds them there)
#
# Where things are found: CUDA_HOME (else nvcc's folder, /usr/local/cuda, /usr/local/cuda-1[23]*,
# /opt/cuda, /usr), for the legacy build CUDNN_HOME (else the system paths, CUDA_HOME, then PyTorch's
# nvidia-cudnn wheel) and CUDA_ARCH (else nvidia-smi's compute capability, else 75).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=${CUDA_BUILD:-$root/build/cuda}
PACK=$root/.cuda
die() { echo "cuda: $*" >&2; exit 1; }
say() { echo "cuda: $*"; }

go_env() {
  if ! command -v go >/dev/null && [ -f "$PACK/go.tar.xz" ]; then
    [ -x "$B/go/bin/go" ] || { mkdir -p "$B" && tar -C "$B" -xJf "$PACK/go.tar.xz"; }
    export GOROOT=$B/go PATH=$B/go/bin:$PATH GOTOOLCHAIN=local GOCACHE=${GOCACHE:-$B/gocache}
    say "Go from $PACK/go.tar.xz: $(go version)"
  fi
  command -v go >/dev/null || die "no Go toolchain (install Go, or make cuda-pack on a machine with one and copy .cuda/ here)"
  export GOFLAGS=-mod=vendor CGO_ENABLED=1
}

# first file among the arguments (globs allowed) that exists
first() { for f in "$@"; do [ -e "$f" ] && { echo "$f"; return 0; }; done; return 1; }

pydir() { # folder of a Python namespace package, e.g. nvidia.cudnn
  local py
  for py in python3 /usr/bin/python3; do
    command -v "$py" >/dev/null || continue
    "$py" -c "import $1, os; print(list($1.__path__)[0])" 2>/dev/null && return 0
  done
  return 1
}

# linkdir NAME DIR...: makes $B/lib/libNAME.so point at the first libNAME.so[.N] in DIRs and
# prints the folder it is in (for the rpath)
linkdir() {
  local name=$1 d f; shift
  for d in "$@"; do
    f=$(first "$d/lib$name.so" $(ls -1 "$d"/lib"$name".so.* 2>/dev/null | sort -V | tail -1)) || continue
    mkdir -p "$B/lib"
    ln -sf "$(readlink -f "$f")" "$B/lib/lib$name.so"
    echo "$d"
    return 0
  done
  return 1
}

# find_cuda [legacy] finds the CUDA headers and libraries the build links: the driver, cuBLAS,
# cuSOLVER and NVRTC; with legacy also nvcc and cuDNN, for Gorgonia's CUDA machine.
find_cuda() {
  local legacy=${1:-}
  if [ -z "${CUDA_HOME:-}" ]; then
    if command -v nvcc >/dev/null; then
      CUDA_HOME=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
    else
      CUDA_HOME=$(first /usr/local/cuda /usr/local/cuda-13* /usr/local/cuda-12* /opt/cuda) ||
        { [ -e /usr/include/cuda.h ] && CUDA_HOME=/usr; } ||
        die "no CUDA toolkit: install CUDA 12 or 13, or set CUDA_HOME to the folder with include/cuda.h"
    fi
  fi
  CUDA_INC=$(dirname "$(first "$CUDA_HOME/include/cuda.h" "$CUDA_HOME"/targets/*/include/cuda.h)") || die "no cuda.h under $CUDA_HOME (set CUDA_HOME)"
  local h inc
  for h in cublas_v2.h cusolverDn.h nvrtc.h; do
    inc=$(dirname "$(first "$CUDA_INC/$h" "$CUDA_HOME"/targets/*/include/$h "$(pydir nvidia.cu13)/include/$h" \
      "$(pydir nvidia.cublas)/include/$h" "$(pydir nvidia.cusolver)/include/$h" "$(pydir nvidia.cuda_nvrtc)/include/$h")") ||
      die "no $h in $CUDA_INC (CUDA toolkit headers) or PyTorch's nvidia wheels"
    [ "$inc" = "$CUDA_INC" ] || CUDA_INC="$CUDA_INC -I$inc"
  done
  local lib_dirs=("$CUDA_HOME/lib64" "$CUDA_HOME"/targets/*/lib /usr/lib/x86_64-linux-gnu)
  rm -rf "$B/lib"
  CUBLAS_LIB=$(linkdir cublas "${lib_dirs[@]}") || die "no libcublas.so in $CUDA_HOME/lib64"
  NVRTC_LIB=$(linkdir nvrtc "${lib_dirs[@]}") || die "no libnvrtc.so (NVRTC, which compiles orthonet's kernels) in $CUDA_HOME/lib64"
  CUSOLVER_LIB=$(linkdir cusolver "${lib_dirs[@]}") || die "no libcusolver.so (cuSOLVER, for the Cholesky of large Q factors) in $CUDA_HOME/lib64"
  # libcuda comes with the driver; the toolkit's stub is enough to link without one.
  CUDA_LIB=$(linkdir cuda /usr/lib/x86_64-linux-gnu /usr/local/nvidia/lib64 /usr/lib64 "$CUDA_HOME/lib64/stubs" "$CUDA_HOME"/targets/*/lib/stubs) || die "no libcuda.so (driver) or its stub under $CUDA_HOME"
  export CGO_CFLAGS="-I$CUDA_INC"
  export CGO_LDFLAGS="-L$B/lib -Wl,-rpath,$CUBLAS_LIB -Wl,-rpath,$NVRTC_LIB -Wl,-rpath,$CUSOLVER_LIB"
  say "CUDA $CUDA_HOME: headers $CUDA_INC; cuBLAS $CUBLAS_LIB, NVRTC $NVRTC_LIB, cuSOLVER $CUSOLVER_LIB, libcuda from $CUDA_LIB"
  [ "$legacy" = legacy ] || return 0
  NVCC=$(first "$CUDA_HOME/bin/nvcc") || die "no nvcc in $CUDA_HOME/bin (set CUDA_HOME): the legacy build compiles Gorgonia's kernels with it"
  local wheel
  if [ -n "${CUDNN_HOME:-}" ]; then
    CUDNN_INC=$(dirname "$(first "$CUDNN_HOME/include/cudnn.h" "$CUDNN_HOME/cudnn.h")") || die "no cudnn.h in CUDNN_HOME=$CUDNN_HOME"
  else
    wheel=$(pydir nvidia.cudnn || true)
    CUDNN_INC=$(dirname "$(first /usr/include/cudnn.h /usr/include/x86_64-linux-gnu/cudnn.h "$CUDA_HOME/include/cudnn.h" "$wheel/include/cudnn.h")") || die "no cudnn.h: install cuDNN 9 (or pip install nvidia-cudnn-cu12/cu13) or set CUDNN_HOME"
  fi
  local cudnn_lib_dirs=("${CUDNN_HOME:-/nonexistent}/lib" "${CUDNN_HOME:-/nonexistent}/lib64" "$(dirname "$CUDNN_INC")/lib" /usr/lib/x86_64-linux-gnu "$CUDA_HOME/lib64")
  CUDNN_LIB=$(linkdir cudnn "${cudnn_lib_dirs[@]}") || die "no libcudnn.so next to $CUDNN_INC"
  CGO_CFLAGS="$CGO_CFLAGS -I$CUDNN_INC"
  CGO_LDFLAGS="$CGO_LDFLAGS -Wl,-rpath,$CUDNN_LIB"
  say "legacy: nvcc $NVCC ($("$NVCC" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')), cuDNN headers $CUDNN_INC, libs $CUDNN_LIB"
}

arch() {
  if [ -n "${CUDA_ARCH:-}" ]; then echo "$CUDA_ARCH"; return; fi
  local cc
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .' || true)
  if [ -n "$cc" ]; then echo "$cc"; else echo 75; fi
}

sources() {
  rm -rf "$B/src" && mkdir -p "$B/src"
  if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then # tracked and untracked, not ignored
    (cd "$root" && git ls-files -z -co --exclude-standard | xargs -0 tar --ignore-failed-read -cf -) | tar -C "$B/src" -xf -
  else
    (cd "$root" && tar --exclude=./build --exclude=./.git --exclude=./.cuda --exclude=./checkpoints \
      --exclude=./out --exclude=./bin --exclude='*.test' -cf - .) | tar -C "$B/src" -xf -
  fi
  if [ -f "$PACK/vendor.tar.xz" ]; then
    [ "$(cat "$PACK/vendor.sum" 2>/dev/null)" = "$(modsum)" ] ||
      die "$PACK/vendor.tar.xz was packed for another go.mod/go.sum: run make cuda-pack again (or delete $PACK to vendor from the network)"
    tar -C "$B/src" -xJf "$PACK/vendor.tar.xz"
    say "modules from $PACK/vendor.tar.xz"
  else
    (cd "$B/src" && GOFLAGS=-mod=mod go mod vendor) || die "go mod vendor failed (no network? run make cuda-pack where there is one)"
    kernels_from_cache "$B/src/kernels"
  fi
}

# modsum identifies the module requirements a vendor pack was made for.
modsum() { cat "$root/go.mod" "$root/go.sum" | sha256sum | cut -d' ' -f1; }

kernels_from_cache() {
  local dir
  dir=$(cd "$root" && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' gorgonia.org/gorgonia) || die "cannot find gorgonia.org/gorgonia's sources"
  mkdir -p "$1" && cp "$dir/cuda modules/src/"*.cu "$1/"
}

# blas_tag prints openblas where OpenBLAS is installed (the host-side work uses it).
blas_tag() {
  if printf '#include <cblas.h>\nint main(void){return 0;}\n' | gcc -x c - -lopenblas -o /dev/null >/dev/null 2>&1; then echo openblas; fi
}

# build: the CUDA backend (build tag gpu). No cuDNN, no nvcc: the kernels are compiled by NVRTC at
# run time, and gorgonia.org/cu's root package (which would need cupatch) is not in the build.
build() {
  go_env
  find_cuda
  sources
  cd "$B/src"
  local blas
  blas=$(blas_tag)
  mkdir -p "$B/bin"
  go build -tags "gpu $blas" -o "$B/bin/train" ./cmd/train
  go build -tags "$blas" -o "$B/bin/train-cpu" ./cmd/train
  go build -tags "gpu $blas" -o "$B/bin/bench" ./cmd/bench
  go test -c -tags "gpu $blas" -o "$B/bin/cudabackend.test" ./backend/cuda
  go test -c -tags "gpu $blas" -o "$B/bin/program.test" ./program
  go test -c -tags "gpu $blas" -o "$B/bin/optim.test" ./optim
  go test -c -tags "gpu $blas" -o "$B/bin/train.test" ./cmd/train
  say "built $B/bin: $(ls "$B/bin" | tr '\n' ' ')(host BLAS: ${blas:-pure-Go gonum})"
}

# build_legacy: build, plus Gorgonia's CUDA machine (build tags gpu and cuda) for -engine tape on the
# GPU and the tests of that path: needs nvcc and cuDNN 9, and patches the vendored gorgonia.org/cu.
build_legacy() {
  go_env
  find_cuda legacy
  sources
  [ -d "$B/src/kernels" ] || die "no Gorgonia kernel sources in $B/src/kernels"
  cd "$B/src"
  go run ./internal/tools/cupatch -dir vendor/gorgonia.org/cu $(for i in $CGO_CFLAGS; do printf -- '-I %s ' "${i#-I}"; done)
  go run ./internal/tools/ptxgen -nvcc "$NVCC" -src kernels -arch "$(arch)" -pkg gpu -o internal/gpu/kernels_gen.go
  local blas
  blas=$(blas_tag)
  mkdir -p "$B/bin"
  go build -tags "gpu cuda $blas" -o "$B/bin/train" ./cmd/train
  go build -tags "$blas" -o "$B/bin/train-cpu" ./cmd/train
  go test -c -tags "gpu cuda $blas" -o "$B/bin/models.test" ./models
  go test -c -tags "$blas" -o "$B/bin/models-cpu.test" ./models
  go test -c -tags "gpu cuda $blas" -o "$B/bin/nn.test" ./nn
  say "built the legacy binaries in $B/bin: $(ls "$B/bin" | tr '\n' ' ')"
}

run_tests() {
  [ -x "$B/bin/cudabackend.test" ] || die "nothing built: run make cuda first"
  nvidia-smi -L >/dev/null 2>&1 || die "no GPU here (nvidia-smi -L failed): the cuda tests need one"
  say "the CUDA backend: every kernel against the CPU backend, memory, faults"
  (cd "$B/src/backend/cuda" && ORTHONET_REQUIRE_GPU=1 "$B/bin/cudabackend.test" -test.v -test.timeout 300s)
  say "the optimizers on the GPU against the host's, and the models against the CPU program"
  (cd "$B/src/optim" && ORTHONET_REQUIRE_GPU=1 "$B/bin/optim.test" -test.run 'OnGPU' -test.v -test.timeout 300s)
  (cd "$B/src/program" && ORTHONET_REQUIRE_GPU=1 "$B/bin/program.test" -test.run 'OnGPU' -test.v -test.timeout 300s)
  if [ -x "$B/bin/models.test" ]; then
    say "legacy: reference numbers from the CPU build"
    ORTHONET_DEVICE_REF_OUT=$B/device-ref.safetensors "$B/bin/models-cpu.test" -test.run 'TestDeviceAgreement$' -test.v
    say "legacy: Gorgonia's CUDA machine against them"
    (cd "$B/src/models" && ORTHONET_DEVICE_REF=$B/device-ref.safetensors "$B/bin/models.test" -test.run 'TestDeviceAgreement$' -test.v)
    say "legacy: each layer's GPU gradient against finite differences on the GPU"
    (cd "$B/src/nn" && "$B/bin/nn.test" -test.v -test.timeout 300s)
  fi
  # One process per training test: each starts the device afresh.
  local t
  for t in TestGPUMemoryFlat TestTrainLearns TestViTLearns TestKillResumeGPU TestGPUCheckpointInPython; do
    say "cmd/train $t on the GPU"
    (cd "$B/src/cmd/train" && ORTHONET_REQUIRE_GPU=1 "$B/bin/train.test" -test.run "^$t\$" -test.v -test.timeout 300s)
  done
}

pack() {
  command -v go >/dev/null || die "pack needs Go"
  mkdir -p "$PACK"
  local stage
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' RETURN
  (cd "$root" && GOFLAGS=-mod=mod go mod vendor -o "$stage/vendor")
  kernels_from_cache "$stage/kernels"
  tar -C "$stage" -cJf "$PACK/vendor.tar.xz" vendor kernels
  modsum > "$PACK/vendor.sum"
  # A Go toolchain that builds a vendored module: the go command, the compiler tools and the standard
  # library's sources.
  local groot arch
  groot=$(go env GOROOT) arch=$(go env GOOS)_$(go env GOARCH)
  mkdir -p "$stage/go/bin" "$stage/go/pkg/tool/$arch"
  cp "$groot/bin/go" "$groot/VERSION" "$stage/go/" 2>/dev/null || true
  mv "$stage/go/go" "$stage/go/bin/go"
  [ -f "$groot/go.env" ] && cp "$groot/go.env" "$stage/go/"
  cp -r "$groot/pkg/include" "$stage/go/pkg/"
  for t in asm cgo compile link vet buildid; do [ ! -f "$groot/pkg/tool/$arch/$t" ] || cp "$groot/pkg/tool/$arch/$t" "$stage/go/pkg/tool/$arch/"; done
  (cd "$groot" && find src -path src/cmd -prune -o -name testdata -prune -o -type f ! -name '*_test.go' -print0 |
    xargs -0 cp --parents -t "$stage/go")
  tar -C "$stage" -cJf "$PACK/go.tar.xz" go
  say "wrote $PACK/vendor.tar.xz ($(du -h "$PACK/vendor.tar.xz" | cut -f1)) and $PACK/go.tar.xz ($(du -h "$PACK/go.tar.xz" | cut -f1), $(go version))"
}

case "${1:-}" in
  build) build ;;
  build-legacy) build_legacy ;;
  test) run_tests ;;
  pack) pack ;;
  *) die "usage: scripts/cuda.sh build|build-legacy|test|pack" ;;
esac
