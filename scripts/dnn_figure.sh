#!/usr/bin/env bash
# The paper's neural-network figure (the orthogonal ViT and FFN, RSDM-P
# against RGD, test accuracy against training seconds): each run trains for a
# fixed training time (-time-limit) with a whole-test-set evaluation every
# -eval-interval, on Fashion-MNIST, on a GPU where one is usable and on the
# CPU elsewhere (-device auto).
#
#   bash scripts/dnn_figure.sh grid OUT      the FFN's step-size grid, a short run per value
#   bash scripts/dnn_figure.sh ffn OUT LR_RSDM LR_RGD [SEEDS]
#   bash scripts/dnn_figure.sh vit OUT [SEEDS]
#
# TIME (default 120s), EVAL (default 10s), SEEDS (default "1 2 3"), TRAIN
# (a train binary; default: ./cmd/train built into OUT) and DEVICE (default
# auto: the GPU where one is usable, else the CPU, as train says) adjust
# it; DATA names the Fashion-MNIST folder where it is not the Debian package's. Every run writes its folder
# (metrics.csv with train_seconds, checkpoints) under OUT/<model>-<method>-<seed>; cmd/figure
# draws the figure from them: go run ./cmd/figure -out DIR -name ffn RSDM-P='OUT/ffn-rsdm-*' RGD='OUT/ffn-rgd-*'
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:?usage: dnn_figure.sh grid|ffn|vit OUT ...}
out=${2:?usage: dnn_figure.sh grid|ffn|vit OUT ...}
time=${TIME:-120s}
eval=${EVAL:-10s}
device=${DEVICE:-auto}
data=()
[[ -z ${DATA:-} ]] || data=(-data "$DATA")
mkdir -p "$out"
train=${TRAIN:-}
if [[ -z $train ]]; then
	go build -o "$out/train" ./cmd/train
	train=$out/train
fi

# run NAME ARGS...: one run into OUT/NAME, its log beside it.
run() {
	local name=$1
	shift
	echo "== $name: $*"
	"$train" -device "$device" -dataset fashion-mnist "${data[@]}" -schedule const -eval-every -1 -save-every 0 -epochs 1000 \
		-out "$out/$name" "$@" >"$out/$name.log" 2>&1 || { tail -5 "$out/$name.log"; return 1; }
	grep -E "^(time limit|test accuracy|\|\|W)" "$out/$name.log" | tr '\n' ' '
	echo
}

case $what in
grid) # the paper's grid, 20 s of training each, seed 1: the best final accuracy per method wins
	for lr in 0.01 0.05 0.1 0.5 1.0 1.5 2.0; do
		run "ffn-rsdm-lr$lr" -model ffn -optim rsdm -lr "$lr" -lr-other 0.1 -batch 16 -time-limit 20s -eval-interval 20s
		run "ffn-rgd-lr$lr" -model ffn -optim rgd -lr "$lr" -lr-other 0.1 -batch 16 -time-limit 20s -eval-interval 20s
	done
	;;
ffn)
	lr_rsdm=${3:?the RSDM-P step size the grid chose}
	lr_rgd=${4:?the RGD step size the grid chose}
	for seed in ${5:-${SEEDS:-1 2 3}}; do
		run "ffn-rsdm-$seed" -model ffn -optim rsdm -r 300 -lr "$lr_rsdm" -lr-other 0.1 -batch 16 -seed "$seed" -time-limit "$time" -eval-interval "$eval"
		run "ffn-rgd-$seed" -model ffn -optim rgd -lr "$lr_rgd" -lr-other 0.1 -batch 16 -seed "$seed" -time-limit "$time" -eval-interval "$eval"
	done
	;;
vit) # the authors' script: RSDM-P lr 0.5 r 300, RGD lr 0.05, Adam 5e-4 on the rest, batch 32, dropout 0.1
	for seed in ${3:-${SEEDS:-1 2 3}}; do
		run "vit-rsdm-$seed" -model vit -optim rsdm -r 300 -lr 0.5 -other adam -lr-other 5e-4 -batch 32 -dropout 0.1 -seed "$seed" -time-limit "$time" -eval-interval "$eval"
		run "vit-rgd-$seed" -model vit -optim rgd -lr 0.05 -other adam -lr-other 5e-4 -batch 32 -dropout 0.1 -seed "$seed" -time-limit "$time" -eval-interval "$eval"
	done
	;;
*) echo "usage: dnn_figure.sh grid|ffn|vit OUT ..." >&2; exit 2 ;;
esac
