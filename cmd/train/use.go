package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	G "gorgonia.org/gorgonia"

	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/data"
	"github.com/orthonet/orthonet/training"
)

// subcommands are the commands that use a checkpoint of train instead of
// training: train eval, train predict and train export. Each takes
// -resume (a checkpoint file, a run folder, or latest under -out, as
// train -resume does) and reads the model from the checkpoint's saved
// flags, so no model flag is given. A bad flag or argument, or a
// checkpoint that cannot be used (missing, damaged, of another program,
// weights that do not fit its flags), exits 2 with one line; a failure
// while working (data that cannot be read, a file that cannot be written,
// an image refused) exits 1 (subExit).
var subcommands = map[string]func(args []string, stdout, stderr io.Writer) error{
	"eval":    runEval,
	"predict": runPredict,
	"export":  runExport,
}

// useFlags are the flags every subcommand has.
type useFlags struct {
	resume, out    string
	device, engine string
	maxMemory      string
}

// register defines -resume and -out, and when the subcommand runs the
// model -device (default device) and -engine.
func (u *useFlags) register(fs *flag.FlagSet, device string) {
	fs.StringVar(&u.resume, "resume", "latest", "the checkpoint: a .safetensors file, a run folder (its newest), or latest (the newest under -out)")
	fs.StringVar(&u.out, "out", "checkpoints", "folder whose run folders -resume latest searches")
	fs.StringVar(&u.maxMemory, "max-memory", "auto", "the memory the command may take, in bytes with an optional unit (4G, 512M: powers of 1000; 4Gi: of 1024), "+
		"which the checkpoint's network must fit before it is built (exit 2 naming its flags); auto: the smallest of the available memory (MemAvailable), RLIMIT_AS and the cgroup's limit")
	if device != "" {
		fs.StringVar(&u.device, "device", device, "auto (an NVIDIA GPU where one is usable, else the CPU; it says which and why), cpu, or cuda (with -engine program)")
		fs.StringVar(&u.engine, "engine", "program", "what runs the model: program (orthonet's compiled executor) or tape (Gorgonia's tape machine; CPU only)")
	}
}

// check refuses a -device that is not one of train's, before the
// checkpoint is read (parseFlags, which reads it, checks it the same way).
func (u useFlags) check() error {
	if u.device != "" && !slices.Contains(devices, u.device) {
		return &usageError{fmt.Errorf("-device %q: want one of %s", u.device, strings.Join(devices, ", "))}
	}
	if _, err := parseMaxMemory(u.maxMemory); err != nil {
		return &usageError{err}
	}
	return nil
}

// parseSub parses a subcommand's flags into fs, which must have been made
// with flag.ContinueOnError. A bad flag is returned as one line; -h prints
// the usage to stderr and returns flag.ErrHelp.
func parseSub(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stderr)
		fs.Usage()
		return err
	}
	if err != nil {
		return fmt.Errorf("%w (%s -h lists the flags)", err, fs.Name())
	}
	return nil
}

// errReported is a failure already reported on stderr (train predict's
// refused files, a line each): the exit status is 1, nothing more is said.
var errReported = errors.New("reported")

// subExit prints err as the one line of a subcommand named name and
// returns the exit code: 0 for nil or -h, 2 for a usageError, else 1.
func subExit(name string, err error, stderr io.Writer) int {
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errReported):
		return 1
	case errors.As(err, new(*usageError)):
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return 1
}

// trained is a checkpoint of train loaded for use: the configuration it was
// trained with and the shape of its data.
type trained struct {
	c       config            // the run's, with this command's -device, -engine and -data
	path    string            // the checkpoint file
	f       *checkpoint.File  // its content
	info    training.DataInfo // the data it was trained on (images resized)
	step    int               // the steps it had taken
	flags   map[string]string
	classes []string // class names, by label
}

