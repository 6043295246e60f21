package backend

import (
	"fmt"
	"math"
)

// HostOnly is a kernel with a CPU implementation and no CUDA one yet: a
// device backend refuses it with an error wrapping ErrUnsupported that
// carries NoDevice, which says what to do instead.
type HostOnly interface {
	HostKernel
	NoDevice() string
}

// The CTC loss and its gradient run on the CPU only.
var (
	_ HostOnly = CTCLoss{}
	_ HostOnly = CTCLossGrad{}
)

// ctcNoDevice is what the CUDA backend says of the CTC kernels.
const ctcNoDevice = "the CTC loss has no CUDA kernel yet: compile this model for the CPU backend (backend/cpu; train -device cpu)"

// CTC describes the inputs of the connectionist temporal classification
// loss as gorgonia's CTCLoss takes them: LogProbs (Time, Batch, Labels),
// the log-probabilities of the labels at every time step, label 0 being
// the blank; InputLengths and TargetLengths, Batch Int32 entries each (an
// input length in 1 to Time); and Targets, Int32 labels in 1 to Labels-1:
// Batch rows of Width entries when Width > 0, else the Batch targets one
// after another (Entries in all).
type CTC struct {
	Time, Batch, Labels int
	Width, Entries      int
	// Mean divides each sequence's loss by its target length (at least 1)
	// and their sum by Batch; otherwise the losses are summed.
	Mean bool
}

// check checks the sizes and the CTC's operands.
func (c CTC) check(k Kernel, logProbs, targets, inputLengths, targetLengths Operand) error {
	if err := checkSized(k, []int{c.Time, c.Batch, c.Labels}, 0); err != nil {
		return err
	}
	if c.Width < 0 || c.Entries < 0 || (c.Width > 0 && c.Entries != c.Batch*c.Width) {
		return fmt.Errorf("backend: %s: %d target entries, rows of %d for %d sequences", Name(k), c.Entries, c.Width, c.Batch)
	}
	return checkAll(k, 0, "log-probabilities", logProbs, c.Time*c.Batch*c.Labels,
		Int32, "targets", targets, c.Entries, "input lengths", inputLengths, c.Batch, "target lengths", targetLengths, c.Batch)
}

// ctcRun is one run's view of the integer inputs: each sequence's target
// labels, checked.
type ctcRun struct {
	c                        CTC
	targets, inLens, tgtLens []int32
	offsets                  []int // where each sequence's labels start
}

func newCTCRun(c CTC, targets, inLens, tgtLens Operand) *ctcRun {
	return &ctcRun{c: c, targets: hostData[int32](targets)[:c.Entries], inLens: hostData[int32](inLens)[:c.Batch],
		tgtLens: hostData[int32](tgtLens)[:c.Batch], offsets: make([]int, c.Batch)}
}

// check checks the lengths and labels of this run and sets the offsets.
func (r *ctcRun) check(kernel string) error {
	c, at := r.c, 0
	for b := range c.Batch {
		il, tl := int(r.inLens[b]), int(r.tgtLens[b])
		if il < 1 || il > c.Time {
			return fmt.Errorf("backend: %s: input length %d of sequence %d outside 1 to %d", kernel, il, b, c.Time)
		}
		r.offsets[b] = at
		if c.Width > 0 {
			r.offsets[b] = b * c.Width
		}
		if tl < 0 || (c.Width > 0 && tl > c.Width) || (c.Width == 0 && at+tl > c.Entries) {
			return fmt.Errorf("backend: %s: target length %d of sequence %d does not fit the %d target entries", kernel, tl, b, c.Entries)
		}
		for i, l := range r.targets[r.offsets[b] : r.offsets[b]+tl] {
			if l < 0 || int(l) >= c.Labels {
				return fmt.Errorf("backend: %s: label %d (entry %d of sequence %d's target) outside 0 to %d", kernel, l, i, b, c.Labels-1)
			}
		}
		at += tl
	}
	return nil
}

// label returns the label of state s of sequence b's extended target (the
// blank between and around its labels).
func (r *ctcRun) label(b, s int) int {
	if s%2 == 0 {
		return 0
	}
	return int(r.targets[r.offsets[b]+s/2])
}

// logAdd returns log(exp(a) + exp(b)).
func logAdd(a, b float64) float64 {
	m := max(a, b)
	if math.IsInf(m, -1) {
		return m
	}
	return m + math.Log(math.Exp(a-m)+math.Exp(b-m))
}

