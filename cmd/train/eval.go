package main

import (
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/data"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/training"
)

// evalFlags are train eval's flags.
type evalFlags struct {
	useFlags
	split                 string
	limitTest, limitTrain int
	dataDir, report       string
}

func parseEval(args []string, stderr io.Writer) (evalFlags, error) {
	var e evalFlags
	fs := flag.NewFlagSet("train eval", flag.ContinueOnError)
	e.register(fs, "auto")
	fs.StringVar(&e.split, "split", "test", "the split evaluated: test or train")
	fs.IntVar(&e.limitTest, "limit-test", -1, "evaluate the first N test images (0: all; default: the run's own -limit-test, so that eval reproduces the run's test accuracy)")
	fs.IntVar(&e.limitTrain, "limit-train", 0, "with -split train, evaluate the first N training images (0: all)")
	fs.StringVar(&e.dataDir, "data", "", "folder of the data set's files (default: the run's -data)")
	fs.StringVar(&e.report, "report", "", "folder for confusion.csv, confusion.png and predictions.csv, created if missing; files of those names already there are an error (default: a new folder eval-step-N beside the checkpoint)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: train eval [flags]\n\nEvaluates a checkpoint of train on its data set; the model comes from the checkpoint.\n\n")
		fs.PrintDefaults()
	}
	if err := parseSub(fs, args, stderr); err != nil {
		return e, &usageError{err}
	}
	setTest, setTrain := isSet(fs, "limit-test"), isSet(fs, "limit-train")
	switch {
	case fs.NArg() > 0:
		return e, &usageError{fmt.Errorf("unexpected argument %q (the checkpoint is given by -resume)", fs.Arg(0))}
	case e.split != "test" && e.split != "train":
		return e, &usageError{fmt.Errorf("-split %q: want test or train", e.split)}
	case e.split == "train" && setTest:
		return e, &usageError{errors.New("-limit-test does not apply: -split train evaluates training images (-limit-train's flag)")}
	case e.split == "test" && setTrain:
		return e, &usageError{errors.New("-limit-train does not apply: -split test evaluates test images (-limit-test's flag)")}
	case (setTest && e.limitTest < 0) || e.limitTrain < 0:
		return e, &usageError{errors.New("-limit-test and -limit-train must not be negative")}
	}
	return e, e.check()
}

// confusion counts, for every true class (row), the predicted classes.
type confusion [][]int

func newConfusion(k int) confusion {
	m := make(confusion, k)
	for i := range m {
		m[i] = make([]int, k)
	}
	return m
}

// evalReport is what train eval measured.
type evalReport struct {
	m           training.Eval
	n           int
	conf        confusion
	predictions []int // the predicted class of every example
	labels      []int
}

// runEval runs train eval: it evaluates a checkpoint on its data set's test
// split (or training split), prints the accuracy, the loss, the accuracy of
// every class and ||W^T W - I||_F of every constrained weight, and writes
// the confusion matrix (CSV and PNG) and every example's prediction into a
// new folder.
func runEval(args []string, stdout, stderr io.Writer) error {
	e, err := parseEval(args, stderr)
	if err != nil {
		return err
	}
	t, err := loadTrained(e.useFlags, e.dataDir)
	if err != nil {
		return err
	}
	// The report folder is checked before the work, made after it.
	dir, err := reportDir(e.report, t)
	if err != nil {
		return err
	}
	set, err := evalSet(e, t, stdout)
	if err != nil {
		return err
	}
	eng, net, err := t.startEngine(evalBatch(t.c, set), stdout)
	if err != nil {
		return err
	}
	defer eng.Close()
	fmt.Fprintf(stdout, "evaluating %s\non %d %s images of %s (%s)\n", t.describe(), set.N, e.split, t.c.dataset, strings.Join(set.Files, ", "))
	r, err := measure(eng, set)
	if err != nil {
		return err
	}
	printEval(stdout, e.split, r, t.classes)
	for _, p := range param.Constrained(net.Params()) {
		fmt.Fprintf(stdout, "||W^T W - I||_F of %s: %.2e\n", p.Name(), training.Feasibility(p))
	}
	return writeEvalReport(dir, r, t.classes, stdout)
}

