package main

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/orthonet/orthonet/data"
	"github.com/orthonet/orthonet/internal/membudget"
	"github.com/orthonet/orthonet/optim"
)

// Memory: the sizes the flags (or a checkpoint's flags) set are checked
// against the memory the process has before the network is built, so that
// a setting too large for the machine is refused with one line naming
// its flags (exit 2), never a runtime abort. The budget is -max-memory,
// or else the smallest of what membudget.Detect reads: MemAvailable,
// RLIMIT_AS less the address space held, the cgroup's limit less its
// usage.

// elemBytes is the bytes of one value: cmd/train's networks are float32.
const elemBytes = 4

// sizer is what a model's Config tells of its size (models.FFNConfig
// and the others).
type sizer interface {
	ParamCount() (int64, error)
	Activations(batch int) (int64, error)
}

// netSizer returns the sizes of c's network for images of set's shape,
// the configuration buildNetFrom builds.
func netSizer(c config, set *data.Set) (sizer, error) {
	switch c.model {
	case "ffn":
		return ffnConfig(c, set), nil
	case "vit":
		return vitConfig(c, set), nil
	case "cnn":
		return cnnConfig(c, set), nil
	case "rnn":
		return rnnConfig(c, set), nil
	}
	return nil, fmt.Errorf("unknown model %q", c.model)
}

// netSize returns the sizes of c's network for images of set's shape
// (netSizer) and its parameter count.
func netSize(c config, set *data.Set) (sizer, int64, error) {
	n, err := netSizer(c, set)
	if err != nil {
		return nil, 0, err
	}
	p, err := n.ParamCount()
	return n, p, err
}

// footprint is what a run takes, in bytes, by part.
type footprint struct {
	// params is the parameters' values: the graph's, the program's and,
	// when training, a checkpoint's.
	params int64
	// state is their gradients and the optimizers' state.
	state int64
	// acts is the activations of the batches (and their gradients when
	// training) and the input buffers.
	acts int64
	// data is the data sets' pixels.
	data int64
}

// total returns the sum of the parts, saturating at math.MaxInt64.
func (f footprint) total() int64 { return addSat(addSat(f.params, f.state), addSat(f.acts, f.data)) }

// describe says the parts in words, those of no bytes left out.
func (f footprint) describe() string {
	var parts []string
	for _, p := range []struct {
		what  string
		bytes int64
	}{{"parameters", f.params}, {"gradients and optimizer state", f.state}, {"activations", f.acts}, {"data", f.data}} {
		if p.bytes > 0 {
			parts = append(parts, p.what+" "+membudget.Format(p.bytes))
		}
	}
	return strings.Join(parts, ", ")
}

// addSat and mulSat add and multiply sizes (>= 0), saturating at
// math.MaxInt64.
func addSat(a, b int64) int64 {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}

func mulSat(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}

// ruleSlots returns the values of a parameter's size, per parameter, that
// the rule r keeps from step to step (and saves): the named buffers of a
// Described rule's description (stateCount), Riemannian Adam's two
// moments for another rule (r nil too). RSDM keeps none of the weight's
// size: its state is r x r and r x p (and, with a dense sampler, an r x n
// frame within an inner loop). Workspaces, which the steppers allocate
// once, are not counted.
func ruleSlots(r optim.Rule) (int64, error) {
	d, ok := r.(optim.Described)
	if !ok {
		return radamState, nil
	}
	var c stateCount
	if err := d.Describe(&c); err != nil {
		return 0, fmt.Errorf("the %v rule's step: %w", r, err)
	}
	return c.n, nil
}

// radamState is the number of buffers of a weight's size that Riemannian
// Adam keeps from step to step (optim/radam.go: its two moments), the
// count of a rule that is not optim.Described.
const radamState = 2

// stateCount is an optim.StepBlocks that counts a description's state
// buffers: those it asks StepBlocks.Buffer for by name.
type stateCount struct {
	n    int64
	refs optim.Ref // the buffers given beyond X and G
}

var _ optim.StepBlocks = (*stateCount)(nil)

// Buffer counts a state buffer (name set).
func (c *stateCount) Buffer(name string) optim.Ref {
	if name != "" {
		c.n++
	}
	c.refs++
	return optim.G + c.refs
}

