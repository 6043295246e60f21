# orthonet's build. `make test` and `make train` do all set-up on a fresh
# Debian machine with Go and gcc: they install OpenBLAS when it is missing.
# A plain `go build` / `go test` needs no C library at build time: it loads
# OpenBLAS at run time where installed, pure-Go gonum elsewhere (ORTHONET_BLAS
# chooses); TAGS=openblas links it at build time.

GO          ?= go
TAGS        ?= openblas
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
BIN         := $(CURDIR)/bin
OUT         ?= out

export CGO_ENABLED := 1

.PHONY: all deps test lint unit unit-purego bench-small train-short resume-cross-blas gpu-check-smoke randgraph barriers sanitize bench paper dnn-figure train clean

all: test

FASHION     := /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz

# deps installs, through apt-get as root (or says which command to run),
# what the build and the tests need when it is missing: Debian's OpenBLAS
# (headers and library), g++ (the host model of the GPU), Fashion-MNIST,
# NVRTC (libnvrtc11.2, in Debian's non-free component, which deps adds to
# apt's sources when they lack it, and says so), with which the tests compile
# every CUDA kernel for real GPUs, and Node.js with npm; then ONNX Runtime
# (npm's onnxruntime-node at the version scripts/onnxruntime pins) into
# $(ORT_DIR), in which the tests run exported ONNX models
# (scripts/onnxruntime/install.sh: npm ci in a new folder beside it, renamed
# into place once complete; it replaces only an earlier install of its own,
# and refuses a $(ORT_DIR) that holds anything else). Its postinstall would
# fetch CUDA binaries: ONNXRUNTIME_NODE_INSTALL=skip stops that (the CPU
# binaries ship in the package).
override ORT_DIR := build/onnxruntime

