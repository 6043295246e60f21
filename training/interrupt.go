package training

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Interruption: SIGINT (Ctrl-C) or SIGTERM cancels the run's context
// (NotifySignals), and the loop stops at the next step boundary (on every
// rank alike), saving a checkpoint.

// InterruptedError reports a run stopped by its context at a step
// boundary.
type InterruptedError struct {
	Signal      syscall.Signal // SIGINT or SIGTERM (SIGINT for a context cancelled otherwise)
	Epoch, Step int
	Dir, Saved  string // the run folder, and the checkpoint saved ("" if none)
	// Discarded: the run had taken no step, and its new folder was removed.
	Discarded bool
}

// Error says what stopped the run, where, and how to go on from it.
func (e *InterruptedError) Error() string {
	what := "interrupted"
	if e.Signal == syscall.SIGTERM {
		what = "terminated"
	}
	if e.Discarded {
		return fmt.Sprintf("%s before the first step; removed the new run folder %s, which held nothing", what, e.Dir)
	}
	msg := fmt.Sprintf("%s at epoch %d, step %d; metrics so far are in %s", what, e.Epoch+1, e.Step, e.Dir)
	if e.Saved != "" {
		msg += fmt.Sprintf("; saved %s (go on with -resume %s)", e.Saved, e.Saved)
	}
	return msg
}

// signalCause is the signal that stopped a run, as its context's cause.
type signalCause struct{ sig syscall.Signal }

func (s signalCause) Error() string { return s.sig.String() }

// NotifySignals returns a context cancelled by the first SIGINT (Ctrl-C)
// or SIGTERM, for Fit: the run stops at a step boundary, saving a
// checkpoint, and Fit's InterruptedError names the signal. stop releases
// the signals.
func NotifySignals() (ctx context.Context, stop func()) {
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
// a signal.
func signalOf(ctx context.Context) syscall.Signal {
	var s signalCause
	if errors.As(context.Cause(ctx), &s) {
		return s.sig
	}
	return syscall.SIGINT
}

// interrupted ends a run stopped by its context: it saves a checkpoint and
// the metrics, or, when this session created the run folder and has taken
// no step, removes the folder, which holds nothing to go on from.
func (t *Trainer) interrupted(ctx context.Context) error {
	sig := syscall.SIGINT
	if ctx.Err() != nil {
		sig = signalOf(ctx)
	}
	if t.created && t.taken == 0 {
		if !t.writes() {
			return &InterruptedError{Signal: sig, Discarded: true}
		}
		err := t.dir.Discard()
		if err == nil {
			dir := t.dir.Dir()
			t.dir = nil
			return &InterruptedError{Signal: sig, Dir: dir, Discarded: true}
		}
		if t.c.ranks() > 1 { // the other ranks do not save either: no checkpoint
			fmt.Fprintln(t.c.Log, "warning: removing the new run folder:", err)
			return &InterruptedError{Signal: sig, Epoch: t.st.Epoch, Step: t.st.Step, Dir: t.dir.Dir()}
		}
	}
	saved := ""
	if err := t.save(false); err != nil {
		fmt.Fprintln(t.c.Log, "warning: saving a checkpoint:", err)
	} else {
		saved = t.last
	}
	t.writeOutputs()
	return &InterruptedError{Signal: sig, Epoch: t.st.Epoch, Step: t.st.Step, Dir: t.RunDir(), Saved: saved}
}