// evalSet loads the split that train eval evaluates, with the limits of
// its flags (for the test split by default the run's own -limit-test),
// and checks that its images are those the checkpoint was trained on.
func evalSet(e evalFlags, t *trained, w io.Writer) (*data.Set, error) {
	c := &t.c
	if e.limitTest >= 0 {
		c.limitTest = e.limitTest
	}
	if e.split == "train" {
		c.limitTrain = e.limitTrain
	} else {
		c.limitTrain = 1 // the training split is not evaluated: read one image of it
	}
	c.download = false
	train, test, err := loadData(context.Background(), *c, w)
	if err != nil {
		return nil, err
	}
	set := test
	if e.split == "train" {
		set = train
	}
	if got := (training.DataInfo{Shape: []int{set.C, set.H, set.W}, Classes: set.Classes}); !slices.Equal(got.Shape, t.info.Shape) || got.Classes != t.info.Classes {
		return nil, &usageError{fmt.Errorf("%s was trained on images %v with %d classes; %s has images %v with %d (another -data?)", t.path, t.info.Shape, t.info.Classes, strings.Join(set.Files, ", "), got.Shape, got.Classes)}
	}
	if set.N == 0 {
		return nil, fmt.Errorf("the %s split of %s is empty", e.split, c.dataset)
	}
	return set, nil
}

// measure evaluates net on the whole of set: the loss and accuracy, the
// confusion matrix and every example's prediction.
func measure(eng *training.Evaluator, set *data.Set) (evalReport, error) {
	r := evalReport{n: set.N, conf: newConfusion(set.Classes)}
	var err error
	r.m, err = eng.EvaluateWith(context.Background(), set, func(logits []float32, labels []int) {
		for i, y := range labels {
			p := argmax(logits[i*set.Classes : (i+1)*set.Classes])
			r.conf[y][p]++
			r.predictions = append(r.predictions, p)
			r.labels = append(r.labels, y)
		}
	})
	return r, err
}

// printEval prints the accuracy (as the training run prints it), the loss
// and the accuracy of every class.
func printEval(w io.Writer, split string, r evalReport, classes []string) {
	correct := 0
	for k := range r.conf {
		correct += r.conf[k][k]
	}
	fmt.Fprintf(w, "%s loss: %.4f\n", split, r.m.Loss)
	fmt.Fprintf(w, "%s accuracy: %.2f%% (%d of %d)\n", split, 100*r.m.Accuracy, correct, r.n)
	width := 0
	for _, name := range classes {
		width = max(width, len(name))
	}
	fmt.Fprintln(w, "accuracy by class:")
	for k, row := range r.conf {
		total := 0
		for _, v := range row {
			total += v
		}
		if total == 0 {
			fmt.Fprintf(w, "  %-*s      -  (no images)\n", width, classes[k])
			continue
		}
		fmt.Fprintf(w, "  %-*s %6.2f%% (%d of %d)\n", width, classes[k], 100*float64(row[k])/float64(total), row[k], total)
	}
}

