package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/data"
	"github.com/orthonet/orthonet/dist"
	"github.com/orthonet/orthonet/internal/membudget"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/optim/optflag"
)

// config is everything the flags set.
type config struct {
	model, dataset, dataDir string
	optim, other            string // the rules' names (-optim, -other)
	// rule and otherRule are the rules -optim and -other name, with the
	// values of their flags (optflag.Rule).
	rule, otherRule optim.Rule
	// sampling and r are RSDM's -sampling and -r as the flags hold them
	// (with -model cnn, -r's default is cnnR), for the summary line.
	sampling                string
	r                       int
	lr, lrOther             float64
	schedule                string
	epochs, batch           int
	seed                    uint64
	evalEvery, evalSubset   int
	timeLimit, evalInterval time.Duration
	weightDecay, clipNorm   float64
	warmup, decayEvery      int
	nonFinite               string
	out                     string
	limitTrain, limitTest   int
	device                  string // -device; after selectDevice, the one chosen: cpu or cuda
	download                bool
	hidden, depth           int
	channels                int // the CNN's first block's channels
	dim, heads, mlp, patch  int
	dropout                 float64
	minAccuracy             float64
	saveEvery, keep         int
	resume                  string // checkpoint path, resolved from -resume
	resumeArg               string // -resume as given: latest or a run folder asks for its newest checkpoint
	otherData               bool   // -resume-other-data
	cpuProfile              string
	kernelProfile           bool
	engine                  string
	dist                    string // -dist: single or mpi
	maxMemoryArg            string // -max-memory as given: auto or a size
	maxMemory               int64  // -max-memory in bytes; 0 for auto (memory.go)

	comm      dist.Communicator // the group of -dist mpi; nil for -dist single
	blasShare int               // -dist mpi: threads of one rank's OpenBLAS and CPU backend (0: their defaults)

	flags   map[string]string // every flag's value but -resume, saved in checkpoints
	resumed *checkpoint.File  // the checkpoint at resume
}

// flagDef is one flag of train, defined once: parseArgs defines it, and
// resumable and checkApplicable read it.
type flagDef struct {
	name, usage string
	// define defines the flag on a field of the config, with its default
	// (val).
	define func(fs *flag.FlagSet, name, usage string)
	// resumable: a resumed run may change the flag, which changes none of
	// the steps it takes.
	resumable bool
	// perRank, where not empty, says why the flag's value may differ
	// between the ranks of -dist mpi: a place on the rank's own machine,
	// or what the rank alone prints or writes. Every other flag decides
	// the steps, the collective calls or their sizes, and must agree.
	perRank string
	// choices, where not nil, are the values the flag takes.
	choices []string
	// when, where not nil, says when the flag applies: given where it does
	// not, it is refused (checkApplicable), as a setting that would be
	// silently ignored.
	when *condition
}

// condition holds while flag on has one of the values in (with not: none
// of them), or while the condition or holds; where it fails, "-on VALUE
// lacks" says why.
type condition struct {
	on    string
	in    []string
	not   bool
	lacks string
	or    *condition
}

// only is the condition that flag on is is.
func only(on, is, lacks string) *condition {
	return &condition{on: on, in: []string{is}, lacks: lacks}
}

// holds reports whether the value v of flag k.on meets k (not k.or).
func (k *condition) holds(v string) bool { return slices.Contains(k.in, v) != k.not }

// refuses returns why the flag of condition k does not apply to c, or ""
// where it does.
func (k *condition) refuses(c config) string {
	for x := k; x != nil; x = x.or {
		if x.holds(c.flags[x.on]) {
			return ""
		}
	}
	if k == nil {
		return ""
	}
	return "-" + k.on + " " + c.flags[k.on] + " " + k.lacks
}

// flagType is the types of train's flags.
type flagType interface {
	string | int | float64 | uint64 | bool | time.Duration
}

// val returns a flagDef's define for a flag on *p with default v.
func val[T flagType](p *T, v T) func(fs *flag.FlagSet, name, usage string) {
	return func(fs *flag.FlagSet, name, usage string) {
		switch p := any(p).(type) {
		case *string:
			fs.StringVar(p, name, any(v).(string), usage)
		case *int:
			fs.IntVar(p, name, any(v).(int), usage)
		case *float64:
			fs.Float64Var(p, name, any(v).(float64), usage)
		case *uint64:
			fs.Uint64Var(p, name, any(v).(uint64), usage)
		case *bool:
			fs.BoolVar(p, name, any(v).(bool), usage)
		case *time.Duration:
			fs.DurationVar(p, name, any(v).(time.Duration), usage)
		}
	}
}

