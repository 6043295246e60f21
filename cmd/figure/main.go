// Command figure draws test accuracy against training time and against
// steps from train runs, the form of the RSDM paper's neural-network figure
// and of its appendix figure: for each labelled set of runs (seeds of one
// method), the mean over the runs and its band (lowest to highest) as PNG
// plots, and a Markdown page with the accuracy at every grid time and at
// fixed training times, each run's steps, steps per second, final accuracy,
// feasibility and the load recorded beside it, and optionally a verdict on
// one of the paper's claims computed from the runs.
//
// Usage:
//
//	figure -out DIR -name NAME [-title T] [-every 10s] [-at 30s,60s] [-claim sooner|above] LABEL=PATTERN [LABEL=PATTERN ...]
//	figure -grid lr -out DIR -name NAME LABEL=PATTERN [LABEL=PATTERN ...]
//
// PATTERN is a glob of run folders, or of folders holding run folders (what
// train -out writes), each with a metrics.csv that has train_seconds (train
// -time-limit and -eval-interval). A run's accuracy at grid time t is its
// last whole-test-set evaluation before t plus half the grid's step (the one
// an interval asks for comes at the first step past its time); against
// steps, each label has its own grid of steps, read the same way. A
// matched folder without a whole-test-set evaluation (no metrics.csv, an
// empty one: a run that failed or never ran) is left out with a warning on
// the page and on standard output; a malformed metrics.csv (a row of
// garbage, an accuracy outside [0, 1], evaluations going back in time) and
// a run that goes on from another matched run (train -resume of an older
// checkpoint into a seed's folder) are errors naming the file, and the row.
//
// scripts/dnn_figure.sh writes load.txt (the load averages before and after
// the run and its flags) and command.txt (the train command) into each
// run's folder; figure shows them where they are.
//
// -claim judges a claim of the first LABEL against the second: "sooner"
// (the paper's FFN claim: the first's mean reaches -reach of the better
// final mean at an earlier grid time, its band wholly above the second's
// there) or "above" (the paper's ViT claim: the first's mean is above at
// every grid time after the first evaluation, the bands apart); each comes
// out "holds", "does not hold" or "cannot tell", with the numbers, in
// NAME.md and on standard output as a line "verdict: ...".
//
// figure writes only new files: where NAME.png, NAME-steps.png or NAME.md
// (-grid: NAME.md) is in -out already, an earlier page's or the user's, it
// refuses (exit 2) before reading any run. The files are written into a
// temporary folder in -out and go into place by hard links, which never
// replace a file.
//
// -grid FLAG reads a step-size grid instead: each folder PATTERN matches is
// one run whose command.txt gives the value of train's -FLAG; NAME.md gets
// a table of every point and standard output a line "best LABEL VALUE" for
// each label, the value whose run ended with the highest test accuracy.
package main

import (
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

func main() { os.Exit(mainCode(os.Args[1:], os.Stdout, os.Stderr)) }

// mainCode runs the command and returns its exit status: 0 (also for -h,
// whose usage goes to stdout), 2 for flags that cannot be parsed, 1 for
// any other error, which it writes to stderr in one line.
func mainCode(args []string, stdout, stderr io.Writer) int {
	err := run(args, stdout)
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, new(*usageError)):
		fmt.Fprintln(stderr, "figure:", err)
		return 2
	}
	fmt.Fprintln(stderr, "figure:", err)
	return 1
}

// usageError is a flag the flag package could not parse (it has printed
// the usage).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// maxGrid bounds the grid times of a page: each is a row of its table.
const maxGrid = 10000

