// Command run builds one of Gorgonia's examples against orthonet's harness
// (package gorgoniaex) and runs it with the arguments that follow its name:
//
//	go run -tags openblas ./internal/gorgoniaex/run convnet -mode train -dtype float64 -batch 32 -steps 300
//
// It prints the harness's report (JSON) and exits as the example does;
// with -o FILE it only builds the example into FILE.
// With -floor it checks the report of a train run against issue 31's
// floors (accuracy, feasibility and the time against the tape machine) and
// exits 1 naming the first one missed.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/orthonet/orthonet/internal/gorgoniaex"
	"github.com/orthonet/orthonet/internal/gorgoniaex/harness"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gorgoniaex:", err)
		os.Exit(1)
	}
}

// run builds the example the command line names and runs it, or only
// builds it (-o), checking the report against the floors asked for.
func run() error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	tags := fs.String("tags", "openblas", "build tags of the example's build")
	minAcc := fs.Float64("min-accuracy", 0, "train: the least test accuracy (percent) the run must reach")
	maxFeas := fs.Float64("max-feasibility", 0, "train: the largest ||W^T W - I||_F the run may end with (0: not checked)")
	maxRatio := fs.Float64("max-time-ratio", 0, "train: the largest time per batch against the tape machine's (0: not checked)")
	outBin := fs.String("o", "", "build the example into this file and exit without running it")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if fs.NArg() < 1 {
		return errors.New("usage: run [-tags T] [-o FILE] [-min-accuracy A -max-feasibility F -max-time-ratio R] EXAMPLE [harness flags]")
	}
	ex, err := gorgoniaex.Find(fs.Arg(0))
	if err != nil {
		return err
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	if *outBin != "" {
		out, err := filepath.Abs(*outBin)
		if err != nil {
			return err
		}
		return gorgoniaex.Build(ex, root, *tags, out)
	}
	dir, err := os.MkdirTemp("", "gorgoniaex-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, ex.Name)
	if err := gorgoniaex.Build(ex, root, *tags, bin); err != nil {
		return err
	}
	cmd := exec.Command(bin, fs.Args()[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	err = cmd.Run()
	os.Stdout.Write(out.Bytes())
	if err != nil {
		return fmt.Errorf("%s: %w", ex.Name, err)
	}
	var rep harness.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		return fmt.Errorf("%s's report: %w", ex.Name, err)
	}
	return checkFloors(ex.Name, rep, *minAcc, *maxFeas, *maxRatio)
}

// checkFloors checks the report of a train run of the example named name
// against the floors asked for (0: not checked) and, where any was asked
// for and all hold, says so on standard error.
func checkFloors(name string, rep harness.Report, minAcc, maxFeas, maxRatio float64) error {
	switch {
	case minAcc > 0 && !(rep.Accuracy >= minAcc):
		return fmt.Errorf("%s: test accuracy %.2f%%, below -min-accuracy %.2f%%", name, rep.Accuracy, minAcc)
	case maxFeas > 0 && !(rep.Feasibility < maxFeas):
		return fmt.Errorf("%s: ||W^T W - I||_F = %.3g, not below -max-feasibility %.3g", name, rep.Feasibility, maxFeas)
	case maxRatio > 0 && !(rep.TapeBatch > 0 && rep.ProgramBatch/rep.TapeBatch <= maxRatio):
		return fmt.Errorf("%s: a batch took %.1f ms compiled against %.1f ms on the tape machine (%.3f), above -max-time-ratio %.3f",
			name, 1e3*rep.ProgramBatch, 1e3*rep.TapeBatch, rep.ProgramBatch/max(rep.TapeBatch, 1e-300), maxRatio)
	}
	if minAcc > 0 || maxFeas > 0 || maxRatio > 0 {
		fmt.Fprintf(os.Stderr, "%s: test accuracy %.2f%%, ||W^T W - I||_F %.3g, a batch %.1f ms compiled against %.1f ms on the tape machine (%.3f): the floors hold\n",
			name, rep.Accuracy, rep.Feasibility, 1e3*rep.ProgramBatch, 1e3*rep.TapeBatch, rep.ProgramBatch/max(rep.TapeBatch, 1e-300))
	}
	return nil
}
