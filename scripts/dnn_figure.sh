#!/usr/bin/env bash
# The paper's neural-network figure (issue 22): the orthogonal FFN and ViT on
# Fashion-MNIST, RSDM-P against RGD (QR retraction), test accuracy against
# training time and against steps over seeds, every run for a fixed training
# time (train -time-limit) with a test evaluation every -eval-interval (the FFN's
# on the whole test set, the ViT's on its first VIT_TEST images), on a GPU where one is usable and on the CPU elsewhere (-device auto).
#
#   bash scripts/dnn_figure.sh grid OUT     the FFN's step-size grid: one short run per step size
#                                           and method (seed 1); writes OUT/grid/choice.txt
#   bash scripts/dnn_figure.sh ffn OUT [LR_RSDM LR_RGD]   the FFN's runs (step sizes: the grid's choice)
#   bash scripts/dnn_figure.sh vit OUT      the ViT's runs (the paper's step sizes)
#   bash scripts/dnn_figure.sh page OUT [DOCS]   the published page (PNGs, tables, commands, machine,
#                                           verdicts) from OUT's runs into DOCS (default docs/dnn-figure);
#                                           an OUT without finished runs is refused, and the page is made
#                                           in a folder beside DOCS and renamed into it only when complete
#   bash scripts/dnn_figure.sh all OUT [DOCS]   grid, ffn, vit and page
#
# Settings (issue 22): FFN 5 Stiefel layers of 1024, ReLU, plain 1024 x 10
# output, 32 x 32 inputs (train resizes Fashion-MNIST to 32 x 32 for the FFN),
# batch 16, RSDM-P r = 300 and RGD, plain SGD lr 0.1 on the unconstrained
# parameters; ViT embedding 1024, depth 6, 4 heads, MLP 256, 4 x 4 patches,
# dropout 0.1, W_q, W_k, W_v on the Stiefel manifold, Adam 5e-4 on the rest,
# batch 32, RSDM-P lr 0.5 r = 300 against RGD lr 0.05. RGD and RSDM both run
# without momentum (train's -rgd-momentum defaults to 0.9; the paper's RGD has
# none), and the step sizes are constant (-schedule const).
#
# Environment:
#   TIME         training time of each run (default: FFN 180s, ViT 400s)
#   SEEDS        seeds (default: FFN "1 2 3 4 5", ViT "1 2 3"); both methods of a
#                seed run one after the other, so that they see the same conditions
#   EVAL         evaluation interval (default: FFN 10s, ViT 40s)
#   VIT_TEST     test images of the ViT's evaluations: the first N of Fashion-MNIST's
#                10,000 (train -limit-test; default 2000, 0 for all). One evaluation of
#                the whole test set takes ~365 s of the ViT on a 2-core CPU (see below),
#                which would make each 400 s run last over an hour; 2000 images give
#                an accuracy within about +-0.8 points (one standard error near 85%)
#   GRID_TIME    training time of a grid point (default 20s); GRID_LRS its step sizes
#                (default the paper's grid, 0.01 0.05 0.1 0.5 1.0 1.5 2.0)
#   MOMENTUM     SGD momentum of the FFN's unconstrained parameters (default 0)
#   LOAD_MAX     busy cores allowed, per core, when a run starts, and cores other
#                processes may use, per core, while it runs (default 0.5)
#   LOAD_POLICY  what a run started under load does: warn (default: run it, and
#                flag it in its load.txt and on the page), wait (wait up to
#                WAIT_MAX seconds, default 3600, for the machine to quieten, then
#                warn), or refuse (fail without running it)
#   DEVICE       train's -device (default auto); DATA the Fashion-MNIST folder where
#                it is not the Debian package's; TRAIN a train binary to use instead
#                of building one (with -tags openblas where OpenBLAS is installed);
#                FIGURE a figure binary that grid and page use instead of building one
#   EXTRA        more train flags for every run (a smoke test: EXTRA="-limit-test 500")
#   REDO=1       redo runs that finished before with the same command and no load flag
#                (kept by default, so that an interrupted make dnn-figure goes on)
#
# The script replaces only what it wrote itself: a run folder holding its
# command.txt (redone), OUT/machine.txt, OUT/grid/grid.md and choice.txt (told
# by their content; each written beside and renamed into place), and the train
# and figure it builds into OUT; any other file where one of these goes stops
# it (exit 1) with the file as it was.
#
# Every run gets its folder OUT/<model>/<method>-seed<N> (grid:
# OUT/grid/<method>-lr<LR>) holding train's run folder, train's log, command.txt
# (the exact train command), machine.txt (OUT/machine.txt as the run ended:
# the machine, BLAS, Go and commit it ran on) and load.txt (uptime's 1, 5 and 15-minute load
# averages before and after the run, the cores busy over the 5 s before it, the
# cores other processes used on average while it ran, measured from /proc/stat
# less the run's own CPU time, and the run's flag). The start is judged by the
# 5 s sample rather than by the 1-minute load average, which still counts the
# previous run for a minute after it ends, and which train's own threads lift
# to about 4 on 2 cores while it runs alone. cmd/figure reads command.txt and
# load.txt; the page lists the machines of the runs from their machine.txt.
#
# How long: planning runs on this workplace's 2-core AMD EPYC (OpenBLAS build,
# 2026-11-25, RSDM-P, seed 1), rough, the machine being shared. FFN (-time-limit
# 30s -eval-interval 10s, load average 0.1 to 0.7): 37 steps/s (590 samples/s),
# one whole-test-set evaluation about 1 s, 37 s of wall time for 30 s of
# training. ViT (-time-limit 20s -eval-interval 20s, train alone on the machine
# though its own threads lifted the load average to 4): 7 steps in 21.4 s of
# training (3 s a step, the first included) and one whole-test-set evaluation
# (10000 images) 365 s, 401 s of wall time in all; an earlier run while other
# sessions loaded the machine (load average 5 to 8) took 460 to 620 s an
# evaluation and 6 s a step. So make dnn-figure with the defaults, on a quiet
# machine: grid 14 runs x ~30 s = ~7 min; FFN 10 runs x (180 s + 18
# evaluations + start) = ~35 min; ViT 6 runs x (400 s + 10 evaluations x
# ~365 s) = ~6 h 45 min; in all about 7 h 30 min, plus any waiting for load.
# The ViT's evaluations dominate: on the whole test set (VIT_TEST=0) EVAL=80s
# makes its part about 3 h 45 min, EVAL=10s about 25 h; the default VIT_TEST=2000
# makes an evaluation ~75 s and the ViT's part 6 x ~20 min = ~2 h. Each run's training time is fixed, so RGD's slower steps
# do not lengthen it; 400 s of training is only about 130 ViT steps of 32
# images here (the paper's runs were on a GPU).
set -euo pipefail
here=$PWD # the caller's folder: a relative OUT or DOCS is taken from it
cd "$(dirname "$0")/.."
root=$(realpath .)

