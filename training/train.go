// Package training trains a Gorgonia model of one's own the way cmd/train
// trains its built-in ones: compiled for orthonet's CPU or CUDA backend (or
// run on Gorgonia's tape machine), its Stiefel weights stepped by RSDM, RGD
// or Riemannian Adam and the rest by SGD, Adam or AdamW (optim.Group), over
// a data set (data.Dataset) in seeded shuffled batches, with a progress bar,
// metrics.csv and metrics.png, evaluation every K steps and at each epoch's
// end, run folders that keep the newest N checkpoints and the best, bit-exact
// resume from the newest checkpoint or any other (mid-epoch too), a
// checkpoint on Ctrl-C, a NaN/Inf policy, time and step limits, data-parallel
// training over MPI (RSDM all-reducing its r x r matrices) and callbacks.
//
// A run is New(model, config) then Fit; Evaluate and Predict use the trained
// model. cmd/train is one client of the package, the examples under
// examples/ are others.
package training

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	G "gorgonia.org/gorgonia"

	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/data"
	"github.com/orthonet/orthonet/dist"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/program"
)

// Model is a Gorgonia model to train: its graph (reached from Loss), its
// inputs and its parameters.
type Model struct {
	// Loss is the scalar loss of one batch; gorgonia.Grad(Loss, nodes of
	// Params...) must have been called. Required.
	Loss *G.Node
	// Logits, optional, are the (batch, classes) scores of a classifier:
	// with them every step and evaluation reports accuracy, and the test
	// loss is the cross-entropy of the logits.
	Logits *G.Node
	// Input takes one batch of examples (its size is the batch times the
	// data set's example size), and Labels, optional, the batch's one-hot
	// targets (batch, classes). Required unless Feed is set.
	Input, Labels *G.Node
	// Params are the trainable parameters, the constrained ones marked with
	// their manifold (param.OnStiefel). Required.
	Params []param.Param
	// Dropout lists dropout masks the compiled program draws itself (see
	// program.Config.Dropout).
	Dropout []program.Dropout
	// Inputs and Feed, where Feed is set, replace Input and Labels: Feed
	// puts one batch into the input nodes Inputs by calling set for each
	// (with []float32 or []float64 of the node's size).
	Inputs []*G.Node
	Feed   func(b Batch, set func(n *G.Node, data any) error) error
	// Eval, optional, is a forward-only model of the same parameters (the
	// same names) for evaluation and prediction, built on a graph of its
	// own: another batch size, dropout off. Its Loss may be nil. Without
	// it the training graph is compiled a second time, forward only, in
	// evaluation mode (program.Config.EvalMode).
	Eval *Model
}

// Batch is one batch of examples, as Model.Feed receives it.
type Batch struct {
	// X holds the examples, each of the data set's Shape, row-major; past
	// Size examples it is zero.
	X []float32
	// Labels holds the examples' labels (Size of them).
	Labels []int
	// Size is the number of examples: the batch, or fewer in the last batch
	// of an evaluation.
	Size int
	// Classes is the data set's number of classes.
	Classes int
	// Step is the training step (0 in evaluations), and RNG a random source
	// saved in checkpoints, for draws a feed makes itself (dropout masks on
	// the tape machine).
	Step int
	RNG  *rand.Rand
}

// NonFinite is what a run does with a batch whose loss or gradient is NaN
// or Inf; nothing moves for such a batch either way.
type NonFinite int

const (
	// Stop ends the run with an error naming the step.
	Stop NonFinite = iota
	// Skip drops the batch and goes on, up to MaxSkipRun batches in a row.
	Skip
)

// MaxSkipRun is how many batches in a row Skip drops before it stops the
// run.
const MaxSkipRun = 10