// reportDir returns the folder train eval writes into, checking that it can
// be made and holds no file of the names it writes; it creates nothing. By
// default it is a new folder eval-step-N (eval-step-N-2, ...) beside the
// checkpoint, so that no file of the run is ever replaced.
func reportDir(report string, t *trained) (string, error) {
	if report == "" {
		base := filepath.Join(filepath.Dir(t.path), fmt.Sprintf("eval-step-%d", t.step))
		dir := base
		for k := 2; ; k++ {
			switch _, err := os.Lstat(dir); {
			case errors.Is(err, fs.ErrNotExist):
				if err := writable(filepath.Dir(dir)); err != nil {
					return "", &usageError{fmt.Errorf("the report goes beside the checkpoint, %w: give -report a folder to write", err)}
				}
				return dir, nil
			case err != nil:
				return "", err
			}
			dir = fmt.Sprintf("%s-%d", base, k)
		}
	}
	fi, err := os.Stat(report)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := writable(filepath.Dir(report)); err != nil {
			return "", &usageError{fmt.Errorf("-report %s: %w", report, err)}
		}
		return report, nil
	case err != nil:
		return "", &usageError{fmt.Errorf("-report: %w", err)}
	case !fi.IsDir():
		return "", &usageError{fmt.Errorf("-report %s is not a folder", report)}
	}
	for _, name := range evalFiles {
		if _, err := os.Lstat(filepath.Join(report, name)); err == nil {
			return "", &usageError{fmt.Errorf("-report %s already holds %s: give another folder (eval replaces no file)", report, name)}
		}
	}
	if err := writable(report); err != nil {
		return "", &usageError{fmt.Errorf("-report %s: %w", report, err)}
	}
	return report, nil
}

// writable checks that a folder can be written in, by making a folder of
// its own there and removing it, before any work whose results would go
// there.
func writable(dir string) error {
	probe, err := os.MkdirTemp(dir, ".eval-probe-")
	if err != nil {
		return fmt.Errorf("%s is not a folder eval can write in: %w", dir, err)
	}
	return os.Remove(probe)
}

// evalFiles are the files train eval writes.
var evalFiles = []string{"confusion.csv", "confusion.png", "predictions.csv"}

// writeEvalReport creates dir and writes the confusion matrix and the
// predictions into it, each file atomically and never over another; on a
// failure it removes what it made.
func writeEvalReport(dir string, r evalReport, classes []string, w io.Writer) (err error) {
	_, statErr := os.Stat(dir)
	created := errors.Is(statErr, fs.ErrNotExist)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var written []string
	defer func() {
		if err == nil {
			return
		}
		for _, p := range written {
			os.Remove(p)
		}
		if created {
			os.Remove(dir)
		}
	}()
	for _, f := range []struct {
		name  string
		write func(io.Writer) error
	}{
		{"confusion.csv", func(f io.Writer) error { return writeConfusionCSV(f, r.conf, classes) }},
		{"confusion.png", func(f io.Writer) error { return plotConfusion(f, r.conf, classes) }},
		{"predictions.csv", func(f io.Writer) error { return writePredictions(f, r, classes) }},
	} {
		path := filepath.Join(dir, f.name)
		if err := checkpoint.CreateNew(path, 0o644, f.write); err != nil {
			return err
		}
		written = append(written, path)
	}
	fmt.Fprintf(w, "confusion matrix: %s, %s\npredictions: %s\n", written[0], written[1], written[2])
	return nil
}

// writeConfusionCSV writes the confusion matrix: a row per true class, a
// column per predicted class, counts.
func writeConfusionCSV(w io.Writer, m confusion, classes []string) error {
	cw := csv.NewWriter(w)
	_ = cw.Write(append([]string{"true \\ predicted"}, classes...))
	for k, row := range m {
		rec := []string{classes[k]}
		for _, v := range row {
			rec = append(rec, strconv.Itoa(v))
		}
		_ = cw.Write(rec)
	}
	cw.Flush()
	return cw.Error()
}

// writePredictions writes every example's label and predicted class.
func writePredictions(w io.Writer, r evalReport, classes []string) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"index", "label", "predicted", "label_name", "predicted_name"})
	for i, p := range r.predictions {
		y := r.labels[i]
		_ = cw.Write([]string{strconv.Itoa(i), strconv.Itoa(y), strconv.Itoa(p), classes[y], classes[p]})
	}
	cw.Flush()
	return cw.Error()
}