// flagTable returns train's flags, defined on the fields of c, and the
// flags of the rules' settings (ruleFlags). parseArgs checks their
// choices, and checkApplicable when they apply, in this order, naming the
// first flag refused; train -h lists them sorted.
func flagTable(c *config) []flagDef {
	own := slices.Concat(modelFlags(c), optimizerFlags(c), networkFlags(c), runFlags(c))
	return slices.Concat(own, ruleFlags(own))
}

// takenUnused are the rule flags that train takes with rules that do not
// use them: -rgd-momentum with -optim rsdm, since scripts/dnn_figure.sh
// gives both methods the same arguments.
var takenUnused = map[string][]string{"rgd-momentum": {"rsdm"}}

// ruleFlags are the flags of the settings of optim.Rules (optflag.Table)
// but those named like a flag of own (-seed, which RSDM's setting "seed"
// reads): each applies where -optim names a constrained rule that takes it
// or -other an unconstrained one, and is refused elsewhere. Settings that
// one flag cannot give (a registered rule's setting of a built-in one's
// name with another default) are a programming error: it panics, as
// package flag does on a flag defined twice.
func ruleFlags(own []flagDef) []flagDef {
	table, err := optflag.Table(optim.Rules)
	if err != nil {
		panic(err)
	}
	constrained := map[string]bool{}
	for _, r := range optim.Rules {
		constrained[r.String()] = r.Constrained()
	}
	var defs []flagDef
	for _, f := range table {
		name := f.Setting.Name
		if slices.ContainsFunc(own, func(d flagDef) bool { return d.name == name }) {
			continue
		}
		lacks := "has no -" + name + " (a flag of " + strings.Join(f.Rules, ", ") + ")"
		var when *condition
		for _, on := range []string{"other", "optim"} {
			var in []string
			for _, r := range slices.Concat(f.Rules, takenUnused[name]) {
				if constrained[r] == (on == "optim") {
					in = append(in, r)
				}
			}
			if in != nil {
				when = &condition{on: on, in: in, lacks: lacks, or: when}
			}
		}
		if also := takenUnused[name]; also != nil {
			f.Setting.Usage += "; taken, unused, with -optim " + strings.Join(also, ", ")
		}
		defs = append(defs, flagDef{name: name, usage: f.Usage(), when: when,
			define: func(fs *flag.FlagSet, _, _ string) { f.Define(fs) }})
	}
	return defs
}

// modelFlags are the flags of the model and the data set.
func modelFlags(c *config) []flagDef {
	return []flagDef{
		{name: "model", define: val(&c.model, "ffn"), choices: []string{"ffn", "vit", "cnn", "rnn"},
			usage: "network: ffn (orthogonal feed-forward), vit (orthogonal vision transformer), cnn (orthogonal convolutional network) or rnn (recurrent network reading an image row by row, its recurrent weight on O(-hidden))"},
		{name: "dataset", define: val(&c.dataset, "fashion-mnist"), choices: append(slices.Clone(data.Datasets), "folder"),
			usage: "data set: mnist, fashion-mnist, cifar10, or folder (-data DIR holds DIR/train/CLASS/* and DIR/test/CLASS/*, PNG or JPEG, read at the size and channels of the first image)"},
		{name: "data", define: val(&c.dataDir, ""), resumable: true,
			perRank: "the data set's folder on the rank's machine (the data itself is compared)",
			usage:   "folder of the data set's files (default: /usr/share/datasets/fashion-mnist for fashion-mnist, data/NAME otherwise)"},
	}
}