deps:
	@missing=""; \
	printf '#include <cblas.h>\nint main(void){return 0;}\n' | gcc -x c - -lopenblas -o /dev/null >/dev/null 2>&1 || missing="libopenblas-dev"; \
	command -v g++ >/dev/null || missing="$$missing g++"; \
	[ -e $(FASHION) ] || missing="$$missing dataset-fashion-mnist"; \
	/sbin/ldconfig -p | grep -q 'libnvrtc\.so\.' || missing="$$missing libnvrtc11.2"; \
	command -v mpirun >/dev/null && /sbin/ldconfig -p | grep -q 'libmpi\.so\.40 ' || missing="$$missing openmpi-bin libopenmpi-dev"; \
	command -v node >/dev/null && command -v npm >/dev/null || missing="$$missing nodejs npm"; \
	if [ -z "$$missing" ]; then \
		echo "deps: OpenBLAS, g++, Fashion-MNIST, NVRTC, MPI, Node.js and npm found"; \
	elif [ "$$(id -u)" = 0 ]; then \
		case "$$missing" in *libnvrtc11.2*) \
			if ! grep -rqsE '^(Components:|deb ).* non-free( |$$)' /etc/apt/sources.list /etc/apt/sources.list.d/; then \
				echo "deps: adding Debian's non-free component to apt's sources (for libnvrtc11.2, NVIDIA's NVRTC)"; \
				for f in /etc/apt/sources.list.d/*.sources; do [ -e "$$f" ] && sed -i -E '/^Components:/{/ non-free( |$$)/!s/$$/ non-free/}' "$$f"; done; \
				[ -e /etc/apt/sources.list ] && sed -i -E '/^deb /{/ non-free( |$$)/!s/$$/ non-free/}' /etc/apt/sources.list; \
			fi;; \
		esac; \
		echo "deps: installing$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	else \
		echo "deps: missing$$missing; run: sudo apt-get install$$missing (libnvrtc11.2 is in Debian's non-free component)" >&2; exit 1; \
	fi
	@bash scripts/onnxruntime/install.sh $(ORT_DIR)

$(BIN)/staticcheck:
	GOBIN=$(BIN) $(GO) install $(STATICCHECK)

# lint: gofmt, go vet and staticcheck on both builds (OpenBLAS and pure Go).
lint: deps $(BIN)/staticcheck
	@fmt="$$(gofmt -l .)"; if [ -n "$$fmt" ]; then echo "gofmt would change: $$fmt" >&2; exit 1; fi
	$(GO) vet -tags $(TAGS) ./...
	CGO_ENABLED=0 $(GO) vet ./...
	$(BIN)/staticcheck -tags $(TAGS) ./...
	CGO_ENABLED=0 $(BIN)/staticcheck ./...

# ORTHONET_REQUIRE_DATA, _NVRTC, _MPI and _ONNXRUNTIME turn the skips of the
# tests that need real data, NVRTC, mpirun and ONNX Runtime into failures. The CUDA backend's tests run on the
# host model of the GPU.
unit: deps
	ORTHONET_REQUIRE_DATA=1 ORTHONET_REQUIRE_NVRTC=1 ORTHONET_REQUIRE_MPI=1 ORTHONET_REQUIRE_ONNXRUNTIME=1 $(GO) test -count=1 -tags $(TAGS) ./...

# gpu-check-smoke runs scripts/gpu_check.sh (the checks for a GPU machine)
# on the host model of the GPU at small sizes, so the script is known to
# work: one pack (under 56 MiB, build.txt listing each binary's GLIBC and
# GLIBCXX needs), a run whose report.txt gives every stage's exit code and
# whose logs.tgz holds every stage's log, and a run with a stage made to hang,
# which must be cut at its limit with the later stages reported not run.
# Into $(OUT)/gpu-check, made in a new folder and renamed into place: a
# folder an earlier smoke made (marked) is replaced, any other refused.
gpu-check-smoke: deps
	bash scripts/gpu_check.sh smoke $(OUT)/gpu-check

# randgraph runs program's random-graph test on RANDGRAPH graphs (500 by
# default) from a seed of the clock, which it prints first, or of
# RANDGRAPH_SEED. make test's unit runs 200 graphs of a fixed seed.
RANDGRAPH   ?= 500
randgraph: deps
	@seed=$(RANDGRAPH_SEED); [ -n "$$seed" ] || seed=$$(date +%s%N); \
	echo "randgraph: $(RANDGRAPH) graphs of seed $$seed (rerun: make randgraph RANDGRAPH_SEED=$$seed)"; \
	ORTHONET_RANDGRAPH=$(RANDGRAPH) ORTHONET_RANDGRAPH_SEED=$$seed $(GO) test -count=1 -tags $(TAGS) -run '^TestRandomGraphs$$' ./program/

# barriers shows that every __syncthreads of internal/cudak/kernels.cu, and
# every wait of the host for the stream in backend/cuda/driver.c, is needed
# by some test on the host model of the GPU (scripts/barriers.sh: one build
# and test run per barrier or wait, tens of minutes; not part of make test).
barriers: deps
	bash scripts/barriers.sh

# sanitize runs the host model's suites under AddressSanitizer + UBSan and
# under ThreadSanitizer (not part of make test; see README "CUDA").
sanitize: deps
	bash scripts/sanitize.sh

# unit-purego proves the module builds and passes without any C library.
unit-purego:
	CGO_ENABLED=0 $(GO) test -count=1 -short ./...

# bench-small: the paper's problems at small sizes (seconds), each run into
# its own new folder $(OUT)/bench-small/run-YYYYMMDD-HHMMSS (cmd/bench writes
# it as a temporary folder beside and renames it once complete; it replaces
# and removes nothing, so earlier runs stay until you remove them).
bench-small: deps
	$(GO) run -tags $(TAGS) ./cmd/bench -size small -out $(OUT)/bench-small

# train-short: 400 RSDM-P steps of the orthogonal FFN on real Fashion-MNIST
# must reach 70% test accuracy (on the first 2000 test images), with the
# constant step sizes that did best over 400 steps (the defaults, a cosine
# schedule, are tuned for full epochs). Each run is a new run folder under
# $(OUT)/train-short (train never reuses one).
train-short: deps
	$(GO) run -tags $(TAGS) ./cmd/train -schedule const -lr 0.1 -lr-other 0.01 -limit-train 6400 -limit-test 2000 -min-accuracy 70 -out $(OUT)/train-short

# resume-cross-blas: the pure-Go build (gonum BLAS) goes on from the
# checkpoint that train-short's OpenBLAS build saved, for one more epoch (in
# that run's folder, as -resume does: new checkpoints, metrics.csv and .png).
resume-cross-blas: train-short
	CGO_ENABLED=0 $(GO) run ./cmd/train -resume latest -out $(OUT)/train-short -epochs 2 -min-accuracy 70

test: lint unit unit-purego bench-small train-short resume-cross-blas gpu-check-smoke

# bench: step benchmarks from go test, then the paper's problems at the
# paper's sizes (several minutes), into a new run folder under $(OUT)/bench
# (as bench-small).
bench: deps
	$(GO) test -tags $(TAGS) -run '^$$' -bench . -benchtime 20x ./optim
	$(GO) run -tags $(TAGS) ./cmd/bench -size paper -out $(OUT)/bench

# paper: the RSDM paper's experiments at the paper's sizes, with every
# baseline, into $(OUT)/paper/run-YYYYMMDD-HHMMSS/report.md, a new folder
# each run (plots, time-to-gap tables, and which of the paper's claims hold
# here); an earlier run's report stays. About an hour on 2 cores; PAPER_FLAGS
# passes options (-scale 0.5, -time-limit 60s, -only fig1).
PAPER_FLAGS ?=
paper: deps
	$(GO) run -tags $(TAGS) ./cmd/bench -paper -out $(OUT)/paper $(PAPER_FLAGS)

# dnn-figure: the paper's neural-network figure measured on this machine
# (issue 22): the FFN's step-size grid, then RSDM-P against RGD on the FFN
# (180 s of training, 5 seeds) and the ViT (400 s, 3 seeds), and the page
# docs/dnn-figure/README.md with its PNGs, tables and verdicts. TIME and
# SEEDS override both models' training time and seeds (TIME=60s SEEDS="1 2
# 3"); VIT_TEST the ViT's test images per evaluation (default 2000, 0 for
# all 10,000: minutes an evaluation on a CPU, cheap on a GPU); the runs go to
# $(OUT)/dnn-figure, and a run finished before with the same command is
# kept. Every run is timed: run it on a quiet machine (see
# scripts/dnn_figure.sh for the load checks and how long it takes). Not part
# of make test.
dnn-figure: deps
	TIME='$(TIME)' SEEDS='$(SEEDS)' bash scripts/dnn_figure.sh grid $(OUT)/dnn-figure
	TIME='$(TIME)' SEEDS='$(SEEDS)' bash scripts/dnn_figure.sh ffn $(OUT)/dnn-figure
	TIME='$(TIME)' SEEDS='$(SEEDS)' VIT_TEST='$(VIT_TEST)' bash scripts/dnn_figure.sh vit $(OUT)/dnn-figure
	bash scripts/dnn_figure.sh page $(OUT)/dnn-figure docs/dnn-figure

# train: the orthogonal FFN (5 Stiefel layers of 1024) with RSDM-P on
# Fashion-MNIST for one epoch, offline; prints test accuracy and feasibility.
train: deps
	$(GO) run -tags $(TAGS) ./cmd/train

# clean removes what the build made, and nothing else: bin/staticcheck
# (lint's), $(ORT_DIR) (deps'), and gpu_check.sh's packs build/gpu-smoke
# (gpu-check-smoke's) and build/gpu (pack's default), each only where it
# holds those files alone (else it says what it left), then bin/ and build/
# where empty. It leaves $(OUT) as it is: out/ holds the results of runs
# (bench-small, bench and paper's run folders, train-short's checkpoints,
# gpu-check, dnn-figure's runs of hours), which only you can tell are no
# longer needed; remove them by hand.
clean:
	@rm -f bin/staticcheck; rmdir bin 2>/dev/null || true
	@bash scripts/onnxruntime/install.sh remove $(ORT_DIR)
	@for d in build/gpu-smoke build/gpu; do \
		[ -d "$$d" ] || continue; \
		other=$$(ls -A "$$d" | grep -vxE 'gpu-check\.tgz|build\.txt' | head -1); \
		if [ -n "$$other" ]; then echo "clean: $$d holds $$other, not gpu_check.sh pack's: left as it is" >&2; continue; fi; \
		rm -f "$$d/gpu-check.tgz" "$$d/build.txt" && rmdir "$$d" && echo "clean: removed $$d (gpu_check.sh's pack)"; \
	done
	@rmdir build 2>/dev/null || true
	@echo "clean: $(OUT) left as it is: it holds the results of runs (bench, paper, train-short, gpu-check, dnn-figure); remove by hand what you no longer need"