# place PATH: PATH as the caller meant it (from the caller's folder), relative
# to the repository root where it lies inside it (so that the commands recorded
# in command.txt, and the page, do not depend on where the script was run from).
place() {
	local p=$1
	[[ $p == /* ]] || p=$here/$p
	p=$(realpath -m -- "$p")
	case $p in
	"$root") echo . ;;
	"$root"/*) echo "${p#"$root"/}" ;;
	*) echo "$p" ;;
	esac
}

usage="usage: dnn_figure.sh grid|ffn|vit|page|all OUT ..."
what=${1:?$usage}
out=$(place "${2:?$usage}")
device=${DEVICE:-auto}
load_max=${LOAD_MAX:-0.5}
policy=${LOAD_POLICY:-warn}
case $policy in warn | wait | refuse) ;; *) echo "LOAD_POLICY=$policy: want warn, wait or refuse" >&2; exit 2 ;; esac
data=()
[[ -z ${DATA:-} ]] || data=(-data "$DATA")
cores=$(nproc)
failed=0
# Temporary folders of this run, removed when the script exits.
tmps=()
trap 'rm -rf "${tmps[@]}"' EXIT

# ours FILE: FILE is absent or one this script wrote in an earlier run
# (told by its content), which it may replace; any other file is the
# user's, and the script stops rather than replace it.
ours() {
	[[ -e $1 || -L $1 ]] || return 0
	local ok=false
	if [[ -f $1 && ! -L $1 ]]; then
		case ${1##*/} in
		machine.txt) grep -qvE '^(cpu|cores|blas|go|commit|kernel|date) ' "$1" || ok=true ;;
		grid.md) [[ $(head -1 "$1") == "# FFN step-size grid"* ]] && ok=true ;;
		choice.txt) grep -qv '^best ' "$1" || ok=true ;;
		esac
	fi
	$ok || {
		echo "dnn_figure: $1 exists and was not written by dnn_figure.sh: move it, or give another OUT" >&2
		exit 1
	}
}

# build: train into OUT (with -tags openblas where OpenBLAS is installed),
# figure, and OUT/machine.txt, what the page says of the machine (written
# beside it and renamed over an earlier run's).
build() {
	local blas
	mkdir -p "$out"
	ours "$out/machine.txt"
	if [[ -n ${TRAIN:-} ]]; then
		train=$TRAIN
		blas="as built by $TRAIN's builder (TRAIN)"
	else
		train=$out/train
		if printf '#include <cblas.h>\nint main(void){return 0;}\n' | gcc -x c - -lopenblas -o /dev/null >/dev/null 2>&1; then
			go build -tags openblas -o "$train" ./cmd/train
			blas="OpenBLAS$(dpkg-query -W -f=' ${Version}' libopenblas0 2>/dev/null || true) (train -tags openblas)"
		else
			echo "dnn_figure: OpenBLAS not found: building train on pure-Go BLAS (matrix products ~15x slower; make deps installs OpenBLAS)" >&2
			go build -o "$train" ./cmd/train
			blas="gonum, pure Go (OpenBLAS was not installed)"
		fi
	fi
	local commit m
	m=$(mktemp "$out/.machine.txt.XXXXXX")
	tmps+=("$m")
	commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- 2>/dev/null || echo ' (with uncommitted changes)')"
	{
		echo "cpu $({ lscpu 2>/dev/null || grep -m1 'model name' /proc/cpuinfo | sed 's/model name/Model name/'; } | sed -n 's/^Model name: *//p' | head -1)"
		echo "cores $cores"
		echo "blas $blas"
		echo "go $(go env GOVERSION 2>/dev/null || echo unknown)"
		echo "commit $commit"
		echo "kernel $(uname -sr)"
		echo "date $(date -u +%F)"
	} >"$m"
	chmod 644 "$m"
	mv -f "$m" "$out/machine.txt"
	figure=${FIGURE:-$out/figure}
	[[ -n ${FIGURE:-} ]] || go build -o "$figure" ./cmd/figure
}

# cpu_busy: the busy and total jiffies of all cores, from /proc/stat.
cpu_busy() {
	awk '$1=="cpu"{print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9; exit}' /proc/stat
}

# busy_cores SECONDS: how many cores were busy, on average, over SECONDS.
busy_cores() {
	local b0 t0 b1 t1
	read -r b0 t0 < <(cpu_busy)
	sleep "$1"
	read -r b1 t1 < <(cpu_busy)
	awk -v b="$((b1 - b0))" -v t="$((t1 - t0))" -v n="$cores" 'BEGIN{printf "%.2f", (t > 0 ? n*b/t : 0)}'
}

