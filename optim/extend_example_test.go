package optim_test

import (
	"fmt"
	"log"
	"math"
	"math/rand/v2"

	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/optim"
)

// cyclic is a sampler of one's own: it draws the rows in order, r at a
// time, wrapping around (a deterministic cousin of Blocks).
type cyclic struct{}

func (cyclic) String() string { return "cyclic" }
func (cyclic) Rows() bool     { return true }
func (cyclic) Start(n, r int) (optim.Draws, error) {
	return &cyclicDraws{n: n}, nil
}

// cyclicDraws is where a cyclic sampler stands for one weight.
type cyclicDraws struct{ n, next, prev int }

func (d *cyclicDraws) Draw(_ *rand.Rand, p *optim.Submanifold) error {
	d.prev = d.next
	for i := range p.Rows {
		p.Rows[i] = (d.next + i) % d.n
	}
	d.next = (d.next + len(p.Rows)) % d.n
	return nil
}
func (d *cyclicDraws) Undraw()             { d.next = d.prev }
func (d *cyclicDraws) Save(st optim.State) { st.Counters["cyclic_next"] = int64(d.next) }
func (d *cyclicDraws) Load(st optim.State) (func(), error) {
	v, ok := st.Counters["cyclic_next"]
	if !ok || v < 0 || v >= int64(d.n) {
		return nil, fmt.Errorf("cyclic: state has no row position in 0 to %d", d.n-1)
	}
	return func() { d.next = int(v) }, nil
}

