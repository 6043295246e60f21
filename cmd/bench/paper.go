package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/manifold"
)

// paperRun is one curve of an experiment.
type paperRun struct {
	label  string
	method string
	lr     float64 // 0: the published step size, or tuned on the grid
	r      int     // 0: the experiment's
	seed   uint64  // 0: -seed
}

// claim is a statement of the paper that an experiment checks: the run
// labelled a is faster than the run labelled b.
type claim struct {
	a, b, text string
}

// paperExp is one of the paper's experiments.
type paperExp struct {
	id, title string
	s         setting
	runs      []paperRun
	claims    []claim
}

func run1(label, method string) paperRun { return paperRun{label: label, method: method} }

// paperExperiments lists the paper's experiments with their sizes scaled by
// scale (1: the paper's).
func paperExperiments(scale float64) []paperExp {
	sc := paperScale(scale)
	exps := figure1Experiments(sc)
	exps = append(exps, figure3Experiments(sc)...)
	return append(exps, appendixExperiments(sc)...)
}

// paperScale is the factor applied to the paper's sizes.
type paperScale float64

// size returns v scaled, at least 2.
func (sc paperScale) size(v int) int { return max(2, int(math.Round(float64(v)*float64(sc)))) }

// procrustes returns the Procrustes setting of the paper's n and r, scaled.
func (sc paperScale) procrustes(n, r int) setting {
	return setting{name: "procrustes", n: sc.size(n), p: sc.size(n), r: sc.size(r), lrRGD: 0.5, lrP: 1, lrO: 1}
}

// pca returns the PCA setting of the paper's n, p and r, scaled.
func (sc paperScale) pca(n, p, r int) setting {
	return setting{name: "pca", n: sc.size(n), p: sc.size(p), r: min(sc.size(r), sc.size(n)), lrRGD: 0.1, lrP: 1.5, lrO: 1.5}
}

// beatsRGD are the claims that RSDM, either sampling, is faster than RGD.
func beatsRGD() []claim {
	return []claim{{"RSDM-P", "RGD", "RSDM-P is faster than RGD"}, {"RSDM-O", "RGD", "RSDM-O is faster than RGD"}}
}

// figure1Experiments are Figure 1's: every method on Procrustes and PCA at
// two sizes each.
func figure1Experiments(sc paperScale) []paperExp {
	fig1 := []paperRun{run1("RGD", "rgd"), run1("RSDM-P", "rsdm-p"), run1("RSDM-O", "rsdm-o"), run1("RCD", "rcd"),
		run1("TSD", "tsd"), run1("PCAL", "pcal"), run1("Landing", "landing"), run1("hybrid", "hybrid")}
	// At n = p = 2000 the paper dropped RCD ("overly long runtime"); TSD is
	// the same method there.
	fig1b := append([]paperRun{}, fig1[:3]...)
	fig1b = append(fig1b, fig1[4:]...)
	beatsRGD := beatsRGD()
	return []paperExp{
		{id: "fig1a", title: "Figure 1(a): Procrustes, n = p = 200, r = 150", s: sc.procrustes(200, 150), runs: fig1,
			claims: []claim{{"RSDM-P", "RCD", "RCD is notably slower than the others in runtime"}, {"RGD", "RCD", "RCD is slower than RGD"}}},
		{id: "fig1b", title: "Figure 1(b): Procrustes, n = p = 2000, r = 900", s: sc.procrustes(2000, 900), runs: fig1b, claims: beatsRGD},
		{id: "fig1c", title: "Figure 1(c): PCA, n = 2000, p = 1500, r = 700", s: sc.pca(2000, 1500, 700), runs: fig1,
			claims: append(beatsRGD, claim{"RSDM-P", "Landing", "RSDM is the fastest of all baselines (vs Landing)"}, claim{"RSDM-P", "PCAL", "RSDM is the fastest of all baselines (vs PCAL)"})},
		{id: "fig1d", title: "Figure 1(d): PCA, n = 3000, p = 2500, r = 1000", s: sc.pca(3000, 2500, 1000), runs: fig1, claims: beatsRGD},
	}
}