// The other blocks keep no buffer of their own.
func (c *stateCount) Proj(_, _, _ optim.Ref)                              {}
func (c *stateCount) AddScaled(_, _ optim.Ref, _ optim.Coef, _ optim.Ref) {}
func (c *stateCount) Retract(_, _ optim.Ref, _ optim.Coef, _ optim.Ref)   {}
func (c *stateCount) Move(optim.Ref)                                      {}
func (c *stateCount) WeightDecay() float64                                { return 0 }
func (c *stateCount) Counter(string)                                      {}
func (c *stateCount) Decay(float64)                                       {}
func (c *stateCount) SGD(optim.Ref, float64)                              {}
func (c *stateCount) Adam(_, _ optim.Ref, _, _, _ float64)                {}
func (c *stateCount) Submanifold(optim.RSDMConfig)                        {}

// trainSlots returns the values per parameter that the rules of -optim and
// -other keep besides the gradient (ruleSlots), the larger of the two.
func trainSlots(c config) (int64, error) {
	a, err := ruleSlots(c.rule)
	if err != nil {
		return 0, err
	}
	b, err := ruleSlots(c.otherRule)
	return max(a, b), err
}

// forward returns the bytes of a forward pass of n over batches of b
// images of set's shape: the activations and the input buffer.
func forward(n sizer, set *data.Set, b int) (int64, error) {
	a, err := n.Activations(b)
	if err != nil {
		return 0, err
	}
	in := data.PixelBytes(b, set.C, set.H, set.W)
	if in == math.MaxInt64 {
		return 0, fmt.Errorf("%d images of %dx%dx%d: their sizes overflow", b, set.C, set.H, set.W)
	}
	return addSat(mulSat(a, elemBytes), in), nil
}

// trainFootprint returns what training c's network takes on images of
// train's shape: the parameters three times (the graph's values, the
// program's and a checkpoint's), their gradients, the optimizers' state
// twice (the solver's and a checkpoint's, trainSlots),
// the activations
// of a training batch twice (values and gradients) and half those of an
// evaluation batch (a forward-only program reuses its temporaries by
// liveness), and the pixels train and test hold (test may be nil: before the
// data are read, evaluating -limit-test images or batches of evalBatch's
// most).
func trainFootprint(c config, train, test *data.Set) (footprint, error) {
	n, p, err := netSize(c, train)
	if err != nil {
		return footprint{}, err
	}
	evalRows := evalBatch(c, &data.Set{N: math.MaxInt})
	if test != nil {
		evalRows = max(1, evalBatch(c, test))
	} else if c.limitTest > 0 {
		evalRows = min(evalRows, c.limitTest)
	}
	step, err := forward(n, train, c.shard())
	if err != nil {
		return footprint{}, err
	}
	eval, err := forward(n, train, evalRows)
	if err != nil {
		return footprint{}, err
	}
	slots, err := trainSlots(c)
	if err != nil {
		return footprint{}, err
	}
	f := footprint{params: mulSat(p, 3*elemBytes), state: mulSat(p, (1+2*slots)*elemBytes), acts: addSat(mulSat(step, 2), eval/2)}
	for _, s := range []*data.Set{train, test} {
		if s != nil {
			f.data = addSat(f.data, mulSat(int64(len(s.X)), 4))
		}
	}
	return f, nil
}

// useFootprint returns what running c's network forward takes on
// batches of b images of set's shape: the parameters twice (the graph's
// values and the program's, or the ONNX file's) and a batch's
// activations.
func useFootprint(c config, set *data.Set, b int) (footprint, error) {
	n, p, err := netSize(c, set)
	if err != nil {
		return footprint{}, err
	}
	acts, err := forward(n, set, b)
	if err != nil {
		return footprint{}, err
	}
	return footprint{params: mulSat(p, 2*elemBytes), acts: acts}, nil
}

// sizeFlag is a flag that sets a size of the model, and its field.
type sizeFlag struct {
	name string
	v    *int
}

// sizeFlags returns the flags that set the size of c's model, the most
// telling first, with -batch where batch is set.
func sizeFlags(c *config, batch bool) []sizeFlag {
	var fs []sizeFlag
	switch c.model {
	case "ffn":
		fs = []sizeFlag{{"hidden", &c.hidden}, {"depth", &c.depth}}
	case "vit":
		fs = []sizeFlag{{"dim", &c.dim}, {"depth", &c.depth}, {"mlp", &c.mlp}}
	case "cnn":
		fs = []sizeFlag{{"channels", &c.channels}, {"depth", &c.depth}}
	case "rnn":
		fs = []sizeFlag{{"hidden", &c.hidden}}
	}
	if batch {
		fs = append(fs, sizeFlag{"batch", &c.batch})
	}
	return fs
}

