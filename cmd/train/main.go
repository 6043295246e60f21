// Command train trains an orthogonal network on MNIST, Fashion-MNIST or
// CIFAR-10, optimizing its Stiefel-constrained weights with RSDM or RGD and
// the rest with SGD or Adam. It shows a progress bar (plain lines when
// stdout is not a terminal), writes metrics.csv and metrics.png into a new
// run folder under -out, and ends by printing the test accuracy and the
// feasibility ||W^T W - I||_F of every constrained weight.
//
// With no flags it trains the paper's orthogonal FFN with RSDM-P on
// Fashion-MNIST for one epoch, offline. Ctrl-C stops at a step boundary.
//
// Its subcommands use a checkpoint it saved: train eval measures it on a
// data set, train predict classifies image files, train export writes it
// as an ONNX model (see use.go; train eval -h and so on).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/data"
	"github.com/orthonet/orthonet/dist"
	"github.com/orthonet/orthonet/optim"
)

// samplerNames returns the names of optim's RSDM samplers.
func samplerNames() []string {
	var names []string
	for _, s := range optim.Samplers {
		names = append(names, s.String())
	}
	return names
}

// config is everything the flags set.
type config struct {
	model, dataset, dataDir string
	optim, sampling         string
	r                       int
	lr, lrOther             float64
	other, schedule         string
	momentum                float64
	epochs, batch           int
	seed                    uint64
	evalEvery, evalSubset   int
	timeLimit, evalInterval time.Duration
	weightDecay, clipNorm   float64
	warmup, decayEvery      int
	nonFinite               string
	rgdMomentum             float64
	out                     string
	limitTrain, limitTest   int
	device                  string // -device; after selectDevice, the one chosen: cpu or cuda
	asked                   string // -device as given: auto, cpu or cuda (selectDevice)
	download                bool
	hidden, depth           int
	channels                int // the CNN's first block's channels
	dim, heads, mlp, patch  int
	dropout                 float64
	minAccuracy             float64
	saveEvery, keep         int
	resume                  string // checkpoint path, resolved from -resume
	resumeNewest            bool   // -resume latest or a run folder: its newest checkpoint was asked for
	cpuProfile              string
	kernelProfile           bool
	engine                  string
	dist                    string // -dist: single or mpi

	comm      dist.Communicator // the group of -dist mpi; nil for -dist single
	blasShare int               // -dist mpi: threads of one rank's OpenBLAS and CPU backend (0: their defaults)

	flags     map[string]string // every flag's value but -resume, saved in checkpoints
	resumed   *checkpoint.File  // the checkpoint at resume
	stopAfter int               // tests: stop as if interrupted before this step
	nanSteps  map[int]bool      // tests: put a NaN into the batch of these steps
}

