package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"

	G "gorgonia.org/gorgonia"

	"github.com/orthonet/orthonet/dist"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/training"
)

// options are the command's flags.
type options struct {
	training.Flags            // -out, -resume, -device, -r, -lr, -lr-other, -seed
	dist                      string
	steps, hidden, seq, batch int
	keep, saveEvery           int
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run parses args, trains, and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	o := options{Flags: training.Flags{Out: "checkpoints/charrnn", Device: "auto", R: 50, LR: 0.2, LROther: 0.01, Seed: 1}}
	fs := o.FlagSet("charrnn", "charrnn trains Gorgonia's character-level LSTM (examples/charRNN) on an embedded text through package training,\nits cell-write gate's recurrent weight on the Stiefel manifold stepped by RSDM, the rest by Adam.\n\nUsage: go run ./examples/charrnn [flags]", stderr)
	fs.StringVar(&o.dist, "dist", "single", "single or mpi (one rank of 'mpirun -np N charrnn -dist mpi')")
	fs.IntVar(&o.steps, "steps", 200, "training steps in all")
	fs.IntVar(&o.hidden, "hidden", 100, "LSTM hidden width (the Stiefel weight is hidden x hidden)")
	fs.IntVar(&o.seq, "seq", 16, "characters per unrolled sequence")
	fs.IntVar(&o.batch, "batch", 8, "sequences per batch (over all ranks)")
	fs.IntVar(&o.keep, "keep", 3, "step checkpoints kept")
	fs.IntVar(&o.saveEvery, "save-every", 50, "steps between checkpoints")
	if err := fs.Parse(args); err != nil {
		return training.ParseExitCode(err)
	}
	comm, err := dist.Open(o.dist)
	if err != nil {
		fmt.Fprintln(stderr, "charrnn:", err)
		return 2
	}
	if comm.Rank() != 0 {
		stdout = io.Discard
	}
	ctx, stop := training.NotifySignals()
	defer stop()
	_, err = train(ctx, o, comm, stdout)
	return leave(comm, err, stderr)
}

// leave ends the run: an error of this rank alone aborts every rank.
func leave(comm dist.Communicator, err error, stderr io.Writer) int {
	if err != nil && comm.Size() > 1 && !training.SameOnEveryRank(err) {
		fmt.Fprintf(stderr, "charrnn: rank %d: %v\n", comm.Rank(), err)
		_ = comm.Abort(err)
		return 1
	}
	if err != nil && comm.Rank() == 0 {
		fmt.Fprintln(stderr, "charrnn:", err)
	}
	code := training.ExitCode(err)
	if cerr := comm.Close(); cerr != nil && code == 0 {
		return 1
	}
	return code
}

// train builds the model for this rank's rows of each batch and trains it:
// the text's first nine tenths are the training set, the rest the test set.
func train(ctx context.Context, o options, comm dist.Communicator, log io.Writer) (training.Eval, error) {
	cut := len(corpus) * 9 / 10
	trainSet, err1 := newTextSet(corpus[:cut], o.seq)
	testSet, err2 := newTextSet(corpus[cut:], o.seq)
	if err := errors.Join(err1, err2); err != nil {
		return training.Eval{}, err
	}
	testSet.vocab = trainSet.vocab // one vocabulary: the test text's characters all occur in the training text
	if testSet.ids, err1 = trainSet.vocab.encode(corpus[cut:]); err1 != nil {
		return training.Eval{}, err1
	}
	if o.batch%comm.Size() != 0 {
		return training.Eval{}, &training.SettingError{Err: fmt.Errorf("-batch %d is not divisible by the %d ranks", o.batch, comm.Size())}
	}
	g := G.NewGraph()
	m, err := buildModel(g, modelConfig{Vocab: trainSet.NumClasses(), Hidden: o.hidden, SeqLen: o.seq, Batch: o.batch / comm.Size()}, rand.New(rand.NewPCG(o.Seed, 0x63686172)))
	if err != nil {
		return training.Eval{}, &training.SettingError{Err: err}
	}
	if _, err := G.Grad(m.loss, param.Nodes(m.params)...); err != nil {
		return training.Eval{}, err
	}
	model := training.Model{Loss: m.loss, Params: m.params, Inputs: m.inputs(),
		Feed: func(b training.Batch, set func(*G.Node, any) error) error { return m.feed(b.X, set) }}
	cfg := training.Config{Train: trainSet, Test: testSet, Batch: o.batch, Epochs: 1 << 20, MaxSteps: o.steps,
		Groups:    o.Groups(), // RSDM on the Stiefel weight, Adam on the rest
		SaveEvery: o.saveEvery, Keep: o.keep, EvalEvery: 25, Log: log, Bar: true,
		Settings: map[string]string{"hidden": fmt.Sprint(o.hidden), "seq": fmt.Sprint(o.seq), "batch": fmt.Sprint(o.batch)},
		Describe: fmt.Sprintf("charrnn (LSTM of %d, %d characters a sequence, vocabulary %d) on %d training and %d test sequences, batch %d, %d steps",
			o.hidden, o.seq, trainSet.NumClasses(), trainSet.Len(), testSet.Len(), o.batch, o.steps)}
	o.Apply(&cfg) // -out, -resume, -device and -seed, and the flags a resumed run must keep
	if comm.Size() > 1 {
		cfg.Comm = comm
	}
	return training.Run(ctx, model, cfg)
}