// ExampleSampler trains a 12 x 3 weight on the Stiefel manifold by RSDM
// with a sampler defined here, pulling it towards a target matrix T (loss
// ||W - T||^2 / 2), and moves the solver's state into a second solver.
func ExampleSampler() {
	rng := rand.New(rand.NewPCG(1, 2))
	st, _ := manifold.NewStiefel[float64](12, 3)
	w, target := make([]float64, 36), make([]float64, 36)
	_ = st.Random(w, rng)
	for i := range target {
		target[i] = rng.NormFloat64()
	}
	p := optim.Param{Name: "w", Shape: []int{12, 3}, Manifold: manifold.StiefelKind{}, Value: optim.Host[float64](w), Grad: optim.Host[float64](make([]float64, 36))}
	groups := []optim.Group{{LR: 0.3, Rule: optim.RSDMConfig{SubmanifoldSize: 4, Sampling: cyclic{}}}}
	solver, err := optim.NewSolver([]optim.Param{p}, groups, optim.Options{})
	if err != nil {
		log.Fatal(err)
	}
	loss := func() (s float64) {
		for i := range w {
			s += (w[i] - target[i]) * (w[i] - target[i]) / 2
		}
		return s
	}
	start := loss()
	for step := 0; step < 200; step++ {
		for i := range w {
			p.Grad.(optim.Host[float64])[i] = w[i] - target[i]
		}
		if err := solver.Step(); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("loss fell:", loss() < start, "on the manifold:", st.Feasibility(w) < 1e-12)
	fmt.Println("rows drawn next:", solver.State()[0].Sampler().Counters["cyclic_next"])
	// Output:
	// loss fell: true on the manifold: true
	// rows drawn next: 8
}

// signDescent is a rule of one's own for unconstrained parameters: sign
// gradient descent, w <- w - lr sign(g).
type signDescent struct{}

func (signDescent) String() string    { return "sign" }
func (signDescent) Constrained() bool { return false }
func (signDescent) Stepper(p optim.Param, _ optim.Binding) (optim.Stepper, error) {
	w, ok := p.Value.(optim.Host[float64])
	if !ok {
		return nil, fmt.Errorf("sign descent steps float64 values, not %T", p.Value)
	}
	return &signStepper{w: w}, nil
}

// signStepper is sign descent on one parameter; it keeps no state.
type signStepper struct {
	w, g []float64
	lr   float64
}

func (s *signStepper) Prepare(grad optim.Gradient, lr float64) error {
	g, ok := grad.(optim.Host[float64])
	if !ok {
		return fmt.Errorf("sign descent: gradient %T", grad)
	}
	s.g, s.lr = g, lr
	return nil
}
func (s *signStepper) Commit() error {
	for i, g := range s.g {
		switch {
		case g > 0:
			s.w[i] -= s.lr
		case g < 0:
			s.w[i] += s.lr
		}
	}
	return nil
}
func (s *signStepper) Abort()             {}
func (s *signStepper) State() optim.State { return optim.State{Kind: "sign"} }
func (s *signStepper) SetState(st optim.State) error {
	if st.Kind != "sign" {
		return fmt.Errorf("sign descent: a %q state", st.Kind)
	}
	return nil
}

// ExampleRule steps a bias by a rule defined here, sign descent with a
// step size of 0.25 halving every 4 steps, towards a target.
func ExampleRule() {
	b := []float64{1, -1, 0.5}
	target := []float64{0, 0.5, 2}
	p := optim.Param{Name: "bias", Shape: []int{3}, Value: optim.Host[float64](b), Grad: optim.Host[float64](make([]float64, 3))}
	solver, err := optim.NewSolver([]optim.Param{p}, []optim.Group{{Rule: signDescent{}, LR: 0.25, Schedule: optim.StepDecay{Every: 4, Gamma: 0.5}}}, optim.Options{})
	if err != nil {
		log.Fatal(err)
	}
	for step := 0; step < 12; step++ {
		for i := range b {
			p.Grad.(optim.Host[float64])[i] = b[i] - target[i]
		}
		if err := solver.Step(); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("%.4f\n", b)
	// Output:
	// [0.0000 0.5000 2.0000]
}

// sphere is a manifold of one's own, the unit sphere S^(n-1) as the n x 1
// points of St(n,1); its retraction is normalization.
type sphere struct{}

func (sphere) String() string { return "sphere" }
func (sphere) Float32(n, p int) (manifold.Manifold[float32], error) {
	return nil, fmt.Errorf("sphere: float64 points only")
}
func (sphere) Float64(n, p int) (manifold.Manifold[float64], error) {
	if p != 1 {
		return nil, fmt.Errorf("sphere: points are n x 1, not n x %d", p)
	}
	return unitSphere(n), nil
}

// unitSphere is S^(n-1) for float64 points.
type unitSphere int

func (s unitSphere) Dims() (int, int) { return int(s), 1 }
func (s unitSphere) Proj(dst, x, v []float64) error {
	var d float64
	for i := range x {
		d += x[i] * v[i]
	}
	for i := range x {
		dst[i] = v[i] - d*x[i]
	}
	return nil
}
func (s unitSphere) Retract(dst, x, v []float64) error {
	for i := range x {
		dst[i] = x[i] + v[i]
	}
	return s.Orthonormalize(dst)
}
func (s unitSphere) Random(dst []float64, rng *rand.Rand) error {
	for i := range dst {
		dst[i] = rng.NormFloat64()
	}
	return s.Orthonormalize(dst)
}
func (s unitSphere) Feasibility(x []float64) float64 {
	var d float64
	for _, v := range x {
		d += v * v
	}
	return math.Abs(d - 1)
}
func (s unitSphere) Orthonormalize(x []float64) error {
	var d float64
	for _, v := range x {
		d += v * v
	}
	if d == 0 {
		return fmt.Errorf("sphere: the zero vector has no direction")
	}
	for i := range x {
		x[i] /= math.Sqrt(d)
	}
	return nil
}

// ExampleParam_ownManifold finds the leading eigenvector of diag(1, ..., 6) on a
// manifold defined here, the unit sphere, by RGD through the Solver
// (minimizing -x^T A x / 2), from a Gaussian start put on the sphere by
// Param.Orthonormalize.
func ExampleParam_ownManifold() {
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float64, 6)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	p := optim.Param{Name: "x", Shape: []int{6, 1}, Manifold: sphere{}, Value: optim.Host[float64](x), Grad: optim.Host[float64](make([]float64, 6))}
	if _, err := optim.NewSolver([]optim.Param{p}, []optim.Group{{Rule: optim.RGDConfig{}, LR: 0.1}}, optim.Options{}); err != nil {
		fmt.Println("a Gaussian start is refused")
	}
	if err := p.Orthonormalize(); err != nil {
		log.Fatal(err)
	}
	solver, err := optim.NewSolver([]optim.Param{p}, []optim.Group{{Rule: optim.RGDConfig{Momentum: 0.5}, LR: 0.1}}, optim.Options{})
	if err != nil {
		log.Fatal(err)
	}
	for step := 0; step < 300; step++ {
		for i := range x {
			p.Grad.(optim.Host[float64])[i] = -float64(i+1) * x[i]
		}
		if err := solver.Step(); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("|x_6| = %.6f, norm - 1 = %.1e\n", math.Abs(x[5]), unitSphere(6).Feasibility(x))
	// Output:
	// a Gaussian start is refused
	// |x_6| = 1.000000, norm - 1 = 0.0e+00
}