// optimizerFlags are the flags of the optimizers and their schedule.
func optimizerFlags(c *config) []flagDef {
	return []flagDef{
		{name: "optim", define: val(&c.optim, "rsdm"), choices: optim.RuleNames(true),
			usage: "optimizer of the orthogonal weights: " + strings.Join(optim.RuleNames(true), ", ") + " (radam: Riemannian Adam)"},
		{name: "lr", define: val(&c.lr, 0.1), usage: "step size of the orthogonal weights (-model cnn with rsdm or rgd: " + fmtFloat(defaultCNNLR) + ")"},
		{name: "other", define: val(&c.other, "sgd"), choices: optim.RuleNames(false),
			usage: "optimizer of the unconstrained parameters: " + strings.Join(optim.RuleNames(false), ", ") + " (-model cnn and rnn: " + defaultCNNOther + ")"},
		{name: "lr-other", define: val(&c.lrOther, 0.05),
			usage: "step size of the unconstrained parameters (-model cnn and rnn with adam: " + fmtFloat(defaultCNNAdamLR) + ")"},
		{name: "weight-decay", define: val(&c.weightDecay, 0.0), usage: "decoupled weight decay of the unconstrained parameters (0: none; adamw: 0 means 0.01)"},
		{name: "clip-norm", define: val(&c.clipNorm, 0.0), usage: "clip the gradients by their global norm (Riemannian for the orthogonal weights) to this (0: off)"},
		{name: "schedule", define: val(&c.schedule, "cosine"), choices: []string{"const", "cosine", "warmup-cosine", "step"},
			usage: "step-size schedule of both -lr and -lr-other: const, cosine (decays to 0 over all -epochs), warmup-cosine (rises from 0 over -warmup steps, then cosine), or step (halves every -decay-every steps)"},
		{name: "warmup", define: val(&c.warmup, 500), when: only("schedule", "warmup-cosine", "has no warm-up (-schedule warmup-cosine's flag)"),
			usage: "warm-up steps of -schedule warmup-cosine"},
		{name: "decay-every", define: val(&c.decayEvery, 1000), when: only("schedule", "step", "does not decay in steps (-schedule step's flag)"),
			usage: "steps between halvings of -schedule step"},
	}
}

// networkFlags are the flags of the networks' sizes.
func networkFlags(c *config) []flagDef {
	vit := func(lacks string) *condition { return only("model", "vit", lacks+" (the ViT's flag)") }
	return []flagDef{
		{name: "hidden", define: val(&c.hidden, 1024), when: &condition{on: "model", in: []string{"ffn", "rnn"}, lacks: "has no hidden width (the FFN's and the RNN's flag)"},
			usage: "FFN hidden width, or the RNN's hidden state (-model rnn: " + strconv.Itoa(defaultRNNHidden) + ")"},
		{name: "depth", define: val(&c.depth, 0), when: &condition{on: "model", in: []string{"ffn", "vit", "cnn"}, lacks: "has one recurrent layer (-depth is the FFN's, the ViT's and the CNN's flag)"},
			usage: "orthogonal FFN layers, ViT blocks or CNN blocks (0: the paper's 5 or 6, the CNN's " + strconv.Itoa(defaultCNNDepth) + ")"},
		{name: "channels", define: val(&c.channels, defaultCNNChannels), when: only("model", "cnn", "has no channels (the CNN's flag)"),
			usage: "CNN channels of the first block (each next block doubles them)"},
		{name: "dim", define: val(&c.dim, 1024), when: vit("has no embedding width"), usage: "ViT embedding width"},
		{name: "heads", define: val(&c.heads, 4), when: vit("has no attention heads"), usage: "ViT attention heads (must divide -dim)"},
		{name: "mlp", define: val(&c.mlp, 256), when: vit("has no MLP width"), usage: "ViT MLP width"},
		{name: "patch", define: val(&c.patch, 4), when: vit("has no patches"), usage: "ViT patch side (must divide 32)"},
		{name: "dropout", define: val(&c.dropout, 0.1), when: vit("has no dropout"), usage: "ViT dropout probability"},
	}
}

