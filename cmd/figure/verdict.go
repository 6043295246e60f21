package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The outcomes of a verdict on one of the paper's claims.
const (
	holds       = "holds"
	doesNotHold = "does not hold"
	cannotTell  = "cannot tell"
)

// verdict is the outcome of one of the paper's claims as the runs measure
// it, and the numbers it rests on.
type verdict struct {
	claim   string
	outcome string // holds, doesNotHold or cannotTell
	detail  string
}

func (v verdict) String() string { return fmt.Sprintf("%s: %s: %s", v.claim, v.outcome, v.detail) }

// point is a series' mean and band (lowest to highest over its runs) at a
// grid time, and whether every run had been evaluated by then.
type point struct {
	t, mean, lo, hi float64
	all             bool
}

// apartAbove reports whether p's band lies wholly above q's.
func (p point) apartAbove(q point) bool { return p.lo > q.hi }

// overlaps reports whether p's band and q's share a value.
func (p point) overlaps(q point) bool { return p.lo <= q.hi && q.lo <= p.hi }

func (p point) band() string { return fmt.Sprintf("%.2f to %.2f", 100*p.lo, 100*p.hi) }

// curve returns a series' points on the grid of training times.
func curve(s series, grid []float64, step float64) []point {
	ps := make([]point, len(grid))
	for i, t := range grid {
		m, lo, hi, n := s.stats(bySeconds, t, step)
		ps[i] = point{t: t, mean: m, lo: lo, hi: hi, all: n == len(s.runs) && n > 0}
	}
	return ps
}

// seedsNote returns why the runs are too few to decide, or "".
func seedsNote(a, b series, minSeeds int) string {
	if len(a.runs) < minSeeds || len(b.runs) < minSeeds {
		return fmt.Sprintf("%s has %d runs and %s %d, fewer than the %d of each a verdict needs", a.label, len(a.runs), b.label, len(b.runs), minSeeds)
	}
	return ""
}

// finish returns v with the detail written so far and the notes that
// qualify it: runs too few to decide (which makes the outcome cannotTell)
// and runs made under load.
func (v verdict) finish(detail *strings.Builder, a, b series, minSeeds int) verdict {
	if note := seedsNote(a, b, minSeeds); note != "" {
		v.outcome = cannotTell
		detail.WriteString("; " + note)
	}
	detail.WriteString(loadNote(a, b))
	v.detail = detail.String()
	return v
}

// loadNote returns a warning naming the runs recorded as made under load,
// or "".
func loadNote(all ...series) string {
	var names []string
	for _, s := range all {
		for _, r := range s.runs {
			if r.load.flagged() {
				names = append(names, s.label+": "+runName(r.path))
			}
		}
	}
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf("; %d runs were flagged for load (%s): their times are not to be trusted, redo them", len(names), strings.Join(names, ", "))
}

// soonerVerdict judges the paper's FFN claim, "a reaches high test
// accuracy sooner than b in wall time": with T the reach fraction of the
// better of the two final means, a's mean first reaches T at an earlier
// grid time than b's, and there a's band lies wholly above b's. It does not
// hold where b's mean reaches T first with its band wholly above a's there;
// it cannot tell otherwise (bands overlapping at the first arrival, both
// arriving at the same grid time, or fewer than minSeeds runs of either).
// Only grid times at which every run of both has been evaluated count.
func soonerVerdict(a, b series, grid []float64, step, reach float64, minSeeds int) verdict {
	v := verdict{claim: fmt.Sprintf("%s reaches high test accuracy sooner than %s in training time", a.label, b.label), outcome: cannotTell}
	pa, pb := curve(a, grid, step), curve(b, grid, step)
	if len(grid) == 0 || !pa[len(grid)-1].all || !pb[len(grid)-1].all {
		v.detail = "no grid time at which every run has been evaluated"
		return v
	}
	fa, fb := pa[len(grid)-1], pb[len(grid)-1]
	best, who := fa.mean, a.label
	if fb.mean > best {
		best, who = fb.mean, b.label
	}
	thr := reach * best
	first := func(ps []point) int {
		for i, p := range ps {
			if p.all && p.mean >= thr {
				return i
			}
		}
		return -1
	}
	ia, ib := first(pa), first(pb)
	arrival := func(label string, i int) string {
		if i < 0 {
			return fmt.Sprintf("%s's mean never reaches it by %ss", label, secs(grid[len(grid)-1]))
		}
		return fmt.Sprintf("%s's mean first reaches it at %ss", label, secs(grid[i]))
	}
	var b2 strings.Builder
	fmt.Fprintf(&b2, "threshold %.2f%% (%g of the better final mean, %s's %.2f%% at %ss); %s, %s",
		100*thr, reach, who, 100*best, secs(grid[len(grid)-1]), arrival(a.label, ia), arrival(b.label, ib))
	// first is where the sooner of the two arrives (one always does: the
	// better final mean reaches thr at the last grid time).
	// lead compares the sooner one's band (p, of label) with the other's (q)
	// where it arrives: apart and above gives out.
	lead := func(p, q point, label, other, out, overlap string) {
		fmt.Fprintf(&b2, "; at %ss %s's band is %s, %s's %s", secs(p.t), label, p.band(), other, q.band())
		if p.apartAbove(q) {
			v.outcome = out
		} else {
			b2.WriteString(overlap)
		}
	}
	switch {
	case ia >= 0 && (ib < 0 || ia < ib):
		lead(pa[ia], pb[ia], a.label, b.label, holds, " (overlapping or below)")
	case ib >= 0 && (ia < 0 || ib < ia):
		lead(pb[ib], pa[ib], b.label, a.label, doesNotHold, " (overlapping)")
	default:
		b2.WriteString(" (the same grid time: the grid cannot order them)")
	}
	return v.finish(&b2, a, b, minSeeds)
}