// figure3Experiments are Figure 3's: PCA (2000, 1500) with other r, seeds
// and retractions.
func figure3Experiments(sc paperScale) []paperExp {
	varyR := []paperRun{run1("RGD", "rgd")}
	var rClaims []claim
	for _, r := range []int{300, 500, 700, 900} {
		l := fmt.Sprintf("RSDM-P r=%d", sc.size(r))
		varyR = append(varyR, paperRun{label: l, method: "rsdm-p", r: sc.size(r)})
		rClaims = append(rClaims, claim{l, "RGD", "RSDM beats RGD for every r tried (r = " + fmt.Sprint(sc.size(r)) + ")"})
	}
	varySeed := []paperRun{run1("RGD", "rgd")}
	var seedClaims []claim
	for _, seed := range []uint64{1, 2, 3} {
		l := fmt.Sprintf("RSDM-P seed %d", seed)
		varySeed = append(varySeed, paperRun{label: l, method: "rsdm-p", seed: seed})
		seedClaims = append(seedClaims, claim{l, "RGD", fmt.Sprintf("RSDM beats RGD for every sampling seed (seed %d)", seed)})
	}
	var varyRet []paperRun
	var retClaims []claim
	for _, ret := range manifold.Retractions {
		rgd, rsdm := "rgd", "rsdm-p"
		if ret != manifold.QR {
			rgd, rsdm = "rgd-"+ret.String(), "rsdm-p-"+ret.String()
		}
		varyRet = append(varyRet, run1("RGD "+ret.String(), rgd), run1("RSDM-P "+ret.String(), rsdm))
		retClaims = append(retClaims, claim{"RSDM-P " + ret.String(), "RGD " + ret.String(), "RSDM beats RGD with every retraction (" + ret.String() + ")"})
	}
	return []paperExp{
		{id: "fig3a", title: "Figure 3(a): PCA (2000, 1500), varying r", s: sc.pca(2000, 1500, 700), runs: varyR, claims: rClaims},
		{id: "fig3b", title: "Figure 3(b): PCA (2000, 1500), sampling seeds", s: sc.pca(2000, 1500, 700), runs: varySeed, claims: seedClaims},
		{id: "fig3c", title: "Figure 3(c): PCA (2000, 1500), retractions", s: sc.pca(2000, 1500, 700), runs: varyRet, claims: retClaims},
	}
}

// appendixExperiments are Figure 4's quadratic assignment and the
// appendix's: the p sweep with the hybrid, RSSM and OBCD, and momentum.
func appendixExperiments(sc paperScale) []paperExp {
	exps := []paperExp{{id: "fig4", title: "Figure 4: quadratic assignment, n = p = 1000",
		s:    setting{name: "qap", n: sc.size(1000), p: sc.size(1000), r: sc.size(500), lrRGD: 0.005, lrP: 0.005, lrO: 0.01, reference: true},
		runs: []paperRun{run1("RGD", "rgd"), run1("RSDM-P", "rsdm-p"), run1("RSDM-O", "rsdm-o")}, claims: beatsRGD()}}
	for _, p := range []int{100, 500, 1000, 1500, 1800} {
		s := sc.pca(2000, p, 700)
		exps = append(exps, paperExp{id: fmt.Sprintf("psweep-%d", p), title: fmt.Sprintf("Appendix, p sweep: PCA n = 2000, p = %d, r = 700", p), s: s,
			runs: []paperRun{run1("RGD", "rgd"), run1("RSDM-P", "rsdm-p"), run1("hybrid", "hybrid")},
			claims: []claim{{"RSDM-P", "RGD", fmt.Sprintf("RSDM beats RGD at p = %d (the paper: all p but 100)", sc.size(p))},
				{"hybrid", "RGD", "the hybrid is at least as fast as RGD"}, {"hybrid", "RSDM-P", "the hybrid is at least as fast as RSDM-P"}}})
	}
	return append(exps,
		paperExp{id: "rssm-obcd", title: "Appendix: RSSM and OBCD on PCA (2000, 1500), r = 700", s: sc.pca(2000, 1500, 700),
			runs:   []paperRun{run1("RSDM-P", "rsdm-p"), run1("RSDM-O", "rsdm-o"), run1("RSSM", "rssm"), run1("OBCD", "obcd")},
			claims: []claim{{"RSDM-P", "RSSM", "RSDM converges significantly faster than RSSM"}, {"RSDM-P", "OBCD", "RSDM converges significantly faster than OBCD"}}},
		paperExp{id: "momentum", title: "Appendix: momentum on PCA (2000, 1500), r = 700", s: sc.pca(2000, 1500, 700),
			runs: []paperRun{{label: "RGD-M", method: "rgd-momentum", lr: 0.1}, {label: "RSDM-M", method: "rsdm-momentum", lr: 1},
				run1("RSDM-P", "rsdm-p")},
			claims: []claim{{"RSDM-M", "RGD-M", "RSDM with momentum beats RGD with momentum"}, {"RSDM-M", "RSDM-P", "momentum improves RSDM"}}},
	)
}