// runFlags are the flags of the run: its length, evaluations, checkpoints,
// outputs and where it runs.
func runFlags(c *config) []flagDef {
	return []flagDef{
		{name: "epochs", define: val(&c.epochs, 1), resumable: true, usage: "passes over the training set"},
		{name: "batch", define: val(&c.batch, 16), usage: "mini-batch size"},
		{name: "seed", define: val(&c.seed, uint64(1)), usage: "seed of initialisation, shuffling and sampling"},
		{name: "eval-every", define: val(&c.evalEvery, 0), resumable: true,
			usage: "evaluate every N steps on the first -eval-subset test images, besides the whole test set at the end of each epoch (0: about ten times an epoch, so that metrics.png's accuracy panel is a curve; -1: only at the ends of epochs)"},
		{name: "eval-subset", define: val(&c.evalSubset, 2000), resumable: true, usage: "test images of the evaluations within an epoch (0: all)"},
		{name: "eval-interval", define: val(&c.evalInterval, 0), resumable: true,
			usage: "also evaluate on the whole test set every time this much more training time has passed (0: never), for accuracy against training time"},
		{name: "time-limit", define: val(&c.timeLimit, 0), resumable: true,
			usage: "stop after this much training time (steps, not evaluations or checkpoints; 0: none), with a test evaluation and a checkpoint; -epochs still bounds the run; resume with a larger one to go on"},
		{name: "min-accuracy", define: val(&c.minAccuracy, 0.0), resumable: true, usage: "exit with an error if the final test accuracy (percent) is below this"},
		{name: "limit-train", define: val(&c.limitTrain, 0), usage: "use only the first N training examples (0: all)"},
		{name: "limit-test", define: val(&c.limitTest, 0), usage: "use only the first N test examples (0: all)"},
		{name: "download", define: val(&c.download, false), resumable: true,
			perRank: "whether the rank fetches the files into its -data first (the data itself is compared)", usage: "download MNIST or CIFAR-10 into -data first (SHA-256 checked)"},
		{name: "out", define: val(&c.out, "checkpoints"), resumable: true, perRank: "rank 0 alone writes the run folder",
			usage: "folder under which the run's folder is created (also by -resume from a checkpoint that is not its run's newest)"},
		{name: "save-every", define: val(&c.saveEvery, 1000), resumable: true,
			usage: "save a checkpoint every N steps (0: only at the end of each epoch, on a new best test accuracy and on Ctrl-C)"},
		{name: "keep", define: val(&c.keep, 3), resumable: true, usage: "keep the newest N step checkpoints of the run (best.safetensors is kept apart)"},
		{name: "resume", define: val(&c.resume, ""),
			usage: "go on from a checkpoint: a .safetensors file, a run folder (its newest), or latest (the newest under -out); a run's newest checkpoint goes on in its folder, any other in a new run folder under -out"},
		{name: "resume-other-data", define: val(&c.otherData, false), resumable: true,
			usage: "with -resume, go on although the data differ from the checkpoint's at the same sizes (refused otherwise, exit 2); the run's progress records it"},
		{name: "device", define: val(&c.device, "auto"), resumable: true, choices: devices,
			perRank: "-dist mpi trains on the CPU whatever it says",
			usage:   "auto (an NVIDIA GPU where one is usable, else the CPU; it says which and why), cpu, or cuda (the GPU, or an error naming what is missing; with -engine program; ORTHONET_CUDA_STANDIN=1 runs it on the host model of the device)"},
		{name: "engine", define: val(&c.engine, "program"), resumable: true, choices: engines,
			usage: "what runs the graphs: program (orthonet's compiled executor) or tape (Gorgonia's tape machine, the reference; CPU only)"},
		{name: "kernel-profile", define: val(&c.kernelProfile, false), resumable: true,
			perRank: "what the rank measures of its own kernels (rank 0 alone prints)",
			when:    only("engine", "program", "runs no kernels of its own (-engine program's flag)"),
			usage:   "time every kernel of the compiled training program and print where a step's time goes at the end (-engine program)"},
		{name: "nonfinite", define: val(&c.nonFinite, "stop"), resumable: true, choices: []string{"stop", "skip"},
			usage: "on a NaN or Inf loss or gradient: stop, or skip the batch (counted in metrics.csv and the summary; the run stops after 10 in a row)"},
		{name: "dist", define: val(&c.dist, "single"), resumable: true, choices: []string{"single", "mpi"},
			usage: "single (one process) or mpi (one rank of 'mpirun -np N train -dist mpi ...': each rank trains on its -batch/N rows of every global batch of -batch, rank 0 writes; CPU only)"},
		{name: "cpuprofile", define: val(&c.cpuProfile, ""), resumable: true, perRank: "each rank's own profile file", usage: "write a Go CPU profile of the run to this new file (go tool pprof reads it; a file there already is refused, exit 2)"},
		{name: "max-memory", define: val(&c.maxMemoryArg, "auto"), resumable: true, usage: maxMemoryUsage},
	}
}

// maxMemoryUsage is -max-memory's usage, train's and its subcommands'.
const maxMemoryUsage = "the memory the run may take, in bytes with an optional unit (4G, 512M: powers of 1000; 4Gi: of 1024), " +
	"which the network's estimated parameters, optimizer state, activations and data must fit before anything is built (exit 2 naming the flags to lower); " +
	"auto: the smallest of the available memory (MemAvailable), RLIMIT_AS and the cgroup's limit. Never saved in checkpoints"