// maxStates is the most states of a sequence's extended target: twice its
// most labels, plus one.
func (c CTC) maxStates() int {
	if c.Width > 0 {
		return 2*c.Width + 1
	}
	return 2*c.Entries + 1
}

// alpha fills la (Time x states) with the forward variables of sequence b
// of the log-probabilities lp, and returns its loss as gorgonia's CTCLoss
// does: minus the log-likelihood, or for an empty target the
// log-likelihood itself.
func ctcAlpha[T Float](r *ctcRun, lp []T, b int, la []float64) float64 {
	c := r.c
	il, tl := int(r.inLens[b]), int(r.tgtLens[b])
	w := 2*tl + 1
	at := func(t, l int) float64 { return float64(lp[(t*c.Batch+b)*c.Labels+l]) }
	for s := range w {
		la[s] = math.Inf(-1)
	}
	la[0] = at(0, 0)
	if tl > 0 {
		la[1] = at(0, r.label(b, 1))
	}
	for t := 1; t < il; t++ {
		prev, cur := la[(t-1)*w:t*w], la[t*w:(t+1)*w]
		for s := range w {
			l := r.label(b, s)
			v := prev[s]
			if s > 0 {
				v = logAdd(v, prev[s-1])
			}
			if s > 1 && r.label(b, s-2) != l {
				v = logAdd(v, prev[s-2])
			}
			cur[s] = v + at(t, l)
		}
	}
	last := la[(il-1)*w : il*w]
	if tl == 0 {
		return last[0]
	}
	return -logAdd(last[2*tl], last[2*tl-1])
}

// CTCLoss writes into Loss (one element) gorgonia's CTC loss of its
// inputs (see CTC), computed in float64 as gorgonia does it: each
// sequence's loss is minus the log-likelihood of its target (for an empty
// target, gorgonia v0.9.18 takes the log-likelihood itself), summed or
// averaged (Mean). It runs on the CPU only.
type CTCLoss struct {
	CTC
	LogProbs, Targets, InputLengths, TargetLengths, Loss Operand
}

// Check checks the operands; lengths and labels are checked when the
// kernel runs.
func (k CTCLoss) Check() error {
	if err := k.check(k, k.LogProbs, k.Targets, k.InputLengths, k.TargetLengths); err != nil {
		return err
	}
	return checkAll(k, DTypeOf(k.LogProbs), "loss", k.Loss, 1)
}

// NoDevice says that the CTC loss runs on the CPU only.
func (CTCLoss) NoDevice() string { return ctcNoDevice }

// Host takes the sequences in parts across the pool, then adds their
// losses in order.
func (k CTCLoss) Host(p *Pool) (Func, error) {
	return onFloats(p, k, ctcHost[float32], ctcHost[float64])
}

func ctcHost[T Float](p *Pool, k CTCLoss) Func {
	c := k.CTC
	lp, loss := hostData[T](k.LogProbs)[:c.Time*c.Batch*c.Labels], hostData[T](k.Loss)[:1]
	r := newCTCRun(c, k.Targets, k.InputLengths, k.TargetLengths)
	nll := make([]float64, c.Batch)
	var s *splitter
	var scratch [][]float64 // the forward variables, per part of the loop
	s = p.split(c.Batch, c.Time*c.maxStates()*8, func(lo, hi int) {
		la := scratch[part(s, lo)]
		for b := lo; b < hi; b++ {
			nll[b] = ctcAlpha(r, lp, b, la)
		}
	})
	scratch = make([][]float64, s.parts)
	for i := range scratch {
		scratch[i] = make([]float64, c.Time*c.maxStates())
	}
	return func() error {
		if err := r.check("ctc-loss"); err != nil {
			return err
		}
		s.run()
		var sum float64
		for b, v := range nll {
			if c.Mean {
				v /= float64(max(r.tgtLens[b], 1))
			}
			sum += v
		}
		if c.Mean {
			sum /= float64(c.Batch)
		}
		loss[0] = T(sum)
		return nil
	}
}

// CTCLossGrad writes into DX (Time, Batch, Labels) the gradient gorgonia's
// CTCLoss takes for its log-probabilities, times GradOut (one element): at
// time t < the sequence's input length, exp(lp) - exp(log(sum over the
// states s of label c of alpha_t(s) beta_t(s)) + loss - lp), the form that
// assumes log-probabilities from a log-softmax over the labels, and not
// divided by the target length or the batch under Mean (both as gorgonia
// v0.9.18 computes it); at later times 0, where gorgonia leaves -Inf. It
// runs on the CPU only.
type CTCLossGrad struct {
	CTC
	LogProbs, Targets, InputLengths, TargetLengths, GradOut, DX Operand
}