// verdict compares two traces: at the smallest gap both reached, the one
// that got there sooner wins; one that reached a smaller gap than the other
// ever did wins; if neither reached 1e-1, the smaller final gap wins.
func verdict(a, b *trace) (bool, string) {
	levels := []float64{1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6}
	deepest := func(t *trace) int {
		d := -1
		for i, l := range levels {
			if _, _, ok := t.hit(l); ok {
				d = i
			}
		}
		return d
	}
	da, db := deepest(a), deepest(b)
	switch {
	case da < 0 && db < 0:
		ga, gb := a.gaps[len(a.gaps)-1], b.gaps[len(b.gaps)-1]
		return ga < gb, fmt.Sprintf("neither reached 1e-1; final gaps %.2e vs %.2e", ga, gb)
	case da != db:
		win := da > db
		return win, fmt.Sprintf("deepest gap reached %.0e vs %.0e", levels[max(da, 0)], levels[max(db, 0)])
	}
	_, sa, _ := a.hit(levels[da])
	_, sb, _ := b.hit(levels[da])
	return sa <= sb, fmt.Sprintf("gap %.0e at %.3g s vs %.3g s", levels[da], sa, sb)
}

// paper runs every experiment and writes report.md, one PNG per experiment
// and paper.csv into o.dir.
func paper(w io.Writer, o options) error {
	start := time.Now()
	csvPath := filepath.Join(o.dir, "paper.csv")
	f, cw, err := newCSV(csvPath)
	if err != nil {
		return err
	}
	defer f.Close()
	o.tunedLR = map[string]float64{}
	var body strings.Builder
	var tally claimTally
	for _, e := range paperExperiments(o.scale) {
		if o.only != "" && !strings.Contains(e.id, o.only) {
			continue
		}
		fmt.Fprintf(w, "%s\n", e.title)
		traces, lrs, fstarNote, err := runExperiment[float64](w, e, o)
		if err != nil {
			return fmt.Errorf("%s: %w", e.id, err)
		}
		for _, tr := range traces {
			writeTrace(cw, e.s, tr)
		}
		png := e.id + ".png"
		if err := plotGaps(filepath.Join(o.dir, png), e.title, traces); err != nil {
			return err
		}
		byLabel := writeExperiment(&body, e, png, fstarNote, traces, lrs)
		tally.check(&body, e, byLabel)
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	if err := writeReport(filepath.Join(o.dir, "report.md"), o, start, tally, body.String()); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing paper.csv: %w", err)
	}
	fmt.Fprintf(w, "report: report.md (%d of %d claims agree), every iteration: paper.csv\n", tally.agree, tally.total)
	return nil
}