// unsaved are the flags a checkpoint does not save (config.flags lacks
// them): -resume, and -max-memory, the machine's, which a resumed run or
// a subcommand takes from its own command line, never from a checkpoint.
var unsaved = map[string]bool{"resume": true, "max-memory": true}

// parseMaxMemory reads -max-memory: auto (0) or a size in bytes.
func parseMaxMemory(v string) (int64, error) {
	if v == "auto" {
		return 0, nil
	}
	b, err := membudget.ParseBytes(v)
	if err != nil {
		return 0, fmt.Errorf("-max-memory: %w, or auto", err)
	}
	return b, nil
}

// perRank lists the flags whose values may differ between the ranks of
// -dist mpi (flagDef.perRank).
var perRank = func() map[string]bool {
	m := map[string]bool{}
	for _, d := range flagTable(new(config)) {
		if d.perRank != "" {
			m[d.name] = true
		}
	}
	return m
}()

// resumable lists the flags a resumed run may change (flagDef.resumable).
var resumable = func() map[string]bool {
	m := map[string]bool{}
	for _, d := range flagTable(new(config)) {
		if d.resumable {
			m[d.name] = true
		}
	}
	return m
}()

func resumableList() string {
	var names []string
	for n := range resumable {
		names = append(names, "-"+n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// parseArgs defines the flags of flagTable, parses args and checks the
// values; checkApplicable checks the flags given against each other.
func parseArgs(args []string, stderr io.Writer) (config, *flag.FlagSet, error) {
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	table := flagTable(&c)
	for _, d := range table {
		d.define(fs, d.name, d.usage)
	}
	if err := fs.Parse(args); err != nil {
		return c, fs, err
	}
	if fs.NArg() > 0 {
		return c, fs, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	switch c.model {
	case "cnn":
		cnnDefaults(fs, &c)
	case "rnn":
		rnnDefaults(fs, &c)
	}
	c.flags = map[string]string{}
	fs.VisitAll(func(fl *flag.Flag) {
		if !unsaved[fl.Name] {
			c.flags[fl.Name] = fl.Value.String()
		}
	})
	for _, d := range table {
		if d.choices != nil && !slices.Contains(d.choices, c.flags[d.name]) {
			return c, fs, fmt.Errorf("-%s %q: want one of %s", d.name, c.flags[d.name], strings.Join(d.choices, ", "))
		}
	}
	if err := checkValues(c); err != nil {
		return c, fs, err
	}
	if err := c.parseRules(fs); err != nil {
		return c, fs, err
	}
	var err error
	if c.maxMemory, err = parseMaxMemory(c.maxMemoryArg); err != nil {
		return c, fs, err
	}
	if c.depth == 0 {
		c.depth = map[string]int{"ffn": 5, "vit": 6, "cnn": defaultCNNDepth}[c.model]
	}
	return c, fs, nil
}

// checkValues refuses values out of their ranges, and settings that
// cannot go together.
func checkValues(c config) error {
	switch {
	case c.device == "cuda" && c.engine == "tape":
		return errors.New("the tape engine runs on the CPU only; -device cuda needs -engine program")
	case c.device == "cuda" && c.dist == "mpi":
		return fmt.Errorf("-dist mpi trains on the CPU only (parameters on a device: %w); use -device cpu or auto", optim.ErrNotDistributed)
	case c.epochs < 1 || c.batch < 1:
		return fmt.Errorf("-epochs %d and -batch %d must be at least 1", c.epochs, c.batch)
	case c.limitTrain < 0 || c.limitTest < 0 || c.evalSubset < 0:
		return errors.New("-limit-train, -limit-test and -eval-subset must not be negative")
	case c.evalEvery < -1:
		return fmt.Errorf("-eval-every %d: want N > 0, 0 (about ten times an epoch) or -1 (at the ends of epochs)", c.evalEvery)
	case !(c.lr >= 0) || !(c.lrOther >= 0) || math.IsInf(c.lr, 0) || math.IsInf(c.lrOther, 0):
		return fmt.Errorf("-lr %v and -lr-other %v: want finite step sizes >= 0 (0 freezes those parameters)", c.lr, c.lrOther)
	case !(c.weightDecay >= 0) || !(c.clipNorm >= 0) || math.IsInf(c.weightDecay, 0) || math.IsInf(c.clipNorm, 0):
		return fmt.Errorf("-weight-decay %v and -clip-norm %v: want finite values >= 0", c.weightDecay, c.clipNorm)
	case c.warmup < 1 || c.decayEvery < 1:
		return fmt.Errorf("-warmup %d and -decay-every %d must be at least 1", c.warmup, c.decayEvery)
	case c.hidden < 1 || c.depth < 0 || c.dim < 1 || c.heads < 1 || c.mlp < 1 || c.patch < 1 || c.channels < 1:
		return errors.New("-hidden, -channels, -dim, -heads, -mlp and -patch must be at least 1, -depth at least 0")
	case c.model == "vit" && (c.dim%c.heads != 0 || 32%c.patch != 0):
		return fmt.Errorf("-heads %d must divide -dim %d and -patch %d must divide 32", c.heads, c.dim, c.patch)
	case c.dropout < 0 || c.dropout >= 1:
		return fmt.Errorf("-dropout %v: want 0 <= p < 1", c.dropout)
	case c.timeLimit < 0 || c.evalInterval < 0:
		return fmt.Errorf("-time-limit %v and -eval-interval %v must not be negative", c.timeLimit, c.evalInterval)
	case c.saveEvery < 0 || c.keep < 1:
		return fmt.Errorf("-save-every %d must not be negative and -keep %d must be at least 1", c.saveEvery, c.keep)
	case c.dataset == "folder" && (c.download || c.limitTrain > 0 || c.limitTest > 0):
		return errors.New("-dataset folder reads every image of -data's folder: -download, -limit-train and -limit-test do not apply (make a smaller folder)")
	case c.download && c.dataset == "fashion-mnist":
		return errors.New("-download: Fashion-MNIST comes from Debian's package dataset-fashion-mnist (apt-get install dataset-fashion-mnist)")
	}
	return nil
}

// cnnDefaults sets the CNN's own defaults of the flags the command line
// left unset; they are recorded as if given, so a resumed run keeps them.
func cnnDefaults(fs *flag.FlagSet, c *config) {
	if r := fs.Lookup("r"); r != nil && !isSet(fs, "r") {
		r.Value.Set(strconv.Itoa(cnnR(*c))) // an int's text: cannot fail
	}
	if !isSet(fs, "lr") && c.optim != "radam" {
		c.lr = defaultCNNLR
	}
	if !isSet(fs, "other") {
		c.other = defaultCNNOther
	}
	if !isSet(fs, "lr-other") && c.other == "adam" {
		c.lrOther = defaultCNNAdamLR
	}
}

// rnnDefaults sets the RNN's own defaults of the flags the command line
// left unset, recorded as if given as cnnDefaults does: -hidden
// defaultRNNHidden, -r rnnR, -other adam and its -lr-other (docs/results.md
// has the grid that chose them).
func rnnDefaults(fs *flag.FlagSet, c *config) {
	if !isSet(fs, "hidden") {
		c.hidden = defaultRNNHidden
	}
	if !isSet(fs, "other") {
		c.other = defaultRNNOther
	}
	if !isSet(fs, "lr-other") && c.other == "adam" {
		c.lrOther = defaultRNNAdamLR
	}
	if r := fs.Lookup("r"); r != nil && !isSet(fs, "r") {
		r.Value.Set(strconv.Itoa(rnnR(*c))) // an int's text: cannot fail
	}
}

// parseRules builds the rules -optim and -other name with the values of
// their flags (optflag.Rule), whose errors name a flag out of range, and
// reads back RSDM's -sampling and -r for the summary.
func (c *config) parseRules(fs *flag.FlagSet) error {
	var err error
	if c.rule, err = optflag.Rule(fs, c.optim); err != nil {
		return err
	}
	if c.otherRule, err = optflag.Rule(fs, c.other); err != nil {
		return err
	}
	c.sampling = c.flags["sampling"]
	c.r, _ = strconv.Atoi(c.flags["r"]) // 0 where no rule has -r
	return nil
}

// fmtFloat formats a default for a flag's usage.
func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// isSet reports whether the command line set flag name.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
}

// checkApplicable refuses flags given on the command line that the chosen
// optimizers, schedule, model or engine do not use (flagDef.when): a
// setting that would be silently ignored is a mistake the user should hear
// of.
func checkApplicable(c config, fs *flag.FlagSet) error {
	for _, d := range flagTable(new(config)) {
		if why := d.when.refuses(c); why != "" && isSet(fs, d.name) {
			return fmt.Errorf("-%s does not apply: %s", d.name, why)
		}
	}
	return nil
}