// Check checks the operands; lengths and labels are checked when the
// kernel runs.
func (k CTCLossGrad) Check() error {
	if err := k.check(k, k.LogProbs, k.Targets, k.InputLengths, k.TargetLengths); err != nil {
		return err
	}
	return checkAll(k, DTypeOf(k.LogProbs), "gradient of the loss", k.GradOut, 1, "DX", k.DX, k.Time*k.Batch*k.Labels)
}

// NoDevice says that the CTC loss runs on the CPU only.
func (CTCLossGrad) NoDevice() string { return ctcNoDevice }

// Host takes the sequences in parts across the pool.
func (k CTCLossGrad) Host(p *Pool) (Func, error) {
	return onFloats(p, k, ctcGradHost[float32], ctcGradHost[float64])
}

func ctcGradHost[T Float](p *Pool, k CTCLossGrad) Func {
	c := k.CTC
	n := c.Time * c.Batch * c.Labels
	lp, g, dx := hostData[T](k.LogProbs)[:n], hostData[T](k.GradOut)[:1], hostData[T](k.DX)[:n]
	r := newCTCRun(c, k.Targets, k.InputLengths, k.TargetLengths)
	states := c.maxStates()
	var s *splitter
	var scratch [][]float64 // alpha, beta and the per-label sums, per part of the loop
	s = p.split(c.Batch, c.Time*states*16, func(lo, hi int) {
		buf := scratch[part(s, lo)]
		la, lb, res := buf[:c.Time*states], buf[c.Time*states:2*c.Time*states], buf[2*c.Time*states:]
		for b := lo; b < hi; b++ {
			nll := ctcAlpha(r, lp, b, la)
			ctcBeta(r, lp, b, lb)
			ctcGradSequence(r, lp, dx, b, la, lb, res, nll, float64(g[0]))
		}
	})
	scratch = make([][]float64, s.parts)
	for i := range scratch {
		scratch[i] = make([]float64, 2*c.Time*states+c.Labels)
	}
	return func() error {
		if err := r.check("ctc-loss-grad"); err != nil {
			return err
		}
		s.run()
		return nil
	}
}

// ctcBeta fills lb (Time x states) with the backward variables of sequence
// b of the log-probabilities lp.
func ctcBeta[T Float](r *ctcRun, lp []T, b int, lb []float64) {
	c := r.c
	il, tl := int(r.inLens[b]), int(r.tgtLens[b])
	w := 2*tl + 1
	at := func(t, l int) float64 { return float64(lp[(t*c.Batch+b)*c.Labels+l]) }
	for i := range il * w {
		lb[i] = math.Inf(-1)
	}
	lb[(il-1)*w+2*tl] = at(il-1, 0)
	if tl > 0 {
		lb[(il-1)*w+2*tl-1] = at(il-1, r.label(b, 2*tl-1))
	}
	for t := il - 2; t >= 0; t-- {
		next, cur := lb[(t+1)*w:(t+2)*w], lb[t*w:(t+1)*w]
		for s := range w {
			l := r.label(b, s)
			v := next[s]
			if s < 2*tl {
				v = logAdd(v, next[s+1])
			}
			if s < 2*tl-1 && r.label(b, s+2) != l {
				v = logAdd(v, next[s+2])
			}
			cur[s] = v + at(t, l)
		}
	}
}

// ctcGradSequence writes into dx the gradient of sequence b, times gout,
// from its forward variables la, backward variables lb and loss nll; res
// holds the per-label sums.
func ctcGradSequence[T Float](r *ctcRun, lp, dx []T, b int, la, lb, res []float64, nll, gout float64) {
	c := r.c
	il, tl := int(r.inLens[b]), int(r.tgtLens[b])
	w := 2*tl + 1
	at := func(t, l int) float64 { return float64(lp[(t*c.Batch+b)*c.Labels+l]) }
	for t := range c.Time {
		out := dx[(t*c.Batch+b)*c.Labels : (t*c.Batch+b+1)*c.Labels]
		if t >= il {
			clear(out)
			continue
		}
		for l := range res[:c.Labels] {
			res[l] = math.Inf(-1)
		}
		for s := range w {
			l := r.label(b, s)
			res[l] = logAdd(res[l], la[t*w+s]+lb[t*w+s])
		}
		for l := range out {
			v := at(t, l)
			out[l] = T((math.Exp(v) - math.Exp(res[l]+nll-v)) * gout)
		}
	}
}
