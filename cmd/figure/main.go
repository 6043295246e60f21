// Command figure draws test accuracy against training time from train runs,
// the form of the RSDM paper's neural-network figure: for each labelled set
// of runs (seeds of one method), the mean over the runs and its spread
// (lowest to highest) at a common grid of training times, as a PNG plot and
// a Markdown table, with each run's steps, steps per second, final accuracy
// and feasibility.
//
// Usage:
//
//	figure -out DIR -name NAME [-title T] [-every 10s] LABEL=PATTERN [LABEL=PATTERN ...]
//
// PATTERN is a glob of run folders, or of folders holding run folders (what
// train -out writes), each with a metrics.csv that has train_seconds (train
// -time-limit and -eval-interval). A run's accuracy at grid time t is its
// last whole-test-set evaluation before t plus half the grid's step (the one
// an interval asks for comes at the first step past its time).
package main

import (
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "figure:", err)
		os.Exit(1)
	}
}

// evaluation is a whole-test-set evaluation of a run.
type evaluation struct {
	train       float64 // training seconds
	step        int
	accuracy    float64 // in [0, 1]
	feasibility string
}

// runData is one run's evaluations, in order.
type runData struct {
	path  string
	evals []evaluation
}

// series is a label's runs.
type series struct {
	label string
	runs  []runData
}

func run(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("figure", flag.ContinueOnError)
	fs.SetOutput(w)
	out := fs.String("out", ".", "folder for NAME.png and NAME.md")
	name := fs.String("name", "figure", "base name of the files")
	title := fs.String("title", "test accuracy against training time", "the plot's title")
	every := fs.Duration("every", 0, "grid of training times (0: the runs' median spacing of evaluations)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("no LABEL=PATTERN given")
	}
	var all []series
	for _, a := range fs.Args() {
		label, pattern, ok := strings.Cut(a, "=")
		if !ok || label == "" || pattern == "" {
			return fmt.Errorf("%q: want LABEL=PATTERN", a)
		}
		s, err := load(label, pattern)
		if err != nil {
			return err
		}
		all = append(all, s)
	}
	step := every.Seconds()
	if step <= 0 {
		step = medianSpacing(all)
	}
	if !(step > 0) {
		return errors.New("cannot tell the grid of training times: give -every")
	}
	grid := gridOf(all, step)
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	png := filepath.Join(*out, *name+".png")
	if err := writePlot(png, *title, all, grid, step); err != nil {
		return fmt.Errorf("figure: %s: %w", png, err)
	}
	md := filepath.Join(*out, *name+".md")
	f, err := os.Create(md)
	if err != nil {
		return err
	}
	writeTable(f, *title, all, grid, step)
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(w, "figure: %s, %s\n", png, md)
	return nil
}

// load reads the runs a pattern matches.
func load(label, pattern string) (series, error) {
	matches, err := filepath.Glob(pattern)
	if err != nil {
		return series{}, fmt.Errorf("%s: %w", pattern, err)
	}
	s := series{label: label}
	for _, m := range matches {
		csvs, _ := filepath.Glob(filepath.Join(m, "metrics.csv"))
		more, _ := filepath.Glob(filepath.Join(m, "run-*", "metrics.csv"))
		for _, path := range append(csvs, more...) {
			r, err := readRun(path)
			if err != nil {
				return s, err
			}
			s.runs = append(s.runs, r)
		}
	}
	if len(s.runs) == 0 {
		return s, fmt.Errorf("%s=%s: no metrics.csv with evaluations", label, pattern)
	}
	return s, nil
}

// readRun reads the whole-test-set evaluations of a metrics.csv.
func readRun(path string) (runData, error) {
	f, err := os.Open(path)
	if err != nil {
		return runData{}, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return runData{}, fmt.Errorf("%s: %w", path, err)
	}
	if len(rows) == 0 {
		return runData{}, fmt.Errorf("%s: empty", path)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	for _, h := range []string{"kind", "step", "accuracy", "train_seconds", "test_examples", "max_feasibility"} {
		if _, ok := col[h]; !ok {
			return runData{}, fmt.Errorf("%s: no column %q (train -time-limit writes train_seconds)", path, h)
		}
	}
	r := runData{path: path}
	most := 0
	for _, row := range rows[1:] {
		if row[col["kind"]] != "test" {
			continue
		}
		n, _ := strconv.Atoi(row[col["test_examples"]])
		most = max(most, n)
	}
	for i, row := range rows[1:] {
		if row[col["kind"]] != "test" {
			continue
		}
		if n, _ := strconv.Atoi(row[col["test_examples"]]); n < most {
			continue // an evaluation on a subset
		}
		e := evaluation{feasibility: row[col["max_feasibility"]]}
		var errs [3]error
		e.step, errs[0] = strconv.Atoi(row[col["step"]])
		e.accuracy, errs[1] = strconv.ParseFloat(row[col["accuracy"]], 64)
		e.train, errs[2] = strconv.ParseFloat(row[col["train_seconds"]], 64)
		if err := errors.Join(errs[:]...); err != nil {
			return runData{}, fmt.Errorf("%s: row %d: %w", path, i+2, err)
		}
		r.evals = append(r.evals, e)
	}
	if len(r.evals) == 0 {
		return runData{}, fmt.Errorf("%s: no whole-test-set evaluations", path)
	}
	return r, nil
}

// medianSpacing returns the median training time between consecutive
// evaluations of all runs.
func medianSpacing(all []series) float64 {
	var d []float64
	for _, s := range all {
		for _, r := range s.runs {
			for i := 1; i < len(r.evals); i++ {
				if g := r.evals[i].train - r.evals[i-1].train; g > 0 {
					d = append(d, g)
				}
			}
		}
	}
	if len(d) == 0 {
		return 0
	}
	sort.Float64s(d)
	// Evaluations fall just after each multiple of the interval: round to
	// the millisecond.
	return math.Round(d[len(d)/2]*1000) / 1000
}

// gridOf returns the times k*step up to the last time every run reached
// (within half a step, as at reads).
func gridOf(all []series, step float64) []float64 {
	end := math.Inf(1)
	for _, s := range all {
		for _, r := range s.runs {
			end = min(end, r.evals[len(r.evals)-1].train)
		}
	}
	var g []float64
	for k := 1; float64(k)*step <= end+step/2; k++ {
		g = append(g, float64(k)*step)
	}
	return g
}

// at returns a run's accuracy at training time t of a grid of step: its
// last evaluation before t + step/2 (an evaluation an interval asks for
// comes at the first step past its time), and whether there is one.
func (r runData) at(t, step float64) (float64, bool) {
	acc, ok := 0.0, false
	for _, e := range r.evals {
		if e.train >= t+step/2 {
			break
		}
		acc, ok = e.accuracy, true
	}
	return acc, ok
}

// stats returns the mean, lowest and highest accuracy of a series at t over
// the runs evaluated by then, and how many those are.
func (s series) stats(t, step float64) (mean, lo, hi float64, n int) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, r := range s.runs {
		if a, ok := r.at(t, step); ok {
			mean += a
			lo, hi = min(lo, a), max(hi, a)
			n++
		}
	}
	if n > 0 {
		mean /= float64(n)
	}
	return mean, lo, hi, n
}