// aboveVerdict judges the paper's ViT claim, "a stays above b throughout":
// at every grid time after the first at which every run of both has been
// evaluated, a's mean is above b's. It holds where the means are so ordered
// and the bands apart at every such time; it does not hold where at some
// time a's mean is not above b's and a's band lies wholly below b's there;
// it cannot tell otherwise (bands overlapping, or fewer than minSeeds runs
// of either). The detail names the times where the bands overlap.
func aboveVerdict(a, b series, grid []float64, step float64, minSeeds int) verdict {
	v := verdict{claim: fmt.Sprintf("%s stays above %s throughout", a.label, b.label), outcome: cannotTell}
	pa, pb := curve(a, grid, step), curve(b, grid, step)
	var times, below, apartBelow, overlap []float64
	lowMargin, lowAt, highMargin, highAt := math.Inf(1), 0.0, math.Inf(-1), 0.0
	seen := false
	for i := range grid {
		p, q := pa[i], pb[i]
		if !p.all || !q.all {
			continue
		}
		if !seen { // the first evaluation: both may still be near chance
			seen = true
			continue
		}
		times = append(times, p.t)
		d := p.mean - q.mean
		if d < lowMargin {
			lowMargin, lowAt = d, p.t
		}
		if d > highMargin {
			highMargin, highAt = d, p.t
		}
		if d <= 0 {
			below = append(below, p.t)
			if q.apartAbove(p) {
				apartBelow = append(apartBelow, p.t)
			}
		}
		if p.overlaps(q) {
			overlap = append(overlap, p.t)
		}
	}
	if len(times) == 0 {
		v.detail = "no grid time after the first evaluation of every run"
		return v
	}
	var b2 strings.Builder
	fmt.Fprintf(&b2, "%s's mean is above %s's at %d of %d grid times from %ss to %ss (margin %+.2f points at %ss to %+.2f at %ss)",
		a.label, b.label, len(times)-len(below), len(times), secs(times[0]), secs(times[len(times)-1]), 100*lowMargin, secs(lowAt), 100*highMargin, secs(highAt))
	if len(below) > 0 {
		fmt.Fprintf(&b2, "; not above at %s", spans(below, step))
	}
	if len(apartBelow) > 0 {
		fmt.Fprintf(&b2, "; its band wholly below at %s", spans(apartBelow, step))
	}
	if len(overlap) > 0 {
		fmt.Fprintf(&b2, "; the bands overlap at %s", spans(overlap, step))
	} else {
		b2.WriteString("; the bands never overlap")
	}
	switch {
	case len(apartBelow) > 0:
		v.outcome = doesNotHold
	case len(below) == 0 && len(overlap) == 0:
		v.outcome = holds
	}
	return v.finish(&b2, a, b, minSeeds)
}

// spans writes grid times as runs of consecutive ones: "10s, 30-60s".
func spans(ts []float64, step float64) string {
	var parts []string
	for i := 0; i < len(ts); {
		j := i
		for j+1 < len(ts) && math.Abs(ts[j+1]-ts[j]-step) < step/2 {
			j++
		}
		if j == i {
			parts = append(parts, fmt.Sprintf("%ss", secs(ts[i])))
		} else {
			parts = append(parts, fmt.Sprintf("%s-%ss", secs(ts[i]), secs(ts[j])))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// secs formats training seconds to the millisecond.
func secs(t float64) string { return strconv.FormatFloat(math.Round(t*1000)/1000, 'g', -1, 64) }
