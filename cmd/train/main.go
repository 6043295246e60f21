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
//
// Where things are: package training trains; flags.go defines the flags
// (one table), resume.go merges a resumed run's saved flags, run.go maps
// the flags to a training.Config, network.go builds the networks as a
// training.Model, data.go loads the data, optimizer.go wires the flags to
// optim, and use.go with useengine.go, eval.go, predict.go and export.go
// serve the subcommands.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime/pprof"

	"github.com/orthonet/orthonet/dist"
	"github.com/orthonet/orthonet/training"
)

func main() { os.Exit(mainCode(hooks{})) }

// mainCode runs the command with the hooks h (none but in tests) and
// returns its exit code, after its deferred work (the CPU profile's flush)
// has run on every path.
func mainCode(h hooks) int {
	if len(os.Args) > 1 {
		if sub, ok := subcommands[os.Args[1]]; ok { // train eval, predict, export (use.go)
			return subExit("train "+os.Args[1], sub(os.Args[2:], os.Stdout, os.Stderr), os.Stderr)
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
	stopProfile, err := startProfile(c.cpuProfile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "train: -cpuprofile:", err)
		if errors.Is(err, fs.ErrExist) {
			return 2 // a bad setting: a file that is there already
		}
		return 1
	}
	defer stopProfile()
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
	ctx, stop := training.NotifySignals()
	defer stop()
	return leave(comm, run(ctx, c, w, h))
}

// startProfile starts the Go CPU profile of -cpuprofile into path, if
// set, and returns what stops it and flushes the file. path must be a new
// file: one that is there already (an earlier profile, or anything else)
// is left as it is, and the error wraps fs.ErrExist.
func startProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("%s exists: train replaces no file; give a new file (%w)", path, fs.ErrExist)
	}
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		os.Remove(path) // made just above, empty
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "train: -cpuprofile:", err)
		}
	}, nil
}

// leave reports the run's error err and leaves the group comm, returning
// the exit code: where err is this rank's alone, it ends every rank.
func leave(comm dist.Communicator, err error) int {
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

// exitCode is the command's exit status for run's error: training.ExitCode's
// (0, 2 for a setting that cannot train, 128 + the signal for a signal,
// else 1), and 2 too for a usage error or a setting too large for the
// memory.
func exitCode(err error) int {
	var usage *usageError
	var memory *memoryError
	code := training.ExitCode(err)
	if code == 1 && (errors.As(err, &usage) || errors.As(err, &memory)) {
		return 2
	}
	return code
}

// sameOnEveryRank reports whether err is one that every rank returns
// together (training.SameOnEveryRank, or a usage error), so that each can
// leave the group normally; any other error is this rank's alone.
func sameOnEveryRank(err error) bool {
	var usage *usageError
	return training.SameOnEveryRank(err) || errors.As(err, &usage)
}

// usageError is a setting that cannot train, found once the data or the
// network is known (an -r above a weight's rows): the command exits 2 for
// it, as for a bad flag.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }
