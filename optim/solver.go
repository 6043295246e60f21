package optim

import (
	"fmt"
	"hash/fnv"
	"math"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/manifold"
)

// Constrained marks a Gorgonia weight as living on a manifold. It is itself a
// gorgonia.ValueGrad, so the marking travels with the weight in the list
// given to Solver.Step; a plain *gorgonia.Node is never constrained.
type Constrained struct {
	*gorgonia.Node
	// Grassmann selects Gr(n,p) instead of St(n,p).
	Grassmann bool
}

// Nodes returns the Gorgonia nodes behind params, unwrapping Constrained
// weights, in the same order: what gorgonia.Grad and BindDualValues take.
func Nodes(params []gorgonia.ValueGrad) gorgonia.Nodes {
	ns := make(gorgonia.Nodes, 0, len(params))
	for _, p := range params {
		switch n := p.(type) {
		case Constrained:
			ns = append(ns, n.Node)
		case *gorgonia.Node:
			ns = append(ns, n)
		}
	}
	return ns
}

// Stiefel marks an n x p weight (n >= p) as a point of St(n,p).
func Stiefel(w *gorgonia.Node) Constrained { return Constrained{Node: w} }

// Grassmann marks an n x p weight (n >= p) as a point of Gr(n,p).
func Grassmann(w *gorgonia.Node) Constrained { return Constrained{Node: w, Grassmann: true} }

// Method selects the update of constrained weights.
type Method int

const (
	// MethodRSDM is the random submanifold method (the default).
	MethodRSDM Method = iota
	// MethodRGD is Riemannian gradient descent.
	MethodRGD
)

// Rule selects the update of unconstrained parameters.
type Rule int

const (
	// RuleSGD is SGD with optional heavy-ball momentum (PyTorch's SGD:
	// v = mu v + g, w -= lr v). The default.
	RuleSGD Rule = iota
	// RuleAdam is Adam with bias correction (Kingma and Ba 2015).
	RuleAdam
)

// OtherConfig holds the update of unconstrained parameters.
type OtherConfig struct {
	Rule Rule
	// LR is the step size. Required, > 0.
	LR float64
	// Momentum for SGD, in [0, 1). Default 0.
	Momentum float64
	// Beta1, Beta2 and Eps for Adam; zero values mean 0.9, 0.999, 1e-8.
	Beta1, Beta2, Eps float64
}

// SolverConfig holds the options of a Solver.
type SolverConfig struct {
	// Method for constrained weights; RSDM (default) uses RSDM, RGD uses RGD.
	Method Method
	// RSDM configures RSDM. Its SubmanifoldSize must not exceed the rows of
	// any constrained weight; each weight's sampler is seeded from
	// RSDM.Seed and the weight's position in the parameter list.
	RSDM RSDMConfig
	// RGD configures RGD; the retraction is RGDRetraction.
	RGD           RGDConfig
	RGDRetraction manifold.Retraction
	// Other configures every unconstrained parameter.
	Other OtherConfig
}

// Constraint says which manifold a Param lives on.
type Constraint int

const (
	// Euclidean is an unconstrained parameter (SGD or Adam).
	Euclidean Constraint = iota
	// OnStiefel is an n x p weight on St(n,p).
	OnStiefel
	// OnGrassmann is an n x p weight on Gr(n,p).
	OnGrassmann
)

// Param is a parameter held in host memory, for NewSliceSolver: the solver
// updates Value in place from Grad, both []float32 or []float64 with as many
// entries as Shape holds.
type Param struct {
	Name       string
	Shape      []int
	Constraint Constraint
	Value      any
	Grad       any
	// GradA and GradB, when set, give the gradient of an n x p weight as
	// the product GradA^T GradB of a GradK x n and a GradK x p matrix (see
	// Factored); Grad is then ignored. Only RSDM steps such a weight.
	GradA, GradB any
	GradK        int
}

// factored is a Factored gradient of either element type.
type factored struct {
	a, b any
	k    int
}

// ParamInfo names a parameter of a Solver and gives its shape.
type ParamInfo struct {
	Name  string
	Shape []int
}

// Solver moves constrained weights on their manifold (RSDM or RGD) and
// every other parameter by SGD or Adam. It is built once over its
// parameters, as torch.optim's optimizers are; Step updates all of them.
// Every Step is all-or-nothing: on error no parameter, buffer or counter
// has moved.
type Solver struct {
	cfg    SolverConfig
	params []binding
	opts   []paramOpt
	// zero clears the gradients after each Step: Gorgonia's tape machine
	// adds each run's gradients to the bound ones.
	zero bool
	// values and grads are the slices of the Step under way.
	values, grads []any
}

// binding is how a Solver reaches one parameter's value and gradient.
type binding struct {
	info       ParamInfo
	constraint Constraint
	node       gorgonia.ValueGrad // nil for a Param
	value      any                // a Param's slices
	grad       any
}

func (b *binding) name() string {
	if b.constraint == Euclidean {
		return fmt.Sprintf("parameter %q", b.info.Name)
	}
	return fmt.Sprintf("weight %q", b.info.Name)
}

// resolve returns the parameter's value and gradient slices.
func (b *binding) resolve() (value, grad any, err error) {
	if b.node == nil {
		return b.value, b.grad, nil
	}
	v, g, err := dense(b.node)
	if err != nil {
		return nil, nil, err
	}
	return v.Data(), g.Data(), nil
}

// paramOpt is one parameter's optimizer, bound to its element type.
type paramOpt interface {
	prepare(value, grad any) error
	commit(value, grad any)
	abort()
	state() State
	setState(State) error
	setLR(constrained, other float64) error
}

// twoPhase is an optimizer whose step is split so that a Solver can update
// every parameter or none: prepare computes the step into workspaces and
// may fail, commit applies it and cannot, abort undoes what prepare
// advanced (a sampler).
type twoPhase[T Float] interface {
	prepare(x, grad []T) error
	commit(x, grad []T)
	abort()
	State() State
	SetState(State) error
	SetLR(float64) error
}

var (
	_ twoPhase[float32] = (*RSDM[float32])(nil)
	_ twoPhase[float32] = (*RGD[float32])(nil)
	_ twoPhase[float32] = (*SGD[float32])(nil)
	_ twoPhase[float32] = (*Adam[float32])(nil)
)

type typedOpt[T Float] struct {
	o           twoPhase[T]
	constrained bool
}

func (t *typedOpt[T]) prepare(v, g any) error {
	if f, ok := g.(factored); ok {
		fs, ok := t.o.(interface {
			prepareFactored(x []T, g Factored[T]) error
		})
		if !ok {
			return fmt.Errorf("a factored gradient, which only RSDM steps")
		}
		return fs.prepareFactored(v.([]T), Factored[T]{K: f.k, A: f.a.([]T), B: f.b.([]T)})
	}
	return t.o.prepare(v.([]T), g.([]T))
}

func (t *typedOpt[T]) commit(v, g any) {
	gs, _ := g.([]T) // nil for a factored gradient: RSDM's commit does not read it
	t.o.commit(v.([]T), gs)
}
func (t *typedOpt[T]) abort()                 { t.o.abort() }
func (t *typedOpt[T]) state() State           { return t.o.State() }
func (t *typedOpt[T]) setState(s State) error { return t.o.SetState(s) }
func (t *typedOpt[T]) setLR(constrained, other float64) error {
	if t.constrained {
		return t.o.SetLR(constrained)
	}
	return t.o.SetLR(other)
}

// NewSolver returns a Solver over Gorgonia parameters: Constrained weights
// (marked by Stiefel or Grassmann) and plain nodes, whose values and
// gradients it reads through the nodes at every Step (run the graph with
// BindDualValues). It zeroes the gradients after every Step, failed or not,
// as Gorgonia's own solvers do: a tape machine adds each run's gradients to
// the bound ones. Every constrained weight must be a 2-D n x p matrix with
// n >= p (and n >= r for RSDM) that lies on its manifold.
func NewSolver(params []gorgonia.ValueGrad, cfg SolverConfig) (*Solver, error) {
	bs := make([]binding, len(params))
	for i, p := range params {
		var n *gorgonia.Node
		c := Euclidean
		switch q := p.(type) {
		case Constrained:
			n, c = q.Node, OnStiefel
			if q.Grassmann {
				c = OnGrassmann
			}
		case *gorgonia.Node:
			n = q
		default:
			return nil, fmt.Errorf("optim: parameter %d is a %T, want a *gorgonia.Node or a Constrained weight", i, p)
		}
		if n == nil {
			return nil, fmt.Errorf("optim: parameter %d is a nil node", i)
		}
		bs[i] = binding{info: ParamInfo{Name: n.Name(), Shape: n.Shape().Clone()}, constraint: c, node: p}
	}
	return newSolver(bs, cfg, true)
}

// NewSliceSolver returns a Solver over parameters held in host slices, such
// as a compiled program's buffers. It never clears the gradients: their
// producer writes them afresh each run.
func NewSliceSolver(params []Param, cfg SolverConfig) (*Solver, error) {
	bs := make([]binding, len(params))
	for i, p := range params {
		size := 1
		for _, d := range p.Shape {
			size *= d
		}
		vn, vok := sliceLen(p.Value)
		gn, gok := sliceLen(p.Grad)
		if p.GradA != nil {
			gn, gok = sliceLen(p.GradA)
		}
		switch {
		case !vok || !gok:
			return nil, fmt.Errorf("optim: parameter %q: value %T and gradient %T, want []float32 or []float64", p.Name, p.Value, p.Grad)
		case p.GradA == nil && fmt.Sprintf("%T", p.Value) != fmt.Sprintf("%T", p.Grad):
			return nil, fmt.Errorf("optim: parameter %q: value %T but gradient %T", p.Name, p.Value, p.Grad)
		case p.GradA != nil:
			if err := checkFactoredParam(p, vn, size); err != nil {
				return nil, err
			}
			bs[i] = binding{info: ParamInfo{Name: p.Name, Shape: append([]int(nil), p.Shape...)}, constraint: p.Constraint, value: p.Value,
				grad: factored{a: p.GradA, b: p.GradB, k: p.GradK}}
			continue
		case vn != size || gn != size:
			return nil, fmt.Errorf("optim: parameter %q of shape %v: value has %d entries, gradient %d", p.Name, p.Shape, vn, gn)
		case p.Constraint < Euclidean || p.Constraint > OnGrassmann:
			return nil, fmt.Errorf("optim: parameter %q: unknown constraint %d", p.Name, p.Constraint)
		}
		bs[i] = binding{info: ParamInfo{Name: p.Name, Shape: append([]int(nil), p.Shape...)}, constraint: p.Constraint, value: p.Value, grad: p.Grad}
	}
	return newSolver(bs, cfg, false)
}

// checkFactoredParam checks the factors of a weight's gradient.
func checkFactoredParam(p Param, vn, size int) error {
	if p.Constraint == Euclidean || len(p.Shape) != 2 {
		return fmt.Errorf("optim: parameter %q of shape %v has a factored gradient; only a constrained matrix may", p.Name, p.Shape)
	}
	an, aok := sliceLen(p.GradA)
	bn, bok := sliceLen(p.GradB)
	n, k := p.Shape[0], p.Shape[1]
	switch {
	case !aok || !bok || fmt.Sprintf("%T", p.Value) != fmt.Sprintf("%T", p.GradA) || fmt.Sprintf("%T", p.GradA) != fmt.Sprintf("%T", p.GradB):
		return fmt.Errorf("optim: parameter %q: value %T with gradient factors %T and %T", p.Name, p.Value, p.GradA, p.GradB)
	case vn != size:
		return fmt.Errorf("optim: parameter %q of shape %v: value has %d entries", p.Name, p.Shape, vn)
	case p.GradK < 1 || an != p.GradK*n || bn != p.GradK*k:
		return fmt.Errorf("optim: parameter %q of shape %v: gradient factors of %d and %d entries for K = %d", p.Name, p.Shape, an, bn, p.GradK)
	}
	return nil
}

func sliceLen(a any) (int, bool) {
	switch v := a.(type) {
	case []float32:
		return len(v), true
	case []float64:
		return len(v), true
	}
	return 0, false
}

func newSolver(params []binding, cfg SolverConfig, zero bool) (*Solver, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, p := range params {
		if seen[p.info.Name] {
			return nil, fmt.Errorf("optim: two parameters are named %q", p.info.Name)
		}
		seen[p.info.Name] = true
	}
	s := &Solver{cfg: cfg, params: params, zero: zero,
		values: make([]any, len(params)), grads: make([]any, len(params))}
	opts, err := s.build(true)
	if err != nil {
		return nil, err
	}
	s.opts = opts
	return s, nil
}

func (cfg *SolverConfig) check() error {
	o := &cfg.Other
	if err := checkLR(o.LR); err != nil {
		return fmt.Errorf("%w (unconstrained parameters)", err)
	}
	if err := checkMomentum(o.Momentum); err != nil {
		return err
	}
	switch o.Rule {
	case RuleSGD:
	case RuleAdam:
		ac := AdamConfig{LR: o.LR, Beta1: o.Beta1, Beta2: o.Beta2, Eps: o.Eps}
		if err := ac.defaults(); err != nil {
			return err
		}
		o.Beta1, o.Beta2, o.Eps = ac.Beta1, ac.Beta2, ac.Eps
	default:
		return fmt.Errorf("optim: unknown update rule %d for unconstrained parameters", o.Rule)
	}
	switch cfg.Method {
	case MethodRSDM:
		if err := checkLR(cfg.RSDM.LR); err != nil {
			return fmt.Errorf("%w (RSDM)", err)
		}
	case MethodRGD:
		if err := checkLR(cfg.RGD.LR); err != nil {
			return fmt.Errorf("%w (RGD)", err)
		}
	default:
		return fmt.Errorf("optim: unknown method %d for constrained weights", cfg.Method)
	}
	return nil
}

// build makes every parameter's optimizer from the configuration; with
// check it also requires every constrained weight to lie on its manifold.
func (s *Solver) build(check bool) ([]paramOpt, error) {
	opts := make([]paramOpt, len(s.params))
	for i := range s.params {
		p := &s.params[i]
		v := p.value
		if p.node != nil {
			d, err := valueOf(p.node)
			if err != nil {
				return nil, err
			}
			v = d.Data()
		}
		var err error
		switch val := v.(type) {
		case []float32:
			opts[i], err = newParamOpt(s.cfg, i, p, val, check)
		case []float64:
			opts[i], err = newParamOpt(s.cfg, i, p, val, check)
		default:
			err = fmt.Errorf("element type %T, want float32 or float64", v)
		}
		if err != nil {
			return nil, fmt.Errorf("optim: %s: %w", p.name(), err)
		}
	}
	return opts, nil
}

func newParamOpt[T Float](cfg SolverConfig, index int, p *binding, v []T, check bool) (paramOpt, error) {
	if p.constraint == Euclidean {
		o := cfg.Other
		var opt twoPhase[T]
		var err error
		if o.Rule == RuleAdam {
			opt, err = NewAdam[T](len(v), AdamConfig{LR: o.LR, Beta1: o.Beta1, Beta2: o.Beta2, Eps: o.Eps})
		} else {
			opt, err = NewSGD[T](len(v), SGDConfig{LR: o.LR, Momentum: o.Momentum})
		}
		if err != nil {
			return nil, err
		}
		return &typedOpt[T]{o: opt}, nil
	}
	shape := p.info.Shape
	if len(shape) != 2 {
		return nil, fmt.Errorf("marked as constrained but has shape %v, want a matrix", tensor.Shape(shape))
	}
	n, k := shape[0], shape[1]
	if n < k {
		return nil, fmt.Errorf("marked as constrained but is %d x %d: n = %d < p = %d (a column-orthonormal matrix needs n >= p)", n, k, n, k)
	}
	var m manifold.Manifold[T]
	var err error
	if p.constraint == OnGrassmann {
		var g *manifold.Grassmann[T]
		if g, err = manifold.NewGrassmann[T](n, k); err == nil {
			g.Retraction = cfg.RGDRetraction
			m = g
		}
	} else {
		var st *manifold.Stiefel[T]
		if st, err = manifold.NewStiefel[T](n, k); err == nil {
			st.Retraction = cfg.RGDRetraction
			m = st
		}
	}
	if err != nil {
		return nil, err
	}
	if check {
		tol := 1e-8
		if linalg.Is32[T]() {
			tol = 1e-4
		}
		if f := m.Feasibility(v); !(f <= tol*math.Sqrt(float64(k))) {
			return nil, fmt.Errorf("marked as constrained but ||W^T W - I||_F = %.3g: initialize it on the manifold (manifold.Stiefel.Random)", f)
		}
	}
	var opt twoPhase[T]
	if _, ok := p.grad.(factored); ok && cfg.Method != MethodRSDM {
		return nil, fmt.Errorf("has a factored gradient, which only RSDM steps (compile the program without factored gradients for RGD)")
	}
	if cfg.Method == MethodRGD {
		opt, err = NewRGD(m, cfg.RGD)
	} else {
		rc := cfg.RSDM
		rc.Seed = mixSeed(rc.Seed, index)
		opt, err = NewRSDM(m, rc)
	}
	if err != nil {
		return nil, err
	}
	return &typedOpt[T]{o: opt, constrained: true}, nil
}

// SetLR changes the step sizes of the constrained weights and of the other
// parameters, as a step-size schedule does between steps. Both must be
// finite and > 0. On error nothing changes.
func (s *Solver) SetLR(constrained, other float64) error {
	if err := checkLR(constrained); err != nil {
		return err
	}
	if err := checkLR(other); err != nil {
		return err
	}
	s.cfg.RSDM.LR, s.cfg.RGD.LR, s.cfg.Other.LR = constrained, constrained, other
	for _, o := range s.opts {
		if err := o.setLR(constrained, other); err != nil {
			return err
		}
	}
	return nil
}

// Params returns the name and shape of every parameter, in order.
func (s *Solver) Params() []ParamInfo {
	out := make([]ParamInfo, len(s.params))
	for i, p := range s.params {
		out[i] = ParamInfo{Name: p.info.Name, Shape: append([]int(nil), p.info.Shape...)}
	}
	return out
}

// Step updates every parameter from its gradient. A NaN or Inf gradient
// fails the step, with an error wrapping ErrNotFinite, before any parameter
// moves; any other failure also leaves every parameter and every
// optimizer's state as they were. A Solver from NewSolver zeroes the
// gradients afterwards, failed or not.
func (s *Solver) Step() error { return s.step(true) }

// StepChecked is Step for a caller that has already checked every gradient
// for NaN and Inf (a compiled program checks while it computes them): it
// skips the scan.
func (s *Solver) StepChecked() error { return s.step(false) }

func (s *Solver) step(scan bool) (err error) {
	if s.zero {
		defer func() {
			if zerr := s.ZeroGrad(); zerr != nil && err == nil {
				err = zerr
			}
		}()
	}
	for i := range s.params {
		p := &s.params[i]
		v, g, err := p.resolve()
		if err != nil {
			return err
		}
		if scan && !finiteAny(g) {
			return fmt.Errorf("optim: gradient of %s: %w; no parameter was updated", p.name(), ErrNotFinite)
		}
		s.values[i], s.grads[i] = v, g
	}
	for i, o := range s.opts {
		if err := o.prepare(s.values[i], s.grads[i]); err != nil {
			for k := i; k >= 0; k-- {
				s.opts[k].abort()
			}
			return fmt.Errorf("optim: %s: %w; no parameter was updated", s.params[i].name(), err)
		}
	}
	for i, o := range s.opts {
		o.commit(s.values[i], s.grads[i])
	}
	return nil
}

// ZeroGrad sets every gradient to zero.
func (s *Solver) ZeroGrad() error {
	for i := range s.params {
		_, g, err := s.params[i].resolve()
		if err != nil {
			return err
		}
		switch d := g.(type) {
		case []float32:
			clear(d)
		case []float64:
			clear(d)
		}
	}
	return nil
}

// State returns the state of every parameter's optimizer, in the order of
// the parameters, for a checkpoint.
func (s *Solver) State() []State {
	out := make([]State, len(s.opts))
	for i, o := range s.opts {
		out[i] = o.state()
	}
	return out
}

// SetState restores states returned by State of a solver with the same
// configuration over the same parameters. Empty states reset every
// optimizer to its fresh state. On error the solver is unchanged.
func (s *Solver) SetState(states []State) error {
	opts, err := s.build(false)
	if err != nil {
		return err
	}
	if len(states) == 0 {
		s.opts = opts
		return nil
	}
	if len(states) != len(s.params) {
		return fmt.Errorf("optim: %d states for %d parameters", len(states), len(s.params))
	}
	for i, st := range states {
		if err := opts[i].setState(st); err != nil {
			return fmt.Errorf("optim: %s: %w", s.params[i].name(), err)
		}
	}
	s.opts = opts
	return nil
}

// mixSeed derives a weight's sampler seed from the run's seed and the
// weight's position, so that weights draw independent submanifolds.
func mixSeed(seed uint64, index int) uint64 {
	h := fnv.New64a()
	var b [16]byte
	for k := 0; k < 8; k++ {
		b[k] = byte(seed >> (8 * k))
		b[8+k] = byte(uint64(index) >> (8 * k))
	}
	_, _ = h.Write(b[:])
	return h.Sum64()
}

// valueOf returns the value of p as a dense tensor.
func valueOf(p gorgonia.ValueGrad) (*tensor.Dense, error) {
	v, ok := p.Value().(*tensor.Dense)
	if !ok || v == nil {
		return nil, fmt.Errorf("optim: %s has no dense tensor value (is the graph run with BindDualValues?)", name(p))
	}
	return v, nil
}

// dense returns the value and gradient of p as dense tensors.
func dense(p gorgonia.ValueGrad) (v, g *tensor.Dense, err error) {
	vv, err := valueOf(p)
	if err != nil {
		return nil, nil, err
	}
	gv, err := p.Grad()
	if err != nil {
		return nil, nil, fmt.Errorf("optim: %s: gradient: %w", name(p), err)
	}
	gd, ok := gv.(*tensor.Dense)
	if !ok || gd == nil {
		return nil, nil, fmt.Errorf("optim: %s has no dense gradient", name(p))
	}
	if !vv.Shape().Eq(gd.Shape()) || vv.Dtype() != gd.Dtype() {
		return nil, nil, fmt.Errorf("optim: %s: value %v %v but gradient %v %v", name(p), vv.Shape(), vv.Dtype(), gd.Shape(), gd.Dtype())
	}
	return vv, gd, nil
}

func finiteAny(a any) bool {
	switch d := a.(type) {
	case factored:
		return finiteAny(d.a) && finiteAny(d.b)
	case []float32:
		return linalg.Finite(d)
	case []float64:
		return linalg.Finite(d)
	}
	return true
}

func name(p gorgonia.ValueGrad) string {
	switch n := p.(type) {
	case Constrained:
		return fmt.Sprintf("weight %q", n.Name())
	case *gorgonia.Node:
		return fmt.Sprintf("parameter %q", n.Name())
	}
	return fmt.Sprintf("parameter %T", p)
}
