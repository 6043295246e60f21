# orthonet's build. `make test` and `make train` do all set-up on a fresh
# Debian machine with Go and gcc: they install OpenBLAS when it is missing.
# A plain `go build` / `go test` needs no C library and uses pure-Go gonum.

GO          ?= go
TAGS        ?= openblas
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
BIN         := $(CURDIR)/bin
OUT         ?= out

export CGO_ENABLED := 1

.PHONY: all deps test lint unit unit-purego bench-small train-short resume-cross-blas bench paper train clean

all: test

FASHION     := /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz

# deps installs Debian's OpenBLAS (headers and library) when the C compiler
# cannot find it, g++ (for the CUDA kernels' host emulator) and Debian's
# Fashion-MNIST when they are missing, through apt-get as root, or says which
# command to run.
deps:
	@missing=""; \
	printf '#include <cblas.h>\nint main(void){return 0;}\n' | gcc -x c - -lopenblas -o /dev/null >/dev/null 2>&1 || missing="libopenblas-dev"; \
	command -v g++ >/dev/null || missing="$$missing g++"; \
	[ -e $(FASHION) ] || missing="$$missing dataset-fashion-mnist"; \
	if [ -z "$$missing" ]; then \
		echo "deps: OpenBLAS, g++ and Fashion-MNIST found"; \
	elif [ "$$(id -u)" = 0 ]; then \
		echo "deps: installing$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	else \
		echo "deps: missing$$missing; run: sudo apt-get install$$missing" >&2; exit 1; \
	fi

$(BIN)/staticcheck:
	GOBIN=$(BIN) $(GO) install $(STATICCHECK)

# lint: gofmt, go vet and staticcheck on both builds (OpenBLAS and pure Go).
lint: deps $(BIN)/staticcheck
	@fmt="$$(gofmt -l .)"; if [ -n "$$fmt" ]; then echo "gofmt would change: $$fmt" >&2; exit 1; fi
	$(GO) vet -tags $(TAGS) ./...
	CGO_ENABLED=0 $(GO) vet ./...
	$(BIN)/staticcheck -tags $(TAGS) ./...
	CGO_ENABLED=0 $(BIN)/staticcheck ./...

# ORTHONET_REQUIRE_DATA turns the real-data tests' skip into a failure.
unit: deps
	ORTHONET_REQUIRE_DATA=1 $(GO) test -count=1 -tags $(TAGS) ./...

# unit-purego proves the module builds and passes without any C library.
unit-purego:
	CGO_ENABLED=0 $(GO) test -count=1 -short ./...

bench-small: deps
	$(GO) run -tags $(TAGS) ./cmd/bench -size small -out $(OUT)/bench-small

# train-short: 400 RSDM-P steps of the orthogonal FFN on real Fashion-MNIST
# must reach 70% test accuracy (on the first 2000 test images), with the
# constant step sizes that did best over 400 steps (the defaults, a cosine
# schedule, are tuned for full epochs).
train-short: deps
	$(GO) run -tags $(TAGS) ./cmd/train -schedule const -lr 0.1 -lr-other 0.01 -limit-train 6400 -limit-test 2000 -min-accuracy 70 -out $(OUT)/train-short

# resume-cross-blas: the pure-Go build (gonum BLAS) goes on from the
# checkpoint that train-short's OpenBLAS build saved, for one more epoch.
resume-cross-blas: train-short
	CGO_ENABLED=0 $(GO) run ./cmd/train -resume latest -out $(OUT)/train-short -epochs 2 -min-accuracy 70

test: lint unit unit-purego bench-small train-short resume-cross-blas

# bench: step benchmarks from go test, then the paper's problems at the
# paper's sizes (several minutes).
bench: deps
	$(GO) test -tags $(TAGS) -run '^$$' -bench . -benchtime 20x ./optim
	$(GO) run -tags $(TAGS) ./cmd/bench -size paper -out $(OUT)/bench

# paper: the RSDM paper's experiments at the paper's sizes, with every
# baseline, into $(OUT)/paper/report.md (plots, time-to-gap tables, and which
# of the paper's claims hold here). About an hour on 2 cores; PAPER_FLAGS
# passes options (-scale 0.5, -time-limit 60s, -only fig1).
PAPER_FLAGS ?=
paper: deps
	$(GO) run -tags $(TAGS) ./cmd/bench -paper -out $(OUT)/paper $(PAPER_FLAGS)

# train: the orthogonal FFN (5 Stiefel layers of 1024) with RSDM-P on
# Fashion-MNIST for one epoch, offline; prints test accuracy and feasibility.
train: deps
	$(GO) run -tags $(TAGS) ./cmd/train

clean:
	rm -rf $(BIN) $(OUT) build
