package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Interruption: SIGINT (Ctrl-C) or SIGTERM cancels the run's context, and
// the loop stops at the next step boundary (on every rank alike), saving a
// checkpoint.

// interruptedError reports a run stopped by a signal at a step boundary.
type interruptedError struct {
	signal      syscall.Signal // SIGINT or SIGTERM: the command exits 128 + its number
	epoch, step int
	dir, saved  string
	discarded   bool // the run had taken no step: its new folder was removed
}

func (e *interruptedError) Error() string {
	what := "interrupted"
	if e.signal == syscall.SIGTERM {
		what = "terminated"
	}
	if e.discarded {
		return fmt.Sprintf("%s before the first step; removed the new run folder %s, which held nothing", what, e.dir)
	}
	msg := fmt.Sprintf("%s at epoch %d, step %d; metrics so far are in %s", what, e.epoch+1, e.step, e.dir)
	if e.saved != "" {
		msg += fmt.Sprintf("; saved %s (go on with -resume %s)", e.saved, e.saved)
	}
	return msg
}

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

// stopRequested reports whether any rank's context is cancelled, so that
// a signal one rank saw stops every rank at the same step.
func (t *trainer) stopRequested(ctx context.Context) (bool, error) {
	return t.anyRank(ctx.Err() != nil)
}

// interrupted ends a run stopped by a signal (ctx's cause): it saves a
// checkpoint and the metrics, or, when this session created the run folder
// and has taken no step, removes the folder, which holds nothing to go on
// from.
func (t *trainer) interrupted(ctx context.Context) error {
	sig := syscall.SIGINT
	if ctx.Err() != nil {
		sig = signalOf(ctx)
	}
	if t.created && t.taken == 0 {
		if !t.writes() {
			return &interruptedError{signal: sig, discarded: true}
		}
		err := t.dir.Discard()
		if err == nil {
			return &interruptedError{signal: sig, dir: t.dir.Dir(), discarded: true}
		}
		if t.c.ranks() > 1 { // the other ranks do not save either: no checkpoint
			fmt.Fprintln(t.w, "warning: removing the new run folder:", err)
			return &interruptedError{signal: sig, epoch: t.st.Epoch, step: t.st.Step, dir: t.dir.Dir()}
		}
	}
	saved := ""
	if err := t.save(false); err != nil {
		fmt.Fprintln(t.w, "warning: saving a checkpoint:", err)
	} else {
		saved = t.last
	}
	writeOutputs(t.dir, t.st.Metrics, t.w)
	return &interruptedError{signal: sig, epoch: t.st.Epoch, step: t.st.Step, dir: t.dirName(), saved: saved}
}
