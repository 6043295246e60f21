package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// gridPoint is one run of a step-size grid: the value of the grid's train
// flag in the run's command, and its final evaluation (or why it has none).
type gridPoint struct {
	name   string
	value  float64
	run    runData
	failed string // why there is no evaluation; "" when there is one
}

// flagValue returns the value of -name (or --name) in a command line.
func flagValue(command, name string) (string, bool) {
	f := strings.Fields(command)
	for i, a := range f {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
		if a == name && i+1 < len(f) {
			return f[i+1], true
		}
	}
	return "", false
}

// loadGrid reads the grid points a pattern matches: each matched folder is
// one point, whose command.txt gives the value of -flag. A point whose run
// has no whole-test-set evaluation (it diverged or failed) is kept, with
// the reason.
func loadGrid(label, pattern, flag string) ([]gridPoint, error) {
	matches, err := filepath.Glob(pattern)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pattern, err)
	}
	var ps []gridPoint
	for _, m := range matches {
		cmd, err := os.ReadFile(filepath.Join(m, "command.txt"))
		if err != nil {
			continue // not a run folder of the script
		}
		s, ok := flagValue(string(cmd), flag)
		if !ok {
			return nil, fmt.Errorf("%s: its command.txt has no -%s", m, flag)
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: -%s %q: %w", m, flag, s, err)
		}
		p := gridPoint{name: filepath.Base(m), value: v}
		files := metricsFiles(m)
		switch {
		case len(files) == 0:
			p.failed = "no metrics.csv (see its log)"
		case len(files) > 1:
			return nil, fmt.Errorf("%s: %d runs in one grid point's folder", m, len(files))
		default:
			p.run, err = readRun(files[0])
			if errors.Is(err, errNoEvaluations) {
				p.failed = "no whole-test-set evaluation: diverged or failed (see its log)"
			} else if err != nil {
				return nil, err
			}
		}
		ps = append(ps, p)
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("%s=%s: no run folders with a command.txt", label, pattern)
	}
	return ps, nil
}

// bestPoint returns the index of the point with the highest final accuracy
// (the smaller value on a tie), or -1 where every point failed.
func bestPoint(ps []gridPoint) int {
	best := -1
	for i, p := range ps {
		if p.failed != "" {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		a, b := p.run.final().accuracy, ps[best].run.final().accuracy
		if a > b || (a == b && p.value < ps[best].value) {
			best = i
		}
	}
	return best
}

// writeGrid writes the grid's table, the best point of each label in bold.
func writeGrid(w io.Writer, title, flag string, labels []string, grids [][]gridPoint) {
	fmt.Fprintf(w, "# %s\n\nEach point is one run (the final whole-test-set evaluation); the best of each method, in bold, is the one its runs use.\n\n", title)
	fmt.Fprintf(w, "| method | -%s | final accuracy (%%) | steps | training seconds | steps/s |\n| --- | --- | --- | --- | --- | --- |\n", flag)
	for i, ps := range grids {
		best := bestPoint(ps)
		for j, p := range ps {
			if p.failed != "" {
				fmt.Fprintf(w, "| %s | %g | %s | | | |\n", labels[i], p.value, p.failed)
				continue
			}
			e := p.run.final()
			acc := fmt.Sprintf("%.2f", 100*e.accuracy)
			if j == best {
				acc = "**" + acc + "**"
			}
			fmt.Fprintf(w, "| %s | %g | %s | %d | %.1f | %s |\n", labels[i], p.value, acc, e.step, e.train, rate(p.run.stepsPerSecond()))
		}
	}
}