// loadTrained reads the checkpoint u names and the configuration saved in
// it. A non-empty dataDir replaces the run's -data. Every error is a
// usageError (exit 2).
func loadTrained(u useFlags, dataDir string) (*trained, error) {
	maxMemory := u.maxMemory
	if maxMemory == "" { // a useFlags built in code rather than parsed
		maxMemory = "auto"
	}
	args := []string{"-resume", u.resume, "-out", u.out, "-dist", "single", "-max-memory", maxMemory}
	if u.device != "" {
		args = append(args, "-device", u.device, "-engine", u.engine)
	}
	if dataDir != "" {
		args = append(args, "-data", dataDir)
	}
	c, err := parseFlags(args, io.Discard)
	if err != nil {
		return nil, &usageError{err}
	}
	t := &trained{c: c, path: c.resume, f: c.resumed}
	var st training.Progress
	for _, e := range []error{t.f.JSON(training.KeySettings, &t.flags), t.f.JSON(training.KeyData, &t.info), t.f.JSON(training.KeyProgress, &st)} {
		if e != nil {
			return nil, &usageError{fmt.Errorf("%s: not a checkpoint of train: %w", t.path, e)}
		}
	}
	t.step = st.Step
	if s := t.info.Shape; len(s) != 3 || s[0] < 1 || s[1] < 1 || s[2] < 1 || t.info.Classes < 2 {
		return nil, &usageError{fmt.Errorf("%s: the checkpoint's data of shape %v with %d classes is impossible", t.path, s, t.info.Classes)}
	}
	// The checkpoint's flags size the network: checked before any data
	// are read, for one image (network checks its batches).
	if err := t.checkMemory(1, false); err != nil {
		return nil, err
	}
	t.classes = data.ClassNames(c.dataset)
	if c.dataset == "folder" {
		t.classes = t.info.ClassNames // the class folders' names
	}
	if len(t.classes) != t.info.Classes {
		t.classes = make([]string, t.info.Classes)
		for i := range t.classes {
			t.classes[i] = strconv.Itoa(i)
		}
	}
	return t, nil
}

// set returns an empty set of the checkpoint's images: their shape and
// classes.
func (t *trained) set() *data.Set {
	s := t.info.Shape
	return &data.Set{Name: t.c.dataset, C: s[0], H: s[1], W: s[2], Classes: t.info.Classes}
}

// describe says in words what the checkpoint holds.
func (t *trained) describe() string {
	s := t.info.Shape
	return fmt.Sprintf("%s (step %d): %s on %s, images %dx%dx%d, %d classes", t.path, t.step, t.c.model, t.c.dataset, s[0], s[1], s[2], t.info.Classes)
}

// network builds the checkpoint's model for batches of b images with its
// weights; images makes its input whole images (buildNetFrom). Weights that
// do not fit the model the flags describe are a usageError.
func (t *trained) network(b int, images bool) (*network, error) {
	if err := t.checkMemory(b, images); err != nil {
		return nil, err
	}
	net, err := buildNetFrom(t.c, G.NewGraph(), b, t.set(), false, rand.New(rand.NewPCG(0, 0)), images)
	if err != nil {
		return nil, &usageError{fmt.Errorf("%s: building its %s: %w", t.path, t.c.model, err)}
	}
	if err := t.f.LoadNodes(training.PrefixModel, net.Nodes()); err != nil {
		return nil, &usageError{fmt.Errorf("%s: %w", t.path, err)}
	}
	// A NaN or Inf weight gives garbage, not an answer: eval, predict and
	// export refuse it, as resume does.
	if err := training.CheckFinite(net.Params()); err != nil {
		return nil, &usageError{fmt.Errorf("%s: %w", t.path, err)}
	}
	return net, nil
}

// checkMemory refuses, as a usageError, a network of the checkpoint's
// flags that would take more memory than -max-memory or the memory left
// for batches of b images (useFootprint), or whose sizes overflow, naming
// its flags; with images (train export's form), b is the batch the export
// builds the network at.
func (t *trained) checkMemory(b int, images bool) error {
	f, err := useFootprint(t.c, t.set(), b)
	if err != nil {
		return &usageError{fmt.Errorf("%s: its %s: %w", t.path, sizeLine(t.c, false), err)}
	}
	budget, ok := t.c.budget()
	if !ok || f.total() <= budget.Bytes {
		return nil
	}
	batch := ""
	if images {
		batch = fmt.Sprintf(" at a batch of %d images", b)
	}
	return &usageError{fmt.Errorf("%s: its %s%s: %s", t.path, sizeLine(t.c, false), batch, overBudget(f, budget, nil))}
}

// startEngine builds the checkpoint's network for batches of b images
// (network), settles -device (saying which it took on log) and returns an
// evaluator of the network, and the network.
func (t *trained) startEngine(b int, log io.Writer) (*training.Evaluator, *network, error) {
	net, err := t.network(b, false)
	if err != nil {
		return nil, nil, err
	}
	if err := selectDevice(&t.c, log); err != nil {
		return nil, nil, &usageError{err}
	}
	ev, err := newEvaluator(t.c, net)
	return ev, net, err
}

// argmax returns the index of the largest value.
func argmax(row []float32) int {
	best := 0
	for j, v := range row {
		if v > row[best] {
			best = j
		}
	}
	return best
}