var palette = []color.Color{
	color.RGBA{214, 39, 40, 255}, color.RGBA{31, 119, 180, 255}, color.RGBA{44, 160, 44, 255},
	color.RGBA{148, 103, 189, 255}, color.RGBA{255, 127, 14, 255},
}

// writePlot draws each series' mean accuracy (percent) against training
// seconds, with its lowest and highest as thin lines.
func writePlot(path, title string, all []series, grid []float64, step float64) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "training seconds"
	p.Y.Label.Text = "test accuracy (%)"
	p.Legend.Top, p.Legend.Left = false, false
	for i, s := range all {
		var mean, lo, hi plotter.XYs
		for _, t := range grid {
			m, l, h, n := s.stats(t, step)
			if n == 0 {
				continue
			}
			mean = append(mean, plotter.XY{X: t, Y: 100 * m})
			lo = append(lo, plotter.XY{X: t, Y: 100 * l})
			hi = append(hi, plotter.XY{X: t, Y: 100 * h})
		}
		if len(mean) == 0 {
			continue
		}
		c := palette[i%len(palette)]
		line, err := plotter.NewLine(mean)
		if err != nil {
			return err
		}
		line.Color, line.Width = c, vg.Points(2)
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("%s (mean of %d)", s.label, len(s.runs)), line)
		for _, b := range []plotter.XYs{lo, hi} {
			l, err := plotter.NewLine(b)
			if err != nil {
				return err
			}
			l.Color, l.Width, l.Dashes = c, vg.Points(0.6), []vg.Length{vg.Points(3), vg.Points(2)}
			p.Add(l)
		}
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// writeTable writes the accuracy at every grid time and each run's summary.
func writeTable(w io.Writer, title string, all []series, grid []float64, step float64) {
	fmt.Fprintf(w, "# %s\n\nTest accuracy (%%) on the whole test set at each %v of training time: mean over the runs, lowest to highest.\n\n",
		title, time.Duration(step*float64(time.Second)))
	fmt.Fprint(w, "| training seconds |")
	for _, s := range all {
		fmt.Fprintf(w, " %s |", s.label)
	}
	fmt.Fprint(w, "\n| --- |")
	for range all {
		fmt.Fprint(w, " --- |")
	}
	fmt.Fprintln(w)
	for _, t := range grid {
		fmt.Fprintf(w, "| %g |", math.Round(t*1000)/1000)
		for _, s := range all {
			m, lo, hi, n := s.stats(t, step)
			if n == 0 {
				fmt.Fprint(w, " |")
				continue
			}
			fmt.Fprintf(w, " %.2f (%.2f to %.2f) |", 100*m, 100*lo, 100*hi)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprint(w, "\n| run | steps | training seconds | steps/s | final accuracy (%) | max ‖WᵀW − I‖_F |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, s := range all {
		for _, r := range s.runs {
			e := r.evals[len(r.evals)-1]
			rate := 0.0
			if e.train > 0 {
				rate = float64(e.step) / e.train
			}
			fmt.Fprintf(w, "| %s: %s | %d | %.1f | %.1f | %.2f | %s |\n", s.label, runName(r.path), e.step, e.train, rate, 100*e.accuracy, e.feasibility)
		}
	}
}

// runName names a run by its folder, or by the folder that holds it where
// train named it run-<time>.
func runName(metrics string) string {
	dir := filepath.Dir(metrics)
	if b := filepath.Base(dir); strings.HasPrefix(b, "run-") {
		return filepath.Base(filepath.Dir(dir)) + "/" + b
	}
	return filepath.Base(dir)
}
