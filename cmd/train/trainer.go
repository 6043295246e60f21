package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/data"
)

// progress is where a run stands: everything of the next step that is not
// in the weights, the optimizer or the configuration.
type progress struct {
	Epoch    int      `json:"epoch"` // epoch in progress, from 0
	Batch    int      `json:"batch"` // batches of it done
	Step     int      `json:"step"`  // steps done in all
	Seconds  float64  `json:"seconds"`
	Dropout  []byte   `json:"dropout_rng"` // the dropout masks' PCG state
	Window   window   `json:"window"`
	Best     float64  `json:"best_accuracy"`
	BestStep int      `json:"best_step"`
	Metrics  []metric `json:"metrics"`
	Skipped  int      `json:"skipped,omitempty"`  // batches skipped in all (-nonfinite skip)
	SkipRun  int      `json:"skip_run,omitempty"` // of them, in a row up to now
	// TrainSeconds is the time spent in training steps, and TimedEvals the
	// evaluations -eval-interval has made.
	TrainSeconds float64 `json:"train_seconds,omitempty"`
	TimedEvals   int     `json:"timed_evals,omitempty"`
}

// hooks are what a test plants in a run (hooks_test.go): the command's
// runs have none, and the configuration knows nothing of them.
type hooks struct {
	// afterBatch, where not nil, is called once each step's batch is in
	// the trainer's buffers (images, labels), before the step uses it.
	afterBatch func(t *trainer)
}

// trainer holds a run: data, graphs, optimizer and progress.
type trainer struct {
	c           config
	w           io.Writer
	hooks       hooks
	train, test *data.Set
	net, evNet  *network
	yb          []float32
	eng         engine
	solver      solver
	loader      *data.Loader
	maskSrc     *rand.PCG
	maskRNG     *rand.Rand
	dir         *checkpoint.Run // the run folder; nil for a finished run resumed, and on ranks but 0
	done        bool            // the run resumed has trained all its epochs
	created     bool            // this session created the run folder
	taken       int             // steps this session has taken
	last        string          // newest checkpoint written or loaded
	st          progress
	start       time.Time // of this session
	clock0      float64   // the training clock when this session began
	sync        []float64 // what the ranks agree on each step (distributed.go)

	// Per-session loop state, set by begin, beginEpoch and timed.
	images     []float32 // the batch being trained on
	labels     []int
	steps      int // batches per epoch
	logEvery   int // steps between training rows of the metrics
	evalEvery  int // steps between mid-epoch evaluations (0: none)
	bar        *progressBar
	epochStart time.Time // of this session's part of the epoch
	timeUp     bool      // -time-limit reached: the run stops after its evaluation and checkpoint
	firstBatch int       // the epoch's first batch in this session
}

// run trains as c says, printing on w, with the hooks h (none but in
// tests).
func run(ctx context.Context, c config, w io.Writer, h hooks) error {
	if err := selectDevice(&c, w); err != nil {
		return err
	}
	t, err := newTrainer(ctx, c, w)
	if err != nil {
		return err
	}
	defer t.close()
	t.hooks = h
	return t.run(ctx)
}

// newTrainer loads the data, builds the model and optimizer, and restores
// c.resumed when the run goes on from a checkpoint. The ranks of a
// data-parallel run first compare their settings, and a resumed run takes
// its run folder's lock, before anything is loaded or written.
func newTrainer(ctx context.Context, c config, w io.Writer) (_ *trainer, err error) {
	held, why, err := settle(c)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil && held != nil {
			held.Close()
		}
	}()
	t, err := build(ctx, c, w)
	if err != nil {
		return nil, err
	}
	if err := t.openRun(held, why); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

// settle makes the ranks compare their settings and check the batch's
// split, and for a resumed run settles on rank 0 where it writes
// (resumeFolder): held, the locked folder of the run it goes on in, or nil
// and why it goes on in a new one.
func settle(c config) (held *checkpoint.Run, why string, err error) {
	if err := agreeSettings(c); err != nil {
		return nil, "", err
	}
	if err := checkShards(c); err != nil {
		return nil, "", &usageError{err}
	}
	if c.resumed != nil && c.rank() == 0 {
		held, why, err = resumeFolder(c)
	}
	if err = fromRank0(c, err); err != nil {
		if held != nil {
			held.Close()
		}
		return nil, "", err
	}
	return held, why, nil
}

// build loads the data (which the ranks compare) and builds the networks,
// the engine with its optimizer, and the loader of the batches.
func build(ctx context.Context, c config, w io.Writer) (*trainer, error) {
	train, test, err := loadData(ctx, c, w)
	if err != nil {
		return nil, err
	}
	if err := agreeData(c, train, test); err != nil {
		return nil, err
	}
	if train.N < c.batch {
		return nil, fmt.Errorf("%d training examples, fewer than one batch of %d", train.N, c.batch)
	}
	t := &trainer{c: c, w: w, train: train, test: test, sync: make([]float64, 2)}
	t.maskSrc = rand.NewPCG(c.seed, 0x64726f70)
	t.maskRNG = rand.New(t.maskSrc)
	if err := t.buildEngine(); err != nil {
		return nil, err
	}
	t.solver = t.eng.solver()
	if t.loader, err = data.NewLoader(train, c.batch, c.seed); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

// openRun restores a resumed run and settles the folder it writes to (the
// run's own, held, or a new one for the reason why; none for a finished
// run), or creates a new run's folder. The ranks of a data-parallel run
// then check that they hold the same weights and learn whether rank 0
// created the folder.
func (t *trainer) openRun(held *checkpoint.Run, why string) (err error) {
	c := t.c
	if c.resumed != nil {
		t.last = c.resume
		if err = t.restore(c.resumed); err == nil && t.st.Epoch < c.epochs && t.writes() {
			t.dir, t.created, err = resumeRun(c, held, why, t.st.Step, t.w)
		}
		t.done = t.st.Epoch >= c.epochs
	} else if t.writes() {
		t.dir, err = checkpoint.CreateRunIn(c.out, nil)
		t.created = true
	}
	if err == nil && c.comm != nil {
		// The same seeds (or checkpoint) must have given every rank the
		// same weights; the run folder's fate is rank 0's.
		if err = t.solver.CheckWeights(); err == nil {
			err = t.syncCreated()
		}
	}
	return err
}

// close frees the engine and releases the run folder.
func (t *trainer) close() {
	t.eng.close()
	if t.dir != nil {
		t.dir.Close()
	}
}

// dirName returns the run folder's path, or "" on a rank that writes none.
func (t *trainer) dirName() string {
	if t.dir == nil {
		return ""
	}
	return t.dir.Dir()
}
