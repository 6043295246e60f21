package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// evaluation is a whole-test-set evaluation of a run.
type evaluation struct {
	train       float64 // training seconds
	step        int
	accuracy    float64 // in [0, 1]
	feasibility string
}

// axis is what an evaluation is plotted against: training seconds or steps.
type axis int

const (
	bySeconds axis = iota
	bySteps
)

// x returns the evaluation's coordinate on the axis.
func (e evaluation) x(a axis) float64 {
	if a == bySteps {
		return float64(e.step)
	}
	return e.train
}

// runLoad is what scripts/dnn_figure.sh recorded in load.txt beside a run:
// uptime's 1, 5 and 15-minute load averages before and after it, the cores
// busy over a few seconds just before it, the cores other processes used on
// average while it ran, and its flags (started or run under load).
type runLoad struct {
	known         bool
	cores         int
	before, after [3]float64
	busyBefore    float64 // cores, NaN where not recorded
	others        float64 // cores, NaN where not recorded
	flag          string  // "none" or the reasons, comma-separated
}

// flagged reports whether the run was recorded as made under load.
func (l runLoad) flagged() bool { return l.known && l.flag != "" && l.flag != "none" }

// runData is one run's evaluations, in order, and what was recorded
// beside it.
type runData struct {
	path     string
	evals    []evaluation
	examples int // test images of each evaluation (train's whole test set, or its -limit-test)
	load     runLoad
	command  string // the train command line (command.txt), if recorded
	id       string // the run's id and its parent run's, from run.json where there is one
	parent   string
}

// series is a label's runs.
type series struct {
	label string
	runs  []runData
}

// load reads the runs a pattern matches. A matched folder without a run
// that has evaluations (no metrics.csv, an empty one, one without a
// whole-test-set evaluation: a run that failed or never ran) is not
// counted, and warnings say so; a malformed metrics.csv, or a run that
// goes on from another run matched here (a child resumed in a seed's
// folder, which would count the parent's evaluations twice), is an error.
func load(label, pattern string) (s series, warnings []string, err error) {
	matches, err := filepath.Glob(pattern)
	if err != nil {
		return series{}, nil, fmt.Errorf("%s: %w", pattern, err)
	}
	s = series{label: label}
	for _, m := range matches {
		if fi, err := os.Stat(m); err != nil || !fi.IsDir() {
			continue // a file beside the run folders
		}
		files := metricsFiles(m)
		if len(files) == 0 {
			warnings = append(warnings, fmt.Sprintf("%s: %s holds no metrics.csv (in it or in a run-* folder): not counted (its run failed or never ran)", label, m))
		}
		for _, path := range files {
			r, err := readRun(path)
			if errors.Is(err, errNoEvaluations) {
				warnings = append(warnings, fmt.Sprintf("%s: %v: not counted", label, err))
				continue
			}
			if err != nil {
				return s, warnings, err
			}
			s.runs = append(s.runs, r)
		}
	}
	byID := map[string]string{}
	for _, r := range s.runs {
		if r.id == "" {
			continue
		}
		if p, ok := byID[r.id]; ok {
			return s, warnings, fmt.Errorf("%s=%s: %s and %s are one run (run id %s in their run.json): a run copied into two seeds' folders would count twice; keep one",
				label, pattern, p, filepath.Dir(r.path), r.id)
		}
		byID[r.id] = filepath.Dir(r.path)
	}
	for _, r := range s.runs {
		if p, ok := byID[r.parent]; ok && r.parent != "" {
			return s, warnings, fmt.Errorf("%s=%s: %s goes on from %s (its run.json's parent): its metrics.csv repeats the parent's evaluations, which would count twice; keep one of the two (a seed's folder holds one run)",
				label, pattern, filepath.Dir(r.path), p)
		}
	}
	if len(s.runs) == 0 {
		return s, warnings, fmt.Errorf("%s=%s: no metrics.csv with evaluations", label, pattern)
	}
	return s, warnings, nil
}