// parseFlags parses and checks the command line. With -resume it reads the
// checkpoint and returns the configuration saved in it, with the flags of
// resumable (changeable) flags given on the command line applied; any other
// flag that differs from the saved one is an error.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	c, fs, err := parseArgs(args, stderr)
	if err != nil {
		return c, err
	}
	if c.resume == "" {
		return c, checkApplicable(c, fs)
	}
	path, err := resolveResume(c.resume, c.out)
	if err != nil {
		return c, err
	}
	f, err := checkpoint.Read(path)
	if err != nil {
		err = fmt.Errorf("-resume: %w", err)
		if others := usableOthers(path); len(others) > 0 {
			err = fmt.Errorf("%w; these checkpoints of its run load, newest first (go on from one with -resume PATH): %s", err, strings.Join(others, ", "))
		} else if path != c.resume {
			err = fmt.Errorf("%w; no other checkpoint of its run loads", err)
		}
		return c, err
	}
	var saved map[string]string
	if err := f.JSON(keyFlags, &saved); err != nil {
		return c, fmt.Errorf("-resume %s: not a checkpoint of cmd/train: %w", path, err)
	}
	var merged []string
	names := make([]string, 0, len(saved))
	for name := range saved {
		names = append(names, name)
	}
	sort.Strings(names)
	if _, ok := saved["rgd-momentum"]; !ok && saved["momentum"] != "" {
		// Checkpoints from before -rgd-momentum: -momentum set RGD's too.
		saved["rgd-momentum"] = saved["momentum"]
		names = append(names, "rgd-momentum")
	}
	for _, name := range names {
		if fs.Lookup(name) == nil || name == "resume" {
			return c, fmt.Errorf("-resume %s: the checkpoint sets flag -%s, which this build does not have", path, name)
		}
		if name == "device" { // the machine's, not the run's: this command line's (auto by default)
			continue
		}
		merged = append(merged, "-"+name+"="+saved[name])
	}
	var conflict error
	fs.Visit(func(fl *flag.Flag) {
		switch {
		case fl.Name == "resume":
		case resumable[fl.Name]:
			merged = append(merged, "-"+fl.Name+"="+fl.Value.String())
		case fl.Value.String() != saved[fl.Name] && conflict == nil:
			conflict = fmt.Errorf("-%s %s differs from the checkpoint's %q: a resumed run keeps its configuration (it may change only %s)",
				fl.Name, fl.Value, saved[fl.Name], resumableList())
		}
	})
	if conflict != nil {
		return c, conflict
	}
	rc, _, err := parseArgs(merged, stderr)
	if err != nil {
		return c, fmt.Errorf("-resume %s: the saved configuration: %w", path, err)
	}
	rc.resume, rc.resumed, rc.resumeNewest = path, f, path != c.resume
	return rc, nil
}

// resumable lists the flags a resumed run may change: none of them changes
// the steps it takes.
var resumable = map[string]bool{"epochs": true, "eval-every": true, "eval-subset": true, "nonfinite": true, "save-every": true, "keep": true, "min-accuracy": true,
	"data": true, "download": true, "out": true, "device": true, "cpuprofile": true, "engine": true, "kernel-profile": true,
	"time-limit": true, "eval-interval": true, "dist": true}