// sizeLine writes the model's flags that set its size: "-model vit -dim
// 100000 -depth 6 -mlp 256", with -batch where batch is set.
func sizeLine(c config, batch bool) string {
	parts := []string{"-model " + c.model}
	for _, f := range sizeFlags(&c, batch) {
		parts = append(parts, fmt.Sprintf("-%s %d", f.name, *f.v))
	}
	return strings.Join(parts, " ")
}

// largestFlags returns the size flags of c (sizeFlags) whose halving
// lowers the estimate most, the most first: one, or two where the second
// saves at least half what the first does.
func largestFlags(c config, batch bool, estimate func(config) (footprint, error)) []string {
	base, err := estimate(c)
	if err != nil {
		return nil
	}
	type saving struct {
		name  string
		bytes int64
	}
	var best []saving
	for i := range sizeFlags(&c, batch) {
		d := c
		f := sizeFlags(&d, batch)[i]
		if *f.v < 2 {
			continue
		}
		*f.v /= 2
		if e, err := estimate(d); err == nil && e.total() < base.total() {
			best = append(best, saving{f.name, base.total() - e.total()})
		}
	}
	slices.SortStableFunc(best, func(a, b saving) int { return cmp.Compare(b.bytes, a.bytes) })
	var names []string
	for _, s := range best[:min(2, len(best))] {
		if s.bytes >= best[0].bytes/2 { // the second only where it saves about as much
			names = append(names, s.name)
		}
	}
	return names
}

// memoryError is a setting whose estimate is over the memory budget: the
// command exits 2 for it, as for a bad flag. With several ranks it is
// this rank's alone (their machines differ), which ends the group.
type memoryError struct{ err error }

func (e *memoryError) Error() string { return e.err.Error() }
func (e *memoryError) Unwrap() error { return e.err }

// budget returns the memory the process may take: -max-memory, or what
// membudget.Detect finds; ok false where neither says.
func (c config) budget() (membudget.Budget, bool) {
	if c.maxMemory > 0 {
		return membudget.Budget{Bytes: c.maxMemory, Source: "-max-memory"}, true
	}
	return membudget.Detect()
}

// overBudget returns the words of an estimate over the budget b, with
// the flags to lower (sizeFlags' names): "about 2.4 TB (...), more than
// the 6.0 GB available (RLIMIT_AS); lower -dim or set -max-memory".
func overBudget(f footprint, b membudget.Budget, lower []string) string {
	than := fmt.Sprintf("the %s available (%s)", membudget.Format(b.Bytes), b.Source)
	way := "set -max-memory"
	if b.Source == "-max-memory" {
		than, way = "-max-memory "+membudget.Format(b.Bytes), "raise -max-memory"
	}
	switch len(lower) {
	case 1:
		way = "lower -" + lower[0] + " or " + way
	case 2:
		way = "lower -" + lower[0] + " or -" + lower[1] + ", or " + way
	}
	return fmt.Sprintf("about %s (%s), more than %s; %s", membudget.Format(f.total()), f.describe(), than, way)
}

// checkTrainMemory refuses a training run of c whose estimate
// (trainFootprint) is over the budget b (no check where has is false), or
// whose sizes overflow, naming the flags that set them.
func checkTrainMemory(c config, train, test *data.Set, b membudget.Budget, has bool) error {
	estimate := func(d config) (footprint, error) { return trainFootprint(d, train, test) }
	what := sizeLine(c, true)
	if c.resume != "" { // whose sizes a resumed run keeps
		what = fmt.Sprintf("-resume %s: its %s", c.resume, what)
	}
	f, err := estimate(c)
	if err != nil {
		return &usageError{fmt.Errorf("%s: %w", what, err)}
	}
	if !has || f.total() <= b.Bytes {
		return nil
	}
	var lower []string
	if c.resume == "" {
		lower = largestFlags(c, true, estimate)
	}
	return &memoryError{fmt.Errorf("%s: %s", what, overBudget(f, b, lower))}
}

// errNoShape says that a data set's shape is known only once it is read.
var errNoShape = errors.New("the data set's shape is known once it is read")

// knownShape returns an empty set of the shape and classes c's data set
// has once resized to the model's side (loadData), or errNoShape for an
// image folder.
func knownShape(c config) (*data.Set, error) {
	s := &data.Set{Name: c.dataset, C: 1, H: 28, W: 28, Classes: 10}
	switch c.dataset {
	case "cifar10":
		s.C, s.H, s.W = 3, 32, 32
	case "mnist", "fashion-mnist":
	default:
		return nil, errNoShape
	}
	if side := imageSize(c.model, c.dataset); side > 0 {
		s.H, s.W = side, side
	}
	return s, nil
}