// Config says how to train. The zero value of each optional field is a
// working default.
type Config struct {
	// Train and Test are the data sets. Train is required; without Test
	// there is no evaluation.
	Train, Test data.Dataset
	// Batch is the global batch size (over all ranks). Required.
	Batch int
	// Epochs is the number of passes over Train (default 1); MaxSteps, when
	// above 0, stops the run after that many steps in all (it saves,
	// evaluates and can be resumed with a larger MaxSteps).
	Epochs, MaxSteps int
	// Seed seeds the order of the batches (data.Loader) and the program's
	// dropout masks and random nodes.
	Seed uint64
	// Groups and Options configure the optimizer (optim.Solver).
	Groups  []optim.Group
	Options optim.Options

	// Device is "auto" (default: a usable NVIDIA GPU, else the CPU, saying
	// which and why), "cpu" or "cuda"; Engine is "program" (default,
	// orthonet's compiled executor) or "tape" (Gorgonia's tape machine, on
	// the CPU). Threads, when above 0, bounds the CPU backend's threads.
	Device, Engine string
	Threads        int
	// KernelProfile times every kernel of the compiled training program and
	// reports where a step's time goes at the end.
	KernelProfile bool
	// MaxBytes bounds the memory each engine allocates for a graph, checked
	// before it allocates: each compiled program's buffers
	// (program.Config.MaxBytes), or the values a tape machine gives the
	// graph's nodes. A graph over it is refused with an error wrapping
	// ErrMemory (a SettingError where one process trains). Zero, the
	// default, means the memory left, as program.Config.MaxBytes says;
	// below zero, no bound.
	MaxBytes int64

	// EvalEvery is the steps between evaluations within an epoch on the
	// first EvalSubset test examples (0: about ten an epoch; -1: none);
	// every epoch ends with one on the whole test set. EvalSubset 0 means
	// all. EvalInterval, when above 0, also evaluates on the whole test set
	// every time that much more training time has passed.
	EvalEvery, EvalSubset int
	EvalInterval          time.Duration
	// TimeLimit, when above 0, stops the run after that much training time
	// (steps only), with an evaluation and a checkpoint.
	TimeLimit time.Duration
	// NonFinite is the NaN/Inf policy (default Stop).
	NonFinite NonFinite
	// MinAccuracy, when above 0, fails the run (ErrBelowAccuracy) whose
	// final test accuracy (percent) is lower.
	MinAccuracy float64

	// Out is the folder under which run folders are made (default
	// "checkpoints"). SaveEvery is the steps between checkpoints besides
	// those at each epoch's end, on a new best test accuracy and on
	// interruption (0: none). Keep is how many step checkpoints a run keeps
	// (default 3); best.safetensors is kept apart.
	Out             string
	SaveEvery, Keep int
	// Resume, when set, goes on from a checkpoint: a file, a run folder (its
	// newest) or "latest" (the newest under Out). A run's newest checkpoint
	// goes on in its folder, any other in a new one. ResumeFile, optional,
	// is that checkpoint already read (ReadResume).
	Resume     string
	ResumeFile *checkpoint.File
	// AllowOtherData lets a run resume on data of the same sizes whose
	// digest differs from the checkpoint's (refused otherwise): it warns,
	// and records it in Progress.DataChanges.
	AllowOtherData bool
	// Settings are what the caller's configuration says (flags): saved in
	// every checkpoint; a resumed run's must equal the saved ones but for
	// the names in MayChange. SavedSettings reads them back.
	Settings  map[string]string
	MayChange map[string]bool
	// PerRank names settings whose values may differ between the ranks of
	// a data-parallel run (a rank's own folders); every other must agree.
	PerRank map[string]bool

	// Comm, when set, trains data-parallel: each rank trains on its
	// Batch/Size rows of every global batch, the model built for that
	// many; rank 0 writes the files and prints.
	Comm dist.Communicator
	// Log receives the run's lines (nil: none); Bar shows a progress bar
	// on the terminal (stderr) where stdout is one.
	Log io.Writer
	Bar bool
	// Describe, when set, names what is trained in the first line
	// ("the FFN on fashion-mnist ...").
	Describe string
	// Callbacks are called at the run's events; Metrics are measured at
	// every evaluation besides loss and accuracy.
	Callbacks Callbacks
	Metrics   []Metric

	askedDevice string // Device as given, before selectDevice settled it
}

// Callbacks are functions a run calls; each may be nil. An error returned
// (or a panic) ends the run with that error, after the run's outputs are
// written; the newest checkpoint stays as it was.
type Callbacks struct {
	// BeforeStep is called with each step's batch before it goes into
	// the model's inputs: what it writes into the batch (Batch.X) is what
	// the step trains on.
	BeforeStep func(s StepInfo, b Batch) error
	// OnStep is called after each step.
	OnStep func(s StepInfo) error
	// OnEval is called after each evaluation.
	OnEval func(e Eval) error
	// OnSave is called after each checkpoint is written, with its path.
	OnSave func(path string, step int) error
}