// run runs the command with arguments args, writing its output to w.
func run(args []string, w io.Writer) error {
	o, err := parseArgs(args, w)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	files := []string{o.name + ".png", o.name + "-steps.png", o.name + ".md"}
	if o.grid != "" {
		files = []string{o.name + ".md"}
	}
	if err := checkNew(o.out, files); err != nil {
		return err
	}
	st, err := newStaging(o.out, o.name)
	if err != nil {
		return err
	}
	defer st.remove()
	if o.grid != "" {
		return runGrid(w, st, o.name+".md", o.title, o.grid, o.labels, o.patterns)
	}
	var all []series
	var warnings []string
	for i := range o.labels {
		s, warned, err := load(o.labels[i], o.patterns[i])
		for _, warning := range warned {
			fmt.Fprintln(w, "figure: warning:", warning)
		}
		if err != nil {
			return err
		}
		all, warnings = append(all, s), append(warnings, warned...)
	}
	if err := checkDistinct(all); err != nil {
		return err
	}
	return drawFigure(w, st, o, files, all, warnings)
}

// options are the command's flags and its LABEL=PATTERN arguments.
type options struct {
	out, name, title, at, claim, grid string
	every                             time.Duration
	reach                             float64
	minSeeds                          int
	labels, patterns                  []string
}

// parseArgs parses and checks the command's arguments; the usage goes to
// w.
func parseArgs(args []string, w io.Writer) (options, error) {
	fs := flag.NewFlagSet("figure", flag.ContinueOnError)
	fs.SetOutput(w)
	out := fs.String("out", ".", "folder for NAME.png, NAME-steps.png and NAME.md")
	name := fs.String("name", "figure", "base name of the files")
	title := fs.String("title", "test accuracy", "the page's and the plots' title")
	every := fs.Duration("every", 0, "grid of training times (0: the -eval-interval of the runs' command.txt, else their median spacing of evaluations)")
	at := fs.String("at", "", "comma-separated training times of the fixed-times table (default: a quarter, half, three quarters and all of the grid)")
	claim := fs.String("claim", "", "judge a claim of the first LABEL against the second: sooner (reaches high accuracy sooner) or above (stays above throughout)")
	reach := fs.Float64("reach", 0.95, "-claim sooner: the fraction of the better final mean that counts as high accuracy")
	minSeeds := fs.Int("min-seeds", 3, "-claim: the fewest runs of each label a verdict other than \"cannot tell\" needs")
	grid := fs.String("grid", "", "read a step-size grid over this train flag (e.g. lr) instead of drawing a figure")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return options{}, err
	} else if err != nil {
		return options{}, &usageError{err}
	}
	if fs.NArg() == 0 {
		return options{}, errors.New("no LABEL=PATTERN given")
	}
	o := options{out: *out, name: *name, title: *title, at: *at, claim: *claim, grid: *grid,
		every: *every, reach: *reach, minSeeds: *minSeeds}
	for _, a := range fs.Args() {
		label, pattern, ok := strings.Cut(a, "=")
		if !ok || label == "" || pattern == "" {
			return options{}, fmt.Errorf("%q: want LABEL=PATTERN", a)
		}
		o.labels, o.patterns = append(o.labels, label), append(o.patterns, pattern)
	}
	return o, o.check()
}