over() { awk -v x="$1" -v y="$2" 'BEGIN{exit !(x > y)}'; }

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# run DIR ARGS...: one train run into DIR, its log, command and load beside it.
run() {
	local dir=$1
	shift
	local extra=()
	read -r -a extra <<<"${EXTRA:-}"
	local cmd=("$train" -device "$device" -dataset fashion-mnist "${data[@]}" -schedule const -eval-every -1 -save-every 0 -keep 1 -epochs 1000 -out "$dir" "$@" "${extra[@]}")
	if [[ -z ${REDO:-} && -f $dir/done && "$(cat "$dir/command.txt" 2>/dev/null)" == "${cmd[*]}" ]] && grep -qx 'flag none' "$dir/load.txt"; then
		echo "== $dir: done before with this command and no load flag: kept (REDO=1 redoes it)"
		return 0
	fi
	# Only a run folder of this script (its command.txt beside the run) is
	# redone; any other folder there is the user's, and is refused.
	if [[ -e $dir && ! -f $dir/command.txt ]]; then
		echo "dnn_figure: $dir exists and is not a run folder of dnn_figure.sh (no command.txt): move it, or give another OUT" >&2
		exit 1
	fi
	rm -rf "$dir"
	mkdir -p "$dir"
	echo "${cmd[*]}" >"$dir/command.txt"
	local limit busy waited=0 flags=()
	limit=$(awk -v a="$load_max" -v n="$cores" 'BEGIN{print a*n}')
	busy=$(busy_cores 5)
	while over "$busy" "$limit" && [[ $policy == wait ]] && ((waited < ${WAIT_MAX:-3600})); do
		echo "== $dir: $busy of $cores cores busy (load average $(loadavg)); waiting for at most $limit"
		sleep 25
		waited=$((waited + 30))
		busy=$(busy_cores 5)
	done
	if over "$busy" "$limit"; then
		flags+=(busy-at-start)
		echo "dnn_figure: WARNING: $dir starts with $busy of $cores cores busy (more than $limit; load average $(loadavg)): its times are not to be trusted" >&2
	fi
	{
		echo "# load beside this run, by scripts/dnn_figure.sh; uptime before it:$(uptime)"
		echo "cores $cores"
		echo "before $(loadavg)"
		echo "busy_before $busy"
	} >"$dir/load.txt"
	if [[ $policy == refuse && ${#flags[@]} -gt 0 ]]; then
		echo "flag ${flags[*]} refused" >>"$dir/load.txt"
		echo "dnn_figure: $dir refused (LOAD_POLICY=refuse)" >&2
		return 1
	fi
	echo "== $dir: ${cmd[*]}"
	local b0 t0 b1 t1 tick rc=0 times
	tick=$(getconf CLK_TCK)
	read -r b0 t0 < <(cpu_busy)
	local TIMEFORMAT='%U %S %R'
	{ time "${cmd[@]}" >"$dir/train.log" 2>&1; } 2>"$dir/time.txt" || rc=$?
	read -r b1 t1 < <(cpu_busy)
	times=$(tail -1 "$dir/time.txt")
	local others
	others=$(awk -v db="$((b1 - b0))" -v hz="$tick" -v t="$times" 'BEGIN{split(t, a, " "); o = (a[3] > 0 ? (db/hz - a[1] - a[2]) / a[3] : 0); printf "%.2f", (o > 0 ? o : 0)}')
	if over "$others" "$limit"; then
		flags+=(others-during-run)
		echo "dnn_figure: WARNING: other processes used $others cores on average during $dir: its times are not to be trusted" >&2
	fi
	((${#flags[@]})) || flags=(none)
	{
		echo "# uptime after it:$(uptime)"
		echo "after $(loadavg)"
		echo "others $others"
		echo "flag $(
			IFS=,
			echo "${flags[*]}"
		)"
	} >>"$dir/load.txt"
	if ((rc != 0)); then
		echo "dnn_figure: $dir failed (exit $rc):" >&2
		tail -5 "$dir/train.log" >&2
		return 1
	fi
	cp "$out/machine.txt" "$dir/machine.txt"
	touch "$dir/done"
	grep -E "^(time limit|test accuracy)" "$dir/train.log" | tr '\n' ' '
	echo "(load: $(grep -E '^(before|after|flag) ' "$dir/load.txt" | tr '\n' ' '))"
}

seeds_of() { echo "${SEEDS:-$1}"; }

ffn_args=(-model ffn -hidden 1024 -depth 5 -batch 16 -lr-other 0.1 -momentum "${MOMENTUM:-0}" -rgd-momentum 0)
vit_args=(-model vit -dim 1024 -depth 6 -heads 4 -mlp 256 -patch 4 -dropout 0.1 -batch 32 -other adam -lr-other 5e-4 -rgd-momentum 0)

grid() {
	local t=${GRID_TIME:-20s}
	for lr in ${GRID_LRS:-0.01 0.05 0.1 0.5 1.0 1.5 2.0}; do
		run "$out/grid/rsdm-lr$lr" "${ffn_args[@]}" -optim rsdm -r 300 -lr "$lr" -seed 1 -time-limit "$t" -eval-interval "$t" || failed=$((failed + 1))
		run "$out/grid/rgd-lr$lr" "${ffn_args[@]}" -optim rgd -lr "$lr" -seed 1 -time-limit "$t" -eval-interval "$t" || failed=$((failed + 1))
	done
	# A diverged point is no failure of the grid; the best final accuracy of each method wins.
	failed=0
	# figure writes grid.md, and its choice goes to choice.txt, in a new
	# folder; both are then renamed into OUT/grid, over an earlier grid's
	# alone (ours).
	local g=$out/grid new f
	mkdir -p "$g"
	ours "$g/grid.md"
	ours "$g/choice.txt"
	new=$(mktemp -d "$g/.choice-XXXXXX")
	tmps+=("$new")
	"$figure" -grid lr -out "$new" -name grid -title "FFN step-size grid ($t of training per point, seed 1)" \
		RSDM-P="$g/rsdm-lr*" RGD="$g/rgd-lr*" >"$new/choice.txt"
	cat "$new/choice.txt"
	for f in grid.md choice.txt; do
		ours "$g/$f"
		mv -f "$new/$f" "$g/$f"
	done
}

ffn() {
	local lr_rsdm=${1:-} lr_rgd=${2:-}
	if [[ -z $lr_rsdm || -z $lr_rgd ]]; then
		[[ -f $out/grid/choice.txt ]] || { echo "dnn_figure: no $out/grid/choice.txt: run grid first, or give LR_RSDM LR_RGD" >&2; exit 2; }
		lr_rsdm=$(awk '$1=="best" && $2=="RSDM-P"{print $3}' "$out/grid/choice.txt")
		lr_rgd=$(awk '$1=="best" && $2=="RGD"{print $3}' "$out/grid/choice.txt")
	fi
	echo "== FFN: RSDM-P lr $lr_rsdm, RGD lr $lr_rgd"
	local t=${TIME:-180s} e=${EVAL:-10s}
	for seed in $(seeds_of "1 2 3 4 5"); do
		run "$out/ffn/rsdm-seed$seed" "${ffn_args[@]}" -optim rsdm -r 300 -lr "$lr_rsdm" -seed "$seed" -time-limit "$t" -eval-interval "$e" || failed=$((failed + 1))
		run "$out/ffn/rgd-seed$seed" "${ffn_args[@]}" -optim rgd -lr "$lr_rgd" -seed "$seed" -time-limit "$t" -eval-interval "$e" || failed=$((failed + 1))
	done
}

vit() {
	local t=${TIME:-400s} e=${EVAL:-40s} n=${VIT_TEST:-2000}
	for seed in $(seeds_of "1 2 3"); do
		run "$out/vit/rsdm-seed$seed" "${vit_args[@]}" -limit-test "$n" -optim rsdm -r 300 -lr 0.5 -seed "$seed" -time-limit "$t" -eval-interval "$e" || failed=$((failed + 1))
		run "$out/vit/rgd-seed$seed" "${vit_args[@]}" -limit-test "$n" -optim rgd -lr 0.05 -seed "$seed" -time-limit "$t" -eval-interval "$e" || failed=$((failed + 1))
	done
}

# machines DIR: the machines DIR's finished runs were made on, one line each
# ("COUNT key value<TAB>key value..."), from each run's machine.txt (the
# folder's where a run has none, as runs made before it was kept do not).
machines() {
	local d
	for d in "$1"/*/; do
		[[ -f $d/done ]] || continue
		if [[ -f $d/machine.txt ]]; then cat "$d/machine.txt"; else cat "$out/machine.txt"; fi | paste -sd '\t'
	done | sort | uniq -c | sed -E 's/^ *([0-9]+) /\1 /'
}

# demote: a page of cmd/figure's as a section of the README (headings one level down).
demote() { sed -E 's/^(#+) /#\1 /' "$1"; }

page() {
	local dest
	dest=$(place "${1:-docs/dnn-figure}")
	if [[ ! -d $out ]]; then
		echo "dnn_figure: page: OUT $out is not a folder (the folder that grid, ffn and vit wrote their runs into); $dest is left as it is" >&2
		exit 2
	fi
	if ! compgen -G "$out/grid/*/done" >/dev/null && ! compgen -G "$out/ffn/*/done" >/dev/null && ! compgen -G "$out/vit/*/done" >/dev/null; then
		echo "dnn_figure: page: OUT $out holds no finished runs (no $out/grid/*/done, $out/ffn/*/done or $out/vit/*/done): nothing to draw; $dest is left as it is" >&2
		exit 2
	fi
	# The page is made in a fresh folder beside DOCS (on its file system) and
	# renamed into DOCS only when complete, so that a failure leaves the
	# published page as it was.
	mkdir -p "$(dirname "$dest")"
	page_tmp=$(mktemp -d "$(dirname "$dest")/.$(basename "$dest").page-XXXXXX")
	bin_tmp=$(mktemp -d)
	tmps+=("$page_tmp" "$bin_tmp")
	local docs=$page_tmp figure=${FIGURE:-$bin_tmp/figure}
	[[ -n ${FIGURE:-} ]] || go build -o "$figure" ./cmd/figure
	local verdicts=() v
	if compgen -G "$out/grid/*/command.txt" >/dev/null; then
		"$figure" -grid lr -out "$docs" -name grid -title "FFN step-size grid" RSDM-P="$out/grid/rsdm-lr*" RGD="$out/grid/rgd-lr*" >/dev/null
	fi
	for m in ffn vit; do
		compgen -G "$out/$m/*/done" >/dev/null || continue
		local claim=sooner model=FFN
		if [[ $m == vit ]]; then claim=above model=ViT; fi
		local title="Orthogonal $model on Fashion-MNIST"
		# figure's warnings (runs not counted) go to the terminal too.
		v=$("$figure" -out "$docs" -name "$m" -title "$title" -claim "$claim" \
			RSDM-P="$out/$m/rsdm-seed*" RGD="$out/$m/rgd-seed*" | sed -n -e 's/^verdict: //p' -e '/^figure: warning: /w /dev/stderr')
		verdicts+=("- $model: $v")
	done
	local first_log
	first_log=$(compgen -G "$out/*/*/train.log" | head -1 || true)
	{
		echo "# The paper's neural-network figure, measured here"
		echo
		echo "RSDM-P against RGD on the orthogonal FFN and ViT (Fashion-MNIST), test accuracy against training time"
		echo "and against steps over seeds (issue 22). Generated by \`bash scripts/dnn_figure.sh page\` from the runs in"
		echo "\`$out\` on $(date -u +%F); regenerate it with \`make dnn-figure\` rather than editing it."
		echo
		echo "## Verdicts on the paper's claims"
		echo
		if ((${#verdicts[@]})); then printf '%s\n' "${verdicts[@]}"; else echo "No finished runs of the FFN or the ViT (only the step-size grid's)."; fi
		echo
		echo "How they are judged (cmd/figure): FFN, \"RSDM reaches high test accuracy sooner than RGD in wall time\":"
		echo "high accuracy is 95% of the better of the two final mean accuracies; the claim holds where RSDM-P's mean"
		echo "first reaches it at an earlier grid time than RGD's with RSDM-P's band (lowest to highest over seeds) wholly"
		echo "above RGD's there, does not hold where RGD's does so, and cannot be told otherwise. ViT, \"RSDM stays above"
		echo "RGD throughout\": RSDM-P's mean above RGD's, and the bands apart, at every grid time after the first"
		echo "evaluation; it does not hold where RSDM-P's band lies wholly below RGD's at some time. Fewer than 3 seeds"
		echo "of either method: cannot tell. Training time counts the steps only (data, forward, backward, optimizer),"
		echo "not the evaluations."
		echo
		echo "## Machine"
		echo
		local label line
		for m in grid ffn vit; do
			label=FFN
			[[ $m != grid ]] || label="FFN step-size grid"
			[[ $m != vit ]] || label=ViT
			machines "$out/$m" | while read -r n line; do
				local runs=runs
				((n != 1)) || runs=run
				echo "- $label, $n $runs: ${line//$'\t'/; }"
			done
		done
		[[ -z $first_log ]] || grep -m1 '^train: device' "$first_log" | sed 's/^train: /- /' || true
		echo "- load: each run's load averages (uptime's) before and after it, and the cores other processes used while"
		echo "  it ran, are in its row below; a flagged run was made under load and should be redone."
		echo
		echo "## Commands"
		echo
		echo "\`make dnn-figure\` (TIME, SEEDS and OUT override the defaults) runs \`scripts/dnn_figure.sh\` grid, ffn, vit"
		echo "and page. The exact command of every run, as it ran:"
		echo
		echo '```sh'
		for f in "$out"/grid/*/command.txt "$out"/ffn/*/command.txt "$out"/vit/*/command.txt; do
			if [[ -f $f ]]; then sed "s|^$out/train |train |" "$f"; fi
		done
		echo '```'
		for m in grid ffn vit; do
			[[ -f $docs/$m.md ]] || continue
			echo
			demote "$docs/$m.md"
		done
	} >"$docs/README.md"
	rm -f "$docs"/grid.md "$docs"/ffn.md "$docs"/vit.md
	# Into place: each PNG, then the README, by a rename on one file system;
	# only then the PNGs of an earlier page that this one does not have go.
	mkdir -p "$dest"
	local f pngs=() earlier=""
	# The PNGs the page there now shows: the only ones it may remove below.
	[[ -f $dest/README.md ]] && earlier=$(grep -oE '[A-Za-z0-9_.-]+\.png' "$dest/README.md" | sort -u | tr '\n' ' ')
	for f in "$docs"/*.png; do
		[[ -e $f ]] || continue
		pngs+=("$(basename "$f")")
		mv -f "$f" "$dest/"
	done
	mv -f "$docs/README.md" "$dest/README.md"
	for f in "$dest"/*.png; do
		[[ -e $f && " ${pngs[*]} " != *" $(basename "$f") "* && " $earlier " == *" $(basename "$f") "* ]] || continue
		rm -f "$f" # a PNG of the earlier page that this one does not show
	done
	echo "page: $dest/README.md"
	((${#verdicts[@]} == 0)) || printf '%s\n' "${verdicts[@]}"
}

case $what in
grid) build; grid ;;
ffn) build; ffn "${3:-}" "${4:-}" ;;
vit) build; vit ;;
page) page "${3:-}" ;;
all)
	build
	grid
	ffn
	vit
	page "${3:-}"
	;;
*) echo "$usage" >&2; exit 2 ;;
esac
if ((failed > 0)); then
	echo "dnn_figure: $failed runs failed or were refused" >&2
	exit 1
fi