func resumableList() string {
	var names []string
	for n := range resumable {
		names = append(names, "-"+n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func parseArgs(args []string, stderr io.Writer) (config, *flag.FlagSet, error) {
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	fs.StringVar(&c.model, "model", "ffn", "network: ffn (orthogonal feed-forward), vit (orthogonal vision transformer) or cnn (orthogonal convolutional network)")
	fs.StringVar(&c.dataset, "dataset", "fashion-mnist", "data set: mnist, fashion-mnist or cifar10")
	fs.StringVar(&c.dataDir, "data", "", "folder of the data set's files (default: /usr/share/datasets/fashion-mnist for fashion-mnist, data/NAME otherwise)")
	fs.StringVar(&c.optim, "optim", "rsdm", "optimizer of the orthogonal weights: "+strings.Join(optim.RuleNames(true), ", ")+" (radam: Riemannian Adam)")
	fs.StringVar(&c.sampling, "sampling", "perm", "RSDM submanifold sampling: "+strings.Join(samplerNames(), ", ")+" (perm: rows, orth: Haar rows, blocks: covering blocks of rows)")
	fs.IntVar(&c.r, "r", 300, "RSDM submanifold size r (2 <= r <= rows of every orthogonal weight)")
	fs.Float64Var(&c.lr, "lr", 0.1, "step size of the orthogonal weights")
	fs.Float64Var(&c.lrOther, "lr-other", 0.05, "step size of the unconstrained parameters")
	fs.StringVar(&c.other, "other", "sgd", "optimizer of the unconstrained parameters: "+strings.Join(optim.RuleNames(false), ", "))
	fs.Float64Var(&c.weightDecay, "weight-decay", 0, "decoupled weight decay of the unconstrained parameters (0: none; adamw: 0 means 0.01)")
	fs.StringVar(&c.schedule, "schedule", "cosine", "step-size schedule of both -lr and -lr-other: const, cosine (decays to 0 over all -epochs), warmup-cosine (rises from 0 over -warmup steps, then cosine), or step (halves every -decay-every steps)")
	fs.IntVar(&c.warmup, "warmup", 500, "warm-up steps of -schedule warmup-cosine")
	fs.IntVar(&c.decayEvery, "decay-every", 1000, "steps between halvings of -schedule step")
	fs.Float64Var(&c.clipNorm, "clip-norm", 0, "clip the gradients by their global norm (Riemannian for the orthogonal weights) to this (0: off)")
	fs.Float64Var(&c.momentum, "momentum", 0.9, "SGD momentum of the unconstrained parameters")
	fs.Float64Var(&c.rgdMomentum, "rgd-momentum", 0.9, "momentum of RGD on the orthogonal weights (-optim rgd)")
	fs.IntVar(&c.epochs, "epochs", 1, "passes over the training set")
	fs.IntVar(&c.batch, "batch", 16, "mini-batch size")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of initialisation, shuffling and sampling")
	fs.IntVar(&c.evalEvery, "eval-every", 0, "evaluate every N steps on the first -eval-subset test images, besides the whole test set at the end of each epoch (0: about ten times an epoch, so that metrics.png's accuracy panel is a curve; -1: only at the ends of epochs)")
	fs.IntVar(&c.evalSubset, "eval-subset", 2000, "test images of the evaluations within an epoch (0: all)")
	fs.StringVar(&c.nonFinite, "nonfinite", "stop", "on a NaN or Inf loss or gradient: stop, or skip the batch (counted in metrics.csv and the summary; the run stops after 10 in a row)")
	fs.StringVar(&c.out, "out", "checkpoints", "folder under which the run's folder is created (also by -resume from a checkpoint that is not its run's newest)")
	fs.IntVar(&c.limitTrain, "limit-train", 0, "use only the first N training examples (0: all)")
	fs.IntVar(&c.limitTest, "limit-test", 0, "use only the first N test examples (0: all)")
	fs.StringVar(&c.device, "device", "auto", "auto (an NVIDIA GPU where one is usable, else the CPU; it says which and why), cpu, or cuda (the GPU, or an error naming what is missing; with -engine program; ORTHONET_CUDA_STANDIN=1 runs it on the host model of the device)")
	fs.StringVar(&c.engine, "engine", "program", "what runs the graphs: program (orthonet's compiled executor) or tape (Gorgonia's tape machine, the reference; CPU only)")
	fs.BoolVar(&c.kernelProfile, "kernel-profile", false, "time every kernel of the compiled training program and print where a step's time goes at the end (-engine program)")
	fs.StringVar(&c.dist, "dist", "single", "single (one process) or mpi (one rank of 'mpirun -np N train -dist mpi ...': each rank trains on its -batch/N rows of every global batch of -batch, rank 0 writes; CPU only)")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the run to this file (go tool pprof reads it)")
	fs.BoolVar(&c.download, "download", false, "download MNIST or CIFAR-10 into -data first (SHA-256 checked)")
	fs.IntVar(&c.hidden, "hidden", 1024, "FFN hidden width")
	fs.IntVar(&c.depth, "depth", 0, "orthogonal FFN layers, ViT blocks or CNN blocks (0: the paper's 5 or 6, the CNN's "+strconv.Itoa(defaultCNNDepth)+")")
	fs.IntVar(&c.channels, "channels", defaultCNNChannels, "CNN channels of the first block (each next block doubles them)")
	fs.IntVar(&c.dim, "dim", 1024, "ViT embedding width")
	fs.IntVar(&c.heads, "heads", 4, "ViT attention heads (must divide -dim)")
	fs.IntVar(&c.mlp, "mlp", 256, "ViT MLP width")
	fs.IntVar(&c.patch, "patch", 4, "ViT patch side (must divide 32)")
	fs.Float64Var(&c.dropout, "dropout", 0.1, "ViT dropout probability")
	fs.Float64Var(&c.minAccuracy, "min-accuracy", 0, "exit with an error if the final test accuracy (percent) is below this")
	fs.DurationVar(&c.timeLimit, "time-limit", 0, "stop after this much training time (steps, not evaluations or checkpoints; 0: none), with a test evaluation and a checkpoint; -epochs still bounds the run; resume with a larger one to go on")
	fs.DurationVar(&c.evalInterval, "eval-interval", 0, "also evaluate on the whole test set every time this much more training time has passed (0: never), for accuracy against training time")
	fs.IntVar(&c.saveEvery, "save-every", 1000, "save a checkpoint every N steps (0: only at the end of each epoch, on a new best test accuracy and on Ctrl-C)")
	fs.IntVar(&c.keep, "keep", 3, "keep the newest N step checkpoints of the run (best.safetensors is kept apart)")
	fs.StringVar(&c.resume, "resume", "", "go on from a checkpoint: a .safetensors file, a run folder (its newest), or latest (the newest under -out); a run's newest checkpoint goes on in its folder, any other in a new run folder under -out")
	if err := fs.Parse(args); err != nil {
		return c, fs, err
	}
	if fs.NArg() > 0 {
		return c, fs, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if c.model == "cnn" && !isSet(fs, "r") {
		c.r = cnnR(c) // recorded below as if given: a resumed run keeps it
	}
	c.flags = map[string]string{}
	fs.VisitAll(func(fl *flag.Flag) {
		if fl.Name != "resume" {
			c.flags[fl.Name] = fl.Value.String()
		}
	})
	oneOf := func(name, v string, allowed ...string) error {
		for _, a := range allowed {
			if v == a {
				return nil
			}
		}
		return fmt.Errorf("-%s %q: want one of %s", name, v, strings.Join(allowed, ", "))
	}
	for _, e := range []error{
		oneOf("model", c.model, "ffn", "vit", "cnn"),
		oneOf("dataset", c.dataset, data.Datasets...),
		oneOf("optim", c.optim, optim.RuleNames(true)...),
		oneOf("sampling", c.sampling, samplerNames()...),
		oneOf("other", c.other, optim.RuleNames(false)...),
		oneOf("schedule", c.schedule, "const", "cosine", "warmup-cosine", "step"),
		oneOf("device", c.device, "auto", "cpu", "cuda"),
		oneOf("engine", c.engine, engines...),
		oneOf("nonfinite", c.nonFinite, "stop", "skip"),
		oneOf("dist", c.dist, "single", "mpi"),
	} {
		if e != nil {
			return c, fs, e
		}
	}
	switch {
	case c.device == "cuda" && c.engine == "tape":
		return c, fs, errors.New("the tape engine runs on the CPU only; -device cuda needs -engine program")
	case c.device == "cuda" && c.dist == "mpi":
		return c, fs, fmt.Errorf("-dist mpi trains on the CPU only (parameters on a device: %w); use -device cpu or auto", optim.ErrNotDistributed)
	case c.epochs < 1 || c.batch < 1:
		return c, fs, fmt.Errorf("-epochs %d and -batch %d must be at least 1", c.epochs, c.batch)
	case c.limitTrain < 0 || c.limitTest < 0 || c.evalSubset < 0:
		return c, fs, errors.New("-limit-train, -limit-test and -eval-subset must not be negative")
	case c.evalEvery < -1:
		return c, fs, fmt.Errorf("-eval-every %d: want N > 0, 0 (about ten times an epoch) or -1 (at the ends of epochs)", c.evalEvery)
	case c.r < 2:
		return c, fs, fmt.Errorf("-r %d: RSDM's submanifold size must be at least 2 (and at most the rows of every orthogonal weight)", c.r)
	case !(c.lr >= 0) || !(c.lrOther >= 0) || math.IsInf(c.lr, 0) || math.IsInf(c.lrOther, 0):
		return c, fs, fmt.Errorf("-lr %v and -lr-other %v: want finite step sizes >= 0 (0 freezes those parameters)", c.lr, c.lrOther)
	case !(c.weightDecay >= 0) || !(c.clipNorm >= 0) || math.IsInf(c.weightDecay, 0) || math.IsInf(c.clipNorm, 0):
		return c, fs, fmt.Errorf("-weight-decay %v and -clip-norm %v: want finite values >= 0", c.weightDecay, c.clipNorm)
	case c.warmup < 1 || c.decayEvery < 1:
		return c, fs, fmt.Errorf("-warmup %d and -decay-every %d must be at least 1", c.warmup, c.decayEvery)
	case c.momentum < 0 || c.momentum >= 1 || c.rgdMomentum < 0 || c.rgdMomentum >= 1:
		return c, fs, fmt.Errorf("-momentum %v and -rgd-momentum %v: want 0 <= momentum < 1", c.momentum, c.rgdMomentum)
	case c.hidden < 1 || c.depth < 0 || c.dim < 1 || c.heads < 1 || c.mlp < 1 || c.patch < 1 || c.channels < 1:
		return c, fs, errors.New("-hidden, -channels, -dim, -heads, -mlp and -patch must be at least 1, -depth at least 0")
	case c.model == "vit" && (c.dim%c.heads != 0 || 32%c.patch != 0):
		return c, fs, fmt.Errorf("-heads %d must divide -dim %d and -patch %d must divide 32", c.heads, c.dim, c.patch)
	case c.dropout < 0 || c.dropout >= 1:
		return c, fs, fmt.Errorf("-dropout %v: want 0 <= p < 1", c.dropout)
	case c.timeLimit < 0 || c.evalInterval < 0:
		return c, fs, fmt.Errorf("-time-limit %v and -eval-interval %v must not be negative", c.timeLimit, c.evalInterval)
	case c.saveEvery < 0 || c.keep < 1:
		return c, fs, fmt.Errorf("-save-every %d must not be negative and -keep %d must be at least 1", c.saveEvery, c.keep)
	case c.download && c.dataset == "fashion-mnist":
		return c, fs, errors.New("-download: Fashion-MNIST comes from Debian's package dataset-fashion-mnist (apt-get install dataset-fashion-mnist)")
	}
	if c.depth == 0 {
		c.depth = map[string]int{"ffn": 5, "vit": 6, "cnn": defaultCNNDepth}[c.model]
	}

	return c, fs, nil
}

func main() { os.Exit(mainCode()) }

// mainCode runs the command and returns its exit code, after its deferred
// work (the CPU profile's flush) has run on every path.
func mainCode() int {
	if len(os.Args) > 1 {
		if sub, ok := subcommands[os.Args[1]]; ok { // train eval, predict, export (use.go)
			return sub(os.Args[2:], os.Stdout, os.Stderr)
		}
	}
	c, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "train:", err)
		return 2
	}
	if c.cpuProfile != "" {
		f, err := os.Create(c.cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "train: -cpuprofile:", err)
			return 1
		}
		defer func() {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				fmt.Fprintln(os.Stderr, "train: -cpuprofile:", err)
			}
		}()
	}
	comm, err := dist.Open(c.dist)
	if err != nil {
		fmt.Fprintf(os.Stderr, "train: -dist %s: %v\n", c.dist, err)
		return 2
	}
	w := io.Writer(os.Stdout)
	if comm.Rank() != 0 {
		w = io.Discard // rank 0 alone prints, as it alone writes files
	}
	if c.dist == "mpi" {
		c.comm = comm
		c.blasShare = shareCores(w)
	}
	ctx, stop := notifySignals()
	defer stop()
	err = run(ctx, c, w)
	code := exitCode(err)
	if err != nil && comm.Size() > 1 && !sameOnEveryRank(err) {
		// Only this rank failed: end every rank, naming the error here.
		fmt.Fprintf(os.Stderr, "train: rank %d of %d: %v\n", comm.Rank(), comm.Size(), err)
		_ = comm.Abort(err)
		return 1
	}
	if err != nil && comm.Rank() == 0 {
		fmt.Fprintln(os.Stderr, "train:", err)
	}
	if cerr := comm.Close(); cerr != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "train:", cerr)
		code = 1
	}
	return code
}