// check checks the flags' values.
func (o options) check() error {
	switch o.claim {
	case "", "sooner", "above":
	default:
		return fmt.Errorf("-claim %q: want sooner or above", o.claim)
	}
	if o.claim != "" && len(o.labels) < 2 {
		return fmt.Errorf("-claim %s compares two labels; %d given", o.claim, len(o.labels))
	}
	if !(o.reach > 0 && o.reach <= 1) {
		return fmt.Errorf("-reach %v: want a fraction in (0, 1]", o.reach)
	}
	switch {
	case o.every < 0:
		return fmt.Errorf("-every %v: want a positive grid step (or 0: from the runs)", o.every)
	case o.minSeeds < 1:
		return fmt.Errorf("-min-seeds %d: want at least 1", o.minSeeds)
	case o.name == "" || o.name == "." || o.name == ".." || strings.ContainsAny(o.name, `/\`):
		return fmt.Errorf("-name %q: want a file name without a folder (NAME.png, NAME.md go into -out)", o.name)
	case strings.ContainsAny(o.title, "\r\n"):
		return fmt.Errorf("-title %q: want one line", o.title)
	case o.grid != "" && (strings.HasPrefix(o.grid, "-") || strings.ContainsAny(o.grid, "= \t\r\n")):
		return fmt.Errorf("-grid %q: want the name of a train flag, such as lr", o.grid)
	}
	return nil
}

// drawFigure writes the plots and the page of the runs all (files: NAME.png,
// NAME-steps.png and NAME.md) into st, with the verdict of o's claim, puts
// them into place and names them on w.
func drawFigure(w io.Writer, st *staging, o options, files []string, all []series, warnings []string) error {
	step, err := gridStep(all, o.every)
	if err != nil {
		return err
	}
	times := gridOf(all, bySeconds, step)
	fixed, err := fixedTimes(o.at, times)
	if err != nil {
		return err
	}
	if err := writePlot(st.path(files[0]), o.title+" against training time", all, bySeconds, step); err != nil {
		return fmt.Errorf("%s: %w", files[0], err)
	}
	if err := writePlot(st.path(files[1]), o.title+" against steps", all, bySteps, 0); err != nil {
		return fmt.Errorf("%s: %w", files[1], err)
	}
	var v *verdict
	switch o.claim {
	case "sooner":
		x := soonerVerdict(all[0], all[1], times, step, o.reach, o.minSeeds)
		v = &x
	case "above":
		x := aboveVerdict(all[0], all[1], times, step, o.minSeeds)
		v = &x
	}
	f, err := os.Create(st.path(files[2]))
	if err != nil {
		return err
	}
	writeTable(f, o.title, o.name, all, times, step, fixed, v, warnings)
	if err := f.Close(); err != nil {
		return err
	}
	placed, err := st.place(files)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "figure: %s\n", strings.Join(placed, ", "))
	if v != nil {
		fmt.Fprintf(w, "verdict: %s\n", v)
	}
	return nil
}

// gridStep returns the step in seconds of the grid of training times:
// every, else the runs' -eval-interval, else their median spacing of
// evaluations; an error where none is known or the grid is too fine.
func gridStep(all []series, every time.Duration) (float64, error) {
	step, from := every.Seconds(), "-every"
	if step <= 0 {
		step, from = commandInterval(all), "the runs' -eval-interval"
	}
	if !(step > 0) {
		step, from = medianSpacing(all, bySeconds), "the runs' spacing of evaluations"
	}
	if !(step > 0) {
		return 0, errors.New("cannot tell the grid of training times: give -every")
	}
	if end := gridEnd(all, bySeconds); end/step > maxGrid {
		return 0, fmt.Errorf("a grid step of %v (%s) makes %.3g grid times over the shortest run's %gs of training, more than %d: give a larger -every",
			time.Duration(step*float64(time.Second)), from, end/step, end, maxGrid)
	}
	return step, nil
}

// runGrid reads a step-size grid, writes its table and prints each label's
// best value.
func runGrid(w io.Writer, st *staging, name, title, flag string, labels, patterns []string) error {
	var grids [][]gridPoint
	for i := range labels {
		ps, err := loadGrid(labels[i], patterns[i], flag)
		if err != nil {
			return err
		}
		grids = append(grids, ps)
	}
	f, err := os.Create(st.path(name))
	if err != nil {
		return err
	}
	writeGrid(f, title, flag, labels, grids)
	if err := f.Close(); err != nil {
		return err
	}
	placed, err := st.place([]string{name})
	if err != nil {
		return err
	}
	md := placed[0]
	for i, ps := range grids {
		b := bestPoint(ps)
		if b < 0 {
			return fmt.Errorf("%s: every point of the grid failed (see %s)", labels[i], md)
		}
		fmt.Fprintf(w, "best %s %g\n", labels[i], ps[b].value)
	}
	return nil
}

// fixedTimes parses -at, or picks a quarter, half, three quarters and all
// of the grid; every time must lie on the grid's span.
func fixedTimes(at string, grid []float64) ([]float64, error) {
	if len(grid) == 0 {
		return nil, nil
	}
	end := grid[len(grid)-1]
	if at == "" {
		var ts []float64
		for _, q := range []int{1, 2, 3, 4} {
			t := grid[max(len(grid)*q/4-1, 0)]
			if len(ts) == 0 || ts[len(ts)-1] != t {
				ts = append(ts, t)
			}
		}
		return ts, nil
	}
	var ts []float64
	for _, s := range strings.Split(at, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("-at: %w", err)
		}
		if t := d.Seconds(); t <= 0 || t > end {
			return nil, fmt.Errorf("-at %v: want a time within the grid, which ends at %gs (the shortest run)", d, end)
		}
		ts = append(ts, d.Seconds())
	}
	return ts, nil
}

// commandInterval returns the -eval-interval, in seconds, that every run's
// recorded command gives, or 0 where they do not all give the same one (a
// run evaluated only once has no spacing to read the grid from).
func commandInterval(all []series) float64 {
	iv := ""
	for _, s := range all {
		for _, r := range s.runs {
			v, ok := flagValue(r.command, "eval-interval")
			if !ok || (iv != "" && v != iv) {
				return 0
			}
			iv = v
		}
	}
	d, err := time.ParseDuration(iv)
	if err != nil {
		return 0
	}
	return d.Seconds()
}

var palette = []color.Color{
	color.RGBA{214, 39, 40, 255}, color.RGBA{31, 119, 180, 255}, color.RGBA{44, 160, 44, 255},
	color.RGBA{148, 103, 189, 255}, color.RGBA{255, 127, 14, 255},
}

// writePlot draws each series' mean accuracy (percent) against the axis,
// with the band from its lowest to its highest run shaded. Against
// seconds all series share the grid of step; against steps each has its
// own, of its median spacing of evaluations (or one point, at its shortest
// run's end, where its runs were evaluated once).
func writePlot(path, title string, all []series, a axis, step float64) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "training seconds"
	if a == bySteps {
		p.X.Label.Text = "steps"
	}
	p.Y.Label.Text = "test accuracy (%)"
	p.Legend.Top, p.Legend.Left = false, false
	p.X.Min = 0
	grid := gridOf(all, a, step)
	for i, s := range all {
		if a == bySteps {
			one := []series{s}
			if step = medianSpacing(one, a); !(step > 0) {
				step = math.Inf(1)
				for _, r := range s.runs {
					step = min(step, r.final().x(a))
				}
			}
			grid = gridOf(one, a, step)
		}
		var mean, lo, hi plotter.XYs
		for _, x := range grid {
			m, l, h, n := s.stats(a, x, step)
			if n < len(s.runs) {
				continue
			}
			mean = append(mean, plotter.XY{X: x, Y: 100 * m})
			lo = append(lo, plotter.XY{X: x, Y: 100 * l})
			hi = append(hi, plotter.XY{X: x, Y: 100 * h})
		}
		if len(mean) == 0 {
			continue
		}
		c := palette[i%len(palette)]
		if len(mean) > 1 {
			ring := append(plotter.XYs{}, hi...)
			for k := len(lo) - 1; k >= 0; k-- {
				ring = append(ring, lo[k])
			}
			band, err := plotter.NewPolygon(ring)
			if err != nil {
				return err
			}
			r, g, b, _ := c.RGBA()
			band.Color = color.NRGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), 60}
			band.LineStyle.Width = 0
			p.Add(band)
		}
		line, err := plotter.NewLine(mean)
		if err != nil {
			return err
		}
		line.Color, line.Width = c, vg.Points(2)
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("%s (mean of %d, band: lowest to highest)", s.label, len(s.runs)), line)
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// cell formats a series' mean and band at a training time.
func cell(s series, t, step float64) string {
	m, lo, hi, n := s.stats(bySeconds, t, step)
	switch {
	case n == 0:
		return ""
	case n < len(s.runs):
		return fmt.Sprintf("%.2f (%.2f to %.2f; %d of %d runs)", 100*m, 100*lo, 100*hi, n, len(s.runs))
	}
	return fmt.Sprintf("%.2f (%.2f to %.2f)", 100*m, 100*lo, 100*hi)
}

// writeTable writes the page: the plots, the verdict, the accuracy at the
// fixed times and at every grid time, and each run's summary.
func writeTable(w io.Writer, title, name string, all []series, grid []float64, step float64, fixed []float64, v *verdict, warnings []string) {
	fmt.Fprintf(w, "# %s\n\n", title)
	for _, s := range warnings {
		fmt.Fprintf(w, "**Warning:** %s.\n\n", s)
	}
	fmt.Fprintf(w, "![%s against training time](%s.png)\n\n![%s against steps](%s-steps.png)\n\n", title, name, title, name)
	if v != nil {
		fmt.Fprintf(w, "**Verdict: %s: %s.** %s.\n\n", v.claim, v.outcome, upperFirst(v.detail))
	}
	header := func(first string) {
		fmt.Fprintf(w, "| %s |", first)
		for _, s := range all {
			fmt.Fprintf(w, " %s |", s.label)
		}
		if len(all) == 2 {
			fmt.Fprintf(w, " %s − %s (points) |", all[0].label, all[1].label)
		}
		fmt.Fprint(w, "\n| --- |")
		for range all {
			fmt.Fprint(w, " --- |")
		}
		if len(all) == 2 {
			fmt.Fprint(w, " --- |")
		}
		fmt.Fprintln(w)
	}
	row := func(t float64) {
		fmt.Fprintf(w, "| %g |", math.Round(t*1000)/1000)
		for _, s := range all {
			fmt.Fprintf(w, " %s |", cell(s, t, step))
		}
		if len(all) == 2 {
			a, _, _, na := all[0].stats(bySeconds, t, step)
			b, _, _, nb := all[1].stats(bySeconds, t, step)
			if na > 0 && nb > 0 {
				fmt.Fprintf(w, " %+.2f |", 100*(a-b))
			} else {
				fmt.Fprint(w, " |")
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "Test accuracy (%%) on %s at fixed training times: mean over the runs (lowest to highest).\n\n", evaluationSet(all))
	header("training seconds")
	for _, t := range fixed {
		row(t)
	}
	fmt.Fprint(w, "\n| run | steps | training seconds | steps/s | final accuracy (%) | max ‖WᵀW − I‖_F | load before (1, 5, 15 min) | load after | other processes during the run (cores) | flag |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, s := range all {
		for _, r := range s.runs {
			e := r.final()
			fmt.Fprintf(w, "| %s: %s | %d | %.1f | %s | %.2f | %s | %s |\n", s.label, runName(r.path), e.step, e.train, rate(r.stepsPerSecond()), 100*e.accuracy, e.feasibility, loadCells(r.load))
		}
	}
	fmt.Fprintf(w, "\nTest accuracy (%%) at each %v of training time: mean over the runs (lowest to highest).\n\n", time.Duration(step*float64(time.Second)))
	header("training seconds")
	for _, t := range grid {
		row(t)
	}
}

// evaluationSet says what the runs' evaluations were made on: "the N test
// images of every evaluation", or each run's count where they differ.
func evaluationSet(all []series) string {
	counts := map[int]bool{}
	var names []string
	for _, s := range all {
		for _, r := range s.runs {
			counts[r.examples] = true
			names = append(names, fmt.Sprintf("%s %d", runName(r.path), r.examples))
		}
	}
	if len(counts) == 1 {
		for n := range counts {
			return fmt.Sprintf("the %d test images of every evaluation", n)
		}
	}
	return "each run's test images (" + strings.Join(names, ", ") + ")"
}

// loadCells formats a run's recorded load as four table cells.
func loadCells(l runLoad) string {
	if !l.known {
		return "not recorded | | |"
	}
	avg := func(a [3]float64) string { return fmt.Sprintf("%.2f, %.2f, %.2f", a[0], a[1], a[2]) }
	others := ""
	if !math.IsNaN(l.others) {
		others = fmt.Sprintf("%.2f", l.others)
	}
	flag := l.flag
	if l.flagged() {
		flag = "**" + flag + "**"
	}
	before := avg(l.before)
	if !math.IsNaN(l.busyBefore) {
		before += fmt.Sprintf("; %.2f cores busy at the start", l.busyBefore)
	}
	return fmt.Sprintf("%s | %s | %s | %s", before, avg(l.after), others, flag)
}

// upperFirst capitalizes the first letter of a sentence.
func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