// writeExperiment writes to body experiment e's section of the report: its
// setting, its plot png and a row of the table for each trace, run with
// step size lrs[i]; it returns the traces by their runs' labels.
func writeExperiment(body *strings.Builder, e paperExp, png, fstarNote string, traces []*trace, lrs []float64) map[string]*trace {
	fmt.Fprintf(body, "## %s\n\n", e.title)
	fmt.Fprintf(body, "Setting: %s, n = %d, p = %d, r = %d%s.\n\n![%s](%s)\n\n", e.s.name, e.s.n, e.s.p, e.s.r, fstarNote, e.id, png)
	body.WriteString("| method | step size | s to 1e-2 | s to 1e-4 | s to 1e-6 | iterations | ms / iteration | final gap | ‖XᵀX − I‖_F |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	byLabel := map[string]*trace{}
	for i, tr := range traces {
		byLabel[e.runs[i].label] = tr
		last := len(tr.iters) - 1
		cells := []string{tr.method, fmt.Sprintf("%g", lrs[i])}
		for _, target := range targets {
			if _, sec, ok := tr.hit(target); ok {
				cells = append(cells, fmt.Sprintf("%.2f", sec))
			} else {
				cells = append(cells, "—")
			}
		}
		cells = append(cells, fmt.Sprint(tr.iters[last]), fmt.Sprintf("%.2f", tr.seconds[last]/float64(max(tr.iters[last], 1))*1e3),
			fmt.Sprintf("%.2e", tr.gaps[last]), fmt.Sprintf("%.1e", tr.feas))
		body.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	body.WriteString("\n")
	return byLabel
}

// claimTally counts the paper's claims weighed and those that hold here,
// with a row of the report's table of claims for each.
type claimTally struct {
	verdicts     []string
	agree, total int
}

// check weighs each claim of e whose two runs are in byLabel, writing a
// line for it to body, and tallies it.
func (t *claimTally) check(body *strings.Builder, e paperExp, byLabel map[string]*trace) {
	for _, c := range e.claims {
		a, b := byLabel[c.a], byLabel[c.b]
		if a == nil || b == nil {
			continue
		}
		ok, why := verdict(a, b)
		t.total++
		word := "**does not hold here**"
		if ok {
			word, t.agree = "holds here", t.agree+1
		}
		line := fmt.Sprintf("%s — %s (%s vs %s: %s)", c.text, word, c.a, c.b, why)
		fmt.Fprintf(body, "- %s\n", line)
		t.verdicts = append(t.verdicts, fmt.Sprintf("| %s | %s | %s | %s |", e.id, c.text, map[bool]string{true: "yes", false: "**no**"}[ok], why))
	}
	body.WriteString("\n")
}

// writeReport writes the report to path: how the run was made (it started
// at start), the claims' tally and the experiments' sections, body.
func writeReport(path string, o options, start time.Time, tally claimTally, body string) error {
	rf, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(rf)
	fmt.Fprintf(bw, "# RSDM paper experiments, regenerated by orthonet\n\n")
	fmt.Fprintf(bw, "Generated %s by `%s` in %.0f minutes on %s (%d CPUs), Go %s, BLAS %s, float64.\n\n",
		time.Now().Format("2006-01-02 15:04"), strings.Join(append([]string{"bench"}, os.Args[1:]...), " "), time.Since(start).Minutes(),
		cpuName(), runtime.NumCPU(), runtime.Version(), linalg.Backend())
	fmt.Fprintf(bw, "Every number below comes from this run. Sizes are the paper's times %g; each method gets %v of "+
		"optimizer time (gradient and step; the objective evaluations that draw the curves are not counted) and at "+
		"most %d iterations. The paper ran PyTorch on an RTX 4060 GPU; this run is a CPU, so absolute times differ and "+
		"only the order of the methods is compared. Step sizes: the paper's published ones for RGD and RSDM; for the "+
		"baselines (RCD, TSD, PCAL, Landing, RSSM, OBCD) the best of the paper's grid %v after a run of 1/20 of the "+
		"budget, as the paper tuned them, on the first experiment of each problem (Procrustes 200, PCA (2000, 1500), "+
		"QAP), kept for the later ones; PCAL and Landing use penalty %g. The hybrid (not in the paper) times a few "+
		"steps of RGD and of RSDM-P at r in {n/8, n/4, n/2, 3n/4, the experiment's r} and keeps the method with the "+
		"largest expected decrease per second; its choice is in its name. PCAL and Landing do not keep X on the "+
		"manifold: the gap of an infeasible point is not comparable with a feasible one's, so read their rows "+
		"together with the last column (‖XᵀX − I‖_F at the end).\n\n",
		o.scale, o.timeLimit, o.maxIter, stepGrid, penalty)
	fmt.Fprintf(bw, "## The paper's claims against this run\n\n%d of %d comparisons agree with the paper.\n\n| experiment | claim | holds here | evidence |\n| --- | --- | --- | --- |\n%s\n\n",
		tally.agree, tally.total, strings.Join(tally.verdicts, "\n"))
	bw.WriteString(body)
	if err := bw.Flush(); err != nil {
		return err
	}
	return rf.Close()
}

// runExperiment runs every curve of e from one problem instance and start.
func runExperiment[T float32 | float64](w io.Writer, e paperExp, o options) ([]*trace, []float64, string, error) {
	s := e.s
	pr, x0, fstar, ref, err := instance[T](s, o)
	if err != nil {
		return nil, nil, "", err
	}
	note := ""
	if ref != nil {
		note = fmt.Sprintf("; no closed-form optimum: f* is the best value of an RGD run of %d iterations (%.0f s), so gaps are relative to it", ref.iters[len(ref.iters)-1], ref.seconds[len(ref.seconds)-1])
	}
	var traces []*trace
	var lrs []float64
	for _, r := range e.runs {
		oo := o
		if r.seed != 0 {
			oo.seed = r.seed
		}
		m, tr, err := runMethod[T](r.method, s, pr, x0, fstar, r.lr, r.r, oo)
		if err != nil {
			return nil, nil, "", err
		}
		if !strings.HasPrefix(tr.method, "hybrid") {
			tr.method = r.label
		}
		fmt.Fprintln(w, summary(tr, m.lr))
		traces, lrs = append(traces, tr), append(lrs, m.lr)
	}
	return traces, lrs, note, nil
}

// cpuName returns the CPU model from /proc/cpuinfo, or the architecture.
func cpuName() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return runtime.GOARCH
}