// errNoEvaluations is wrapped by readRun's error for a metrics.csv that
// holds no whole-test-set evaluation (empty, or a run that failed first).
var errNoEvaluations = errors.New("no whole-test-set evaluation")

// metricsFiles returns the metrics.csv of a run folder, or of the run
// folders (run-*) that a folder holds.
func metricsFiles(dir string) []string {
	csvs, _ := filepath.Glob(filepath.Join(dir, "metrics.csv"))
	more, _ := filepath.Glob(filepath.Join(dir, "run-*", "metrics.csv"))
	return append(csvs, more...)
}

// readRun reads the whole-test-set evaluations of a metrics.csv and the
// load.txt and command.txt found beside it or in the folder above.
func readRun(path string) (runData, error) {
	rows, col, err := readMetrics(path)
	if err != nil {
		return runData{}, err
	}
	r := runData{path: path}
	if r.evals, r.examples, err = wholeTestEvaluations(path, rows, col); err != nil {
		return runData{}, err
	}
	if len(r.evals) == 0 {
		return runData{}, fmt.Errorf("%s: %w", path, errNoEvaluations)
	}
	if r.id, r.parent, err = readRunIDs(filepath.Join(filepath.Dir(path), "run.json")); err != nil {
		return runData{}, err
	}
	dir := filepath.Dir(path)
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if r.load.known {
			break
		}
		if r.load, err = readLoad(filepath.Join(d, "load.txt")); err != nil {
			return runData{}, err
		}
	}
	r.command = readCommand(dir)
	return r, nil
}