// StepInfo is where a run stands after a step.
type StepInfo struct {
	Epoch, Batch, Step int     // epoch and batch from 0, steps done in all
	Loss, Accuracy     float64 // of the batch (the global batch's mean)
	Skipped            bool    // the batch was dropped (Skip)
}

// Metric is a measure of one's own over an evaluation's logits: Reset
// starts an evaluation, Observe takes each chunk of logits (n x classes)
// and labels, and Value is the result.
type Metric interface {
	Name() string
	Reset()
	Observe(logits []float32, labels []int, classes int)
	Value() float64
}

// Eval is the result of an evaluation.
type Eval struct {
	Epoch, Step int // the epoch (from 1) and step when measured during Fit
	Loss        float64
	Accuracy    float64 // fraction correct (0 without logits)
	Examples    int
	// Feasibility is the largest ||W^T W - I||_F of the constrained weights.
	Feasibility float64
	Metrics     map[string]float64 // Config.Metrics' values by name
}

// Errors a run can end with (errors.Is finds them in the run's error).
var (
	// ErrBelowAccuracy: the final accuracy is below Config.MinAccuracy.
	ErrBelowAccuracy = errors.New("test accuracy below the minimum")
	// ErrDiverged: the test loss is not finite.
	ErrDiverged = errors.New("the weights diverged")
)

// cause is an error whose message is msg and which wraps err (a sentinel
// that msg already says in its own words).
type cause struct {
	msg string
	err error
}

func (c *cause) Error() string { return c.msg }
func (c *cause) Unwrap() error { return c.err }

// SettingError is a setting that cannot train, found once the data or the
// model is known (an RSDM r above a weight's rows, a batch the ranks cannot
// split): a command exits 2 for it, as for a bad flag.
type SettingError struct{ Err error }

// Error returns the wrapped error's message.
func (e *SettingError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *SettingError) Unwrap() error { return e.Err }

// withDefaults returns c with its defaults filled in, or an error naming a
// setting out of range.
func (c Config) withDefaults() (Config, error) {
	if c.Epochs == 0 {
		c.Epochs = 1
	}
	if c.Device == "" {
		c.Device = "auto"
	}
	if c.Engine == "" {
		c.Engine = "program"
	}
	if c.Out == "" {
		c.Out = "checkpoints"
	}
	if c.Keep == 0 {
		c.Keep = 3
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	switch {
	case c.Train == nil:
		return c, errors.New("training: Config.Train is nil")
	case c.Batch < 1 || c.Epochs < 1:
		return c, fmt.Errorf("training: batch %d and epochs %d must be at least 1", c.Batch, c.Epochs)
	case c.MaxSteps < 0 || c.SaveEvery < 0 || c.Keep < 1 || c.EvalSubset < 0 || c.EvalEvery < -1:
		return c, fmt.Errorf("training: MaxSteps %d, SaveEvery %d, EvalSubset %d must not be negative, Keep %d at least 1, EvalEvery %d at least -1",
			c.MaxSteps, c.SaveEvery, c.EvalSubset, c.Keep, c.EvalEvery)
	case c.Threads < 0:
		return c, fmt.Errorf("training: Threads %d must not be negative (0: every CPU)", c.Threads)
	case c.TimeLimit < 0 || c.EvalInterval < 0:
		return c, fmt.Errorf("training: TimeLimit %v and EvalInterval %v must not be negative", c.TimeLimit, c.EvalInterval)
	case c.Device != "auto" && c.Device != "cpu" && c.Device != "cuda":
		return c, fmt.Errorf("training: device %q: want auto, cpu or cuda", c.Device)
	case c.Engine != "program" && c.Engine != "tape":
		return c, fmt.Errorf("training: engine %q: want program or tape", c.Engine)
	case c.Engine == "tape" && c.Device == "cuda":
		return c, errors.New("training: the tape engine runs on the CPU only; device cuda needs engine program")
	case c.NonFinite != Stop && c.NonFinite != Skip:
		return c, fmt.Errorf("training: NonFinite %d: want Stop or Skip", c.NonFinite)
	}
	return c, nil
}

// ranks returns the number of ranks the run trains on.
func (c *Config) ranks() int {
	if c.Comm == nil {
		return 1
	}
	return c.Comm.Size()
}

// rank returns this process's rank.
func (c *Config) rank() int {
	if c.Comm == nil {
		return 0
	}
	return c.Comm.Rank()
}

// shard returns the rows of each global batch one rank trains on.
func (c *Config) shard() int { return c.Batch / c.ranks() }