// exitCode is the command's exit status for run's error: 0, 2 for a
// setting that cannot train, 128 + the signal for a signal, else 1.
func exitCode(err error) int {
	var interrupted *interruptedError
	var usage *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &interrupted):
		return 128 + int(interrupted.signal)
	case errors.As(err, &usage):
		return 2
	}
	return 1
}

// usageError is a setting that cannot train, found once the data or the
// network is known (an -r above a weight's rows): the command exits 2 for
// it, as for a bad flag.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// signalCause is the signal that stopped a run, as its context's cause.
type signalCause struct{ sig syscall.Signal }

func (s signalCause) Error() string { return s.sig.String() }

// notifySignals returns a context cancelled, with a signalCause, by the
// first SIGINT (Ctrl-C) or SIGTERM; the run stops at a step boundary and
// the command exits 128 + the signal's number (130, 143), as a shell
// reports a process the signal killed.
func notifySignals() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			sig, ok := s.(syscall.Signal)
			if !ok {
				sig = syscall.SIGINT
			}
			cancel(signalCause{sig})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}

// signalOf returns the signal that cancelled ctx, SIGINT when it was not
// a signal (a test's cancel).
func signalOf(ctx context.Context) syscall.Signal {
	var s signalCause
	if errors.As(context.Cause(ctx), &s) {
		return s.sig
	}
	return syscall.SIGINT
}