// readMetrics returns the rows of a metrics.csv, its header first, and the
// index of each column, checking that it has the columns figure reads.
func readMetrics(path string) ([][]string, map[string]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(rows) == 0 {
		return nil, nil, fmt.Errorf("%s: empty: %w", path, errNoEvaluations)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	for _, h := range []string{"kind", "step", "accuracy", "train_seconds", "test_examples", "max_feasibility"} {
		if _, ok := col[h]; !ok {
			return nil, nil, fmt.Errorf("%s: no column %q (train -time-limit writes train_seconds)", path, h)
		}
	}
	return rows, col, nil
}

// wholeTestEvaluations returns the evaluations among the rows of
// metrics.csv path made on the most test images (the whole test set), and
// that count, checking every row and that the evaluations go forward.
func wholeTestEvaluations(path string, rows [][]string, col map[string]int) ([]evaluation, int, error) {
	most := 0
	examples := make([]int, len(rows))
	for i, row := range rows[1:] {
		if err := checkRow(row, col); err != nil {
			return nil, 0, fmt.Errorf("%s: row %d: %w", path, i+2, err)
		}
		if row[col["kind"]] == "test" {
			examples[i+1], _ = strconv.Atoi(row[col["test_examples"]]) // checked
			most = max(most, examples[i+1])
		}
	}
	var evals []evaluation
	for i, row := range rows[1:] {
		if row[col["kind"]] != "test" || examples[i+1] < most {
			continue // a training row, or an evaluation on a subset
		}
		e := evaluation{feasibility: row[col["max_feasibility"]]}
		e.step, _ = strconv.Atoi(row[col["step"]]) // checked, as the two below
		e.accuracy, _ = strconv.ParseFloat(row[col["accuracy"]], 64)
		e.train, _ = strconv.ParseFloat(row[col["train_seconds"]], 64)
		if n := len(evals); n > 0 && (e.step < evals[n-1].step || e.train < evals[n-1].train) {
			return nil, 0, fmt.Errorf("%s: row %d: step %d at %g training seconds comes after step %d at %g: the evaluations must go forward",
				path, i+2, e.step, e.train, evals[n-1].step, evals[n-1].train)
		}
		evals = append(evals, e)
	}
	return evals, most, nil
}

// checkRow checks a row of a metrics.csv: its kind, its step, and for a
// test row its accuracy (a fraction in [0, 1]), its training seconds and
// its count of test images.
func checkRow(row []string, col map[string]int) error {
	kind := row[col["kind"]]
	if kind != "train" && kind != "test" {
		return fmt.Errorf("kind %q: want train or test", kind)
	}
	if n, err := strconv.Atoi(row[col["step"]]); err != nil || n < 0 {
		return fmt.Errorf("step %q: want a count of steps", row[col["step"]])
	}
	if kind == "train" {
		return nil
	}
	if a, err := strconv.ParseFloat(row[col["accuracy"]], 64); err != nil || !(a >= 0 && a <= 1) {
		return fmt.Errorf("accuracy %q: want a fraction from 0 to 1", row[col["accuracy"]])
	}
	if s, err := strconv.ParseFloat(row[col["train_seconds"]], 64); err != nil || !(s >= 0) || math.IsInf(s, 0) {
		return fmt.Errorf("train_seconds %q: want a time in seconds, at least 0", row[col["train_seconds"]])
	}
	if n, err := strconv.Atoi(row[col["test_examples"]]); err != nil || n < 1 {
		return fmt.Errorf("test_examples %q: want a count of test images", row[col["test_examples"]])
	}
	return nil
}

// readRunIDs returns the run's id and its parent run's from the run.json
// train writes beside metrics.csv, or "" where there is none.
func readRunIDs(path string) (id, parent string, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", nil
	}
	if err != nil {
		return "", "", err
	}
	var m struct {
		ID     string `json:"id"`
		Parent *struct {
			Run string `json:"run"`
		} `json:"parent"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return "", "", fmt.Errorf("%s: %w", path, err)
	}
	if m.Parent != nil {
		parent = m.Parent.Run
	}
	return m.ID, parent, nil
}

// readCommand returns the train command recorded in command.txt beside a
// run or in the folder above, or "".
func readCommand(dir string) string {
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if b, err := os.ReadFile(filepath.Join(d, "command.txt")); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	return ""
}

// readLoad reads a load.txt: lines of a key and its values ("cores 2",
// "before 0.10 0.20 0.30", "busy_before 0.05", "after ...", "others 0.02",
// "flag none"), # starting a comment. A missing file is no error (known
// stays false); a malformed one is.
func readLoad(path string) (runLoad, error) {
	l := runLoad{busyBefore: math.NaN(), others: math.NaN()}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return l, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if err := l.set(fields[0], fields[1:]); err != nil {
			return l, fmt.Errorf("%s:%d: %q: %w", path, n, sc.Text(), err)
		}
	}
	if err := sc.Err(); err != nil {
		return l, fmt.Errorf("%s: %w", path, err)
	}
	l.known = true
	return l, nil
}

// set sets the value of key of a load.txt line to vals; an unknown key is
// ignored.
func (l *runLoad) set(key string, vals []string) error {
	var err error
	switch key {
	case "cores":
		if len(vals) != 1 {
			return errors.New("want one value")
		}
		if l.cores, err = strconv.Atoi(vals[0]); err != nil || l.cores < 1 {
			return errors.New("want a positive count of cores")
		}
	case "before", "after":
		if len(vals) != 3 {
			return errors.New("want three load averages")
		}
		dst := &l.before
		if key == "after" {
			dst = &l.after
		}
		for i, v := range vals {
			if dst[i], err = strconv.ParseFloat(v, 64); err != nil {
				return err
			}
		}
	case "busy_before", "others":
		if len(vals) != 1 {
			return errors.New("want one value")
		}
		v, err := strconv.ParseFloat(vals[0], 64)
		if err != nil {
			return err
		}
		if key == "others" {
			l.others = v
		} else {
			l.busyBefore = v
		}
	case "flag":
		l.flag = strings.Join(vals, " ")
	}
	return nil
}

// medianSpacing returns the median distance on the axis between
// consecutive evaluations of the given series' runs.
func medianSpacing(all []series, a axis) float64 {
	var d []float64
	for _, s := range all {
		for _, r := range s.runs {
			for i := 1; i < len(r.evals); i++ {
				if g := r.evals[i].x(a) - r.evals[i-1].x(a); g > 0 {
					d = append(d, g)
				}
			}
		}
	}
	if len(d) == 0 {
		return 0
	}
	sort.Float64s(d)
	m := d[len(d)/2]
	if a == bySeconds {
		// Evaluations fall just after each multiple of the interval:
		// round to the millisecond.
		return math.Round(m*1000) / 1000
	}
	return m
}

// gridOf returns the points k*step on the axis up to the last one every
// run reached (within half a step, as at reads).
func gridOf(all []series, a axis, step float64) []float64 {
	if !(step > 0) {
		return nil
	}
	end := gridEnd(all, a)
	var g []float64
	for k := 1; float64(k)*step <= end+step/2; k++ {
		g = append(g, float64(k)*step)
	}
	return g
}

// gridEnd returns the point on the axis that every run reached: the
// shortest run's last evaluation.
func gridEnd(all []series, a axis) float64 {
	end := math.Inf(1)
	for _, s := range all {
		for _, r := range s.runs {
			end = min(end, r.evals[len(r.evals)-1].x(a))
		}
	}
	return end
}

// at returns a run's accuracy at point x of a grid of step on the axis:
// its last evaluation before x + step/2 (an evaluation an interval asks for
// comes at the first step past its time), and whether there is one.
func (r runData) at(a axis, x, step float64) (float64, bool) {
	acc, ok := 0.0, false
	for _, e := range r.evals {
		if e.x(a) >= x+step/2 {
			break
		}
		acc, ok = e.accuracy, true
	}
	return acc, ok
}

// stats returns the mean, lowest and highest accuracy of a series at x
// over the runs evaluated by then, and how many those are.
func (s series) stats(a axis, x, step float64) (mean, lo, hi float64, n int) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, r := range s.runs {
		if acc, ok := r.at(a, x, step); ok {
			mean += acc
			lo, hi = min(lo, acc), max(hi, acc)
			n++
		}
	}
	if n > 0 {
		mean /= float64(n)
	}
	return mean, lo, hi, n
}

// final returns a run's last evaluation.
func (r runData) final() evaluation { return r.evals[len(r.evals)-1] }

// stepsPerSecond returns a run's steps per second of training time.
func (r runData) stepsPerSecond() float64 {
	e := r.final()
	if e.train <= 0 {
		return 0
	}
	return float64(e.step) / e.train
}

// rate formats a steps-per-second figure with three significant digits (every
// integer digit from 1000 up) and no exponent, so that a slow model's 0.133
// and a fast one's 36.4 both show what they measured.
func rate(x float64) string {
	if x <= 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	// The exponent of x rounded to three digits, read from its 'e' form:
	// math.Log10 is inexact at powers of ten, and 9.996 rounds to 10.0.
	// A finite positive x always has one.
	e := strconv.FormatFloat(x, 'e', 2, 64)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	return strconv.FormatFloat(x, 'f', max(0, 2-exp), 64)
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

// checkDistinct refuses a run counted under two labels: the same folder, or
// the same run id, matched by two labels' patterns.
func checkDistinct(all []series) error {
	seen := map[string]string{} // a run's folder or "id " + its id -> its label
	for _, s := range all {
		for _, r := range s.runs {
			dir, err := filepath.Abs(filepath.Dir(r.path))
			if err != nil {
				dir = filepath.Dir(r.path)
			}
			keys := []string{dir}
			if r.id != "" {
				keys = append(keys, "id "+r.id)
			}
			for _, k := range keys {
				if l, ok := seen[k]; ok && l != s.label {
					return fmt.Errorf("%s is a run of label %s and of label %s (their patterns both match it, or it was copied): each run counts under one label", filepath.Dir(r.path), l, s.label)
				}
				seen[k] = s.label
			}
		}
	}
	return nil
}