// isSet reports whether the command line set flag name.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
}

// checkApplicable refuses flags given on the command line that the chosen
// optimizers, schedule or model do not use: a setting that would be
// silently ignored is a mistake the user should hear of.
func checkApplicable(c config, fs *flag.FlagSet) error {
	given := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	for _, rule := range []struct {
		flag, why string
		applies   bool
	}{
		{"sampling", "-optim " + c.optim + " samples no submanifold (RSDM's flag)", c.optim == "rsdm"},
		{"r", "-optim " + c.optim + " has no submanifold size (RSDM's flag)", c.optim == "rsdm"},
		// -rgd-momentum with -optim rsdm is taken: scripts/dnn_figure.sh
		// gives both methods the same arguments.
		{"rgd-momentum", "-optim radam has no momentum flag (RGD's flag)", c.optim != "radam"},
		{"momentum", "-other " + c.other + " has no heavy-ball momentum (SGD's flag)", c.other == "sgd"},
		{"warmup", "-schedule " + c.schedule + " has no warm-up (-schedule warmup-cosine's flag)", c.schedule == "warmup-cosine"},
		{"decay-every", "-schedule " + c.schedule + " does not decay in steps (-schedule step's flag)", c.schedule == "step"},
		{"hidden", "-model " + c.model + " has no hidden width (the FFN's flag)", c.model == "ffn"},
		{"channels", "-model " + c.model + " has no channels (the CNN's flag)", c.model == "cnn"},
		{"dim", "-model " + c.model + " has no embedding width (the ViT's flag)", c.model == "vit"},
		{"heads", "-model " + c.model + " has no attention heads (the ViT's flag)", c.model == "vit"},
		{"mlp", "-model " + c.model + " has no MLP width (the ViT's flag)", c.model == "vit"},
		{"patch", "-model " + c.model + " has no patches (the ViT's flag)", c.model == "vit"},
		{"dropout", "-model " + c.model + " has no dropout (the ViT's flag)", c.model == "vit"},
		{"kernel-profile", "-engine tape runs no kernels of its own (-engine program's flag)", c.engine == "program"},
	} {
		if given[rule.flag] && !rule.applies {
			return fmt.Errorf("-%s does not apply: %s", rule.flag, rule.why)
		}
	}
	return nil
}
