package optim_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orthonet/orthonet/dist"
	"github.com/orthonet/orthonet/internal/testval"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/optim"
)

// shardModel is a small least-squares model whose gradients are means over
// a batch, as a network's are: out = a W + c (W a 12 x 6 Stiefel weight, c
// a bias) and out2 = u V (V a wide 4 x 10 weight with orthonormal rows),
// with the loss 0.5 ||out - t||^2 + 0.5 ||out2 - s||^2 per example.
type shardModel[T optim.Float] struct {
	w, c, v    []T // the values
	gw, gc, gv []T // dense gradients
	fa, fb     []T // W's gradient as fa^T fb (K x 12, K x 6)
	factored   bool
	params     []optim.Param
	solver     *optim.Solver
}

const (
	mN, mP    = 12, 6
	mU, mV    = 4, 10
	mBatch    = 12 // global batch, divisible by 1, 2 and 3 ranks
	mInputDim = mN + mP + mU + mV
)

// newShardModel returns the model's parameters at the same starting point
// on every rank, and its Solver over groups with o.
func newShardModel[T optim.Float](t testing.TB, factored bool, groups []optim.Group, o optim.Options) *shardModel[T] {
	t.Helper()
	m := &shardModel[T]{w: make([]T, mN*mP), c: make([]T, mP), v: make([]T, mU*mV), factored: factored}
	m.gw, m.gc, m.gv = make([]T, mN*mP), make([]T, mP), make([]T, mU*mV)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, x := range [][]T{m.w, m.c, m.v} {
		for i := range x {
			x[i] = T(rng.NormFloat64())
		}
	}
	m.params = []optim.Param{
		{Name: "w", Shape: []int{mN, mP}, Manifold: manifold.StiefelKind{}, Value: optim.Host[T](m.w), Grad: optim.Host[T](m.gw)},
		{Name: "c", Shape: []int{mP}, Value: optim.Host[T](m.c), Grad: optim.Host[T](m.gc)},
		{Name: "v", Shape: []int{mU, mV}, Manifold: manifold.StiefelKind{}, Value: optim.Host[T](m.v), Grad: optim.Host[T](m.gv)},
	}
	for _, p := range m.params {
		if p.Constrained() {
			if err := p.Orthonormalize(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if factored {
		m.params[0].Grad, m.params[0].GradFunc = nil, nil
		m.fa, m.fb = make([]T, mBatch*mN), make([]T, mBatch*mP)
		m.params[0].GradA, m.params[0].GradB, m.params[0].GradK = optim.Host[T](m.fa), optim.Host[T](m.fb), mBatch
	}
	var err error
	if m.solver, err = optim.NewSolver(m.params, groups, o); err != nil {
		t.Fatal(err)
	}
	return m
}

// batch returns the global batch of step k: mBatch rows of inputs a (12),
// targets t (6), inputs u (4) and targets s (10), the same on every rank.
func batch(k int) [][]float64 {
	rng := rand.New(rand.NewPCG(uint64(k), 99))
	rows := make([][]float64, mBatch)
	for i := range rows {
		rows[i] = make([]float64, mInputDim)
		for j := range rows[i] {
			rows[i][j] = rng.NormFloat64()
		}
	}
	return rows
}

// gradients sets the mean gradients over rows: the whole batch for one
// process, a rank's shard for several. With factored, W's gradient is
// A^T B of the shard's inputs and residuals over the shard's size, padded
// to mBatch rows of zeros (K stays that of the global batch).
func (m *shardModel[T]) gradients(rows [][]float64) {
	clear(m.gw)
	clear(m.gc)
	clear(m.gv)
	clear(m.fa)
	clear(m.fb)
	inv := 1 / T(len(rows))
	res := make([]T, max(mP, mV))
	for k, row := range rows {
		a, tg, u, sg := row[:mN], row[mN:mN+mP], row[mN+mP:mN+mP+mU], row[mN+mP+mU:]
		for j := range mP {
			o := m.c[j] - T(tg[j])
			for i := range mN {
				o += T(a[i]) * m.w[i*mP+j]
			}
			res[j] = o * inv
			m.gc[j] += res[j]
		}
		for i := range mN {
			for j := range mP {
				m.gw[i*mP+j] += T(a[i]) * res[j]
			}
			if m.factored {
				m.fa[k*mN+i] = T(a[i])
			}
		}
		if m.factored {
			copy(m.fb[k*mP:], res[:mP])
		}
		for j := range mV {
			o := -T(sg[j])
			for i := range mU {
				o += T(u[i]) * m.v[i*mV+j]
			}
			res[j] = o * inv
		}
		for i := range mU {
			for j := range mV {
				m.gv[i*mV+j] += T(u[i]) * res[j]
			}
		}
	}
}

// shard returns rank's equal share of rows.
func shard(rows [][]float64, rank, ranks int) [][]float64 {
	n := len(rows) / ranks
	return rows[rank*n : (rank+1)*n]
}

// values returns copies of the model's weights, in float64.
func (m *shardModel[T]) values() []float64 {
	var out []float64
	for _, x := range [][]T{m.w, m.c, m.v} {
		for _, e := range x {
			out = append(out, float64(e))
		}
	}
	return out
}

// ranksDo runs f on every rank of a group of size in its own goroutine and
// returns their errors.
func ranksDo(t *testing.T, size int, f func(c optim.Communicator) error) []error {
	t.Helper()
	comms, err := dist.NewLocal(size, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, size)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = f(c)
		}()
	}
	wg.Wait()
	return errs
}

// dpRules are the rules the data-parallel tests step by: each constrained
// rule with a plain one.
var dpRules = []struct {
	name              string
	constrained, flat optim.Rule
	factored          bool
}{
	{"rsdm-perm+sgd", optim.RSDMConfig{SubmanifoldSize: 4, Seed: 7}, optim.SGDConfig{Momentum: 0.9}, false},
	{"rsdm-perm-factored+adam", optim.RSDMConfig{SubmanifoldSize: 3, Seed: 8}, optim.AdamConfig{}, true},
	{"rsdm-blocks-momentum+adam", optim.RSDMConfig{SubmanifoldSize: 4, Sampling: optim.Blocks, Momentum: 0.5, InnerSteps: 2, Seed: 9}, optim.AdamConfig{}, false},
	{"rgd+sgd", optim.RGDConfig{Momentum: 0.9}, optim.SGDConfig{}, false},
	{"radam+adamw", optim.RiemannianAdamConfig{}, optim.AdamWConfig{}, false},
}

// TestDataParallelRulesCoverRowSamplers checks that dpRules steps RSDM
// with every sampler of optim.Samplers that draws rows, so that the
// data-parallel tests do not leave a new one out silently (a dense sampler
// is refused there: TestDataParallelRefusesNamesRowSamplers).
func TestDataParallelRulesCoverRowSamplers(t *testing.T) {
	for _, s := range optim.Samplers {
		if !s.Rows() {
			continue
		}
		covered := false
		for _, r := range dpRules {
			if c, ok := r.constrained.(optim.RSDMConfig); ok {
				sampling := c.Sampling
				if sampling == nil {
					sampling = optim.Permutation
				}
				covered = covered || sampling.String() == s.String()
			}
		}
		if !covered {
			t.Errorf("no rule of dpRules (optim/reduce_test.go) samples with %v, a sampler of rows of optim.Samplers: add a line for it", s)
		}
	}
}

func dpGroups(constrained, flat optim.Rule) []optim.Group {
	return []optim.Group{
		{Select: optim.Param.Constrained, Rule: constrained, LR: 0.2},
		{Rule: flat, LR: 0.05},
	}
}

// trainRanks takes steps on size ranks, each on its shard of every global
// batch (steps from first on), starting from the model's start (and
// state, when given), and returns each rank's weights and its model.
func trainRanks[T optim.Float](t *testing.T, size, first, steps int, constrained, flat optim.Rule, factored bool, o optim.Options, start *checkpointed) ([][]float64, []*shardModel[T]) {
	t.Helper()
	out := make([][]float64, size)
	models := make([]*shardModel[T], size)
	errs := ranksDo(t, size, func(c optim.Communicator) error {
		o := o
		o.Comm = c
		m := newShardModel[T](t, factored, dpGroups(constrained, flat), o)
		models[c.Rank()] = m
		if err := start.restore(m); err != nil {
			return err
		}
		for k := first; k < first+steps; k++ {
			m.gradients(shard(batch(k), c.Rank(), size))
			if err := m.solver.Step(); err != nil {
				return fmt.Errorf("step %d: %w", k, err)
			}
		}
		out[c.Rank()] = m.values()
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d of %d: %v", r, size, err)
		}
	}
	return out, models
}

// trainAlone takes steps on one process with the whole global batches.
func trainAlone[T optim.Float](t *testing.T, first, steps int, constrained, flat optim.Rule, factored bool, comm optim.Communicator, start *checkpointed) ([]float64, *shardModel[T]) {
	t.Helper()
	m := newShardModel[T](t, factored, dpGroups(constrained, flat), optim.Options{Comm: comm})
	if err := start.restore(m); err != nil {
		t.Fatal(err)
	}
	for k := first; k < first+steps; k++ {
		m.gradients(batch(k))
		if err := m.solver.Step(); err != nil {
			t.Fatalf("step %d: %v", k, err)
		}
	}
	return m.values(), m
}

// checkpointed is a saved Solver with its weights; nil restores nothing.
type checkpointed struct {
	values []float64
	states []optim.State
	steps  int
}

func save[T optim.Float](m *shardModel[T]) *checkpointed {
	return &checkpointed{values: m.values(), states: m.solver.State(), steps: m.solver.Steps()}
}

func (c *checkpointed) restore(m any) error {
	if c == nil {
		return nil
	}
	switch m := m.(type) {
	case *shardModel[float32]:
		restoreInto(m, c)
	case *shardModel[float64]:
		restoreInto(m, c)
	}
	var s *optim.Solver
	switch m := m.(type) {
	case *shardModel[float32]:
		s = m.solver
	case *shardModel[float64]:
		s = m.solver
	}
	if err := s.SetState(c.states); err != nil {
		return err
	}
	return s.SetSteps(c.steps)
}

func restoreInto[T optim.Float](m *shardModel[T], c *checkpointed) {
	i := 0
	for _, x := range [][]T{m.w, m.c, m.v} {
		for j := range x {
			x[j] = T(c.values[i])
			i++
		}
	}
}

// tolerance is how far N ranks may end from one process after dpSteps
// steps. The ranks sum their shards' means in another order than one
// process sums the batch, so the gradients differ by a few units of
// rounding (eps ~ 1.2e-7 in float32, 2.2e-16 in float64) times their size
// (O(1) here); a step moves the weights by lr times that, and the
// retractions and Adam's normalization carry it on without growing it by
// more than a small factor over 6 steps. The bounds are about 70 and 150 times
// the largest differences measured (4.2e-7 and 6.7e-16).
func tolerance[T optim.Float]() float64 {
	if _, ok := any(T(0)).(float32); ok {
		return 3e-5
	}
	return 1e-13
}

const dpSteps = 6

// TestDataParallelMatchesOneProcess: N ranks (2 and 3) each stepping on its
// shard of every global batch end, every rank with the same bits, within
// rounding of one process stepping on the whole batches, for every rule in
// float32 and float64; and one process with a Communicator of one rank
// takes the same bits as without one.
func TestDataParallelMatchesOneProcess(t *testing.T) {
	for _, tc := range dpRules {
		t.Run(tc.name+"/float32", func(t *testing.T) { dataParallelMatches[float32](t, tc.constrained, tc.flat, tc.factored) })
		t.Run(tc.name+"/float64", func(t *testing.T) { dataParallelMatches[float64](t, tc.constrained, tc.flat, tc.factored) })
	}
}

func dataParallelMatches[T optim.Float](t *testing.T, constrained, flat optim.Rule, factored bool) {
	alone, _ := trainAlone[T](t, 0, dpSteps, constrained, flat, factored, nil, nil)
	single, _ := trainAlone[T](t, 0, dpSteps, constrained, flat, factored, dist.NewSingle(), nil)
	if !testval.SameBits(alone, single) {
		t.Errorf("a Solver with a communicator of one rank ends %.3g from one without", testval.MaxAbs(alone, single))
	}
	start, _ := trainAlone[T](t, 0, 0, constrained, flat, factored, nil, nil)
	if d := testval.MaxAbs(start, alone); d < 1e-3 {
		t.Fatalf("the weights moved by only %.3g: the test would not see a wrong step", d)
	}
	for _, size := range []int{2, 3} {
		ranks, _ := trainRanks[T](t, size, 0, dpSteps, constrained, flat, factored, optim.Options{ChecksumEvery: 1}, nil)
		for r := 1; r < size; r++ {
			if !testval.SameBits(ranks[0], ranks[r]) {
				t.Errorf("%d ranks: rank %d ends %.3g from rank 0", size, r, testval.MaxAbs(ranks[0], ranks[r]))
			}
		}
		if d := testval.MaxAbs(ranks[0], alone); d > tolerance[T]() {
			t.Errorf("%d ranks end %.3g from one process, want <= %.3g", size, d, tolerance[T]())
		} else {
			t.Logf("%d ranks: %.3g from one process", size, d)
		}
	}
}

// TestDataParallelNonFinite: a NaN in one rank's gradient, or sums that
// overflow though every rank's gradient is finite, make every rank refuse
// the step, naming the rank; no weight or state moves on any rank, so a run
// that goes on ends with the bits of one that never met the bad step.
func TestDataParallelNonFinite(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(m *shardModel[float32], rank int)
		want  string // in every rank's error
	}{
		{"nan-in-rank-1-bias", func(m *shardModel[float32], rank int) {
			if rank == 1 {
				m.gc[2] = float32(math.NaN())
			}
		}, "rank 1"},
		{"inf-in-rank-2-weight", func(m *shardModel[float32], rank int) {
			if rank == 2 {
				m.gw[5] = float32(math.Inf(1))
			}
		}, "rank 2"},
		{"sum-overflows", func(m *shardModel[float32], rank int) { m.gc[0] = 3e38 }, "summed over the ranks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const size, bad = 3, 2
			rule, flat := optim.RSDMConfig{SubmanifoldSize: 4, Sampling: optim.Blocks, Seed: 3}, optim.AdamConfig{}
			want, _ := trainRanks[float32](t, size, 0, 4, rule, flat, false, optim.Options{}, nil)
			got := make([][]float64, size)
			errs := ranksDo(t, size, func(c optim.Communicator) error {
				m := newShardModel[float32](t, false, dpGroups(rule, flat), optim.Options{Comm: c})
				for k := 0; k < 4; k++ {
					if k == bad {
						m.gradients(shard(batch(100), c.Rank(), size))
						tc.spoil(m, c.Rank())
						before := m.values()
						err := m.solver.Step()
						if !errors.Is(err, optim.ErrNotFinite) || !strings.Contains(err.Error(), tc.want) {
							return fmt.Errorf("bad step: %v, want ErrNotFinite naming %q", err, tc.want)
						}
						if !testval.SameBits(before, m.values()) || m.solver.Steps() != bad {
							return fmt.Errorf("the refused step moved the weights or the step count (%d)", m.solver.Steps())
						}
					}
					m.gradients(shard(batch(k), c.Rank(), size))
					if err := m.solver.Step(); err != nil {
						return err
					}
				}
				got[c.Rank()] = m.values()
				return nil
			})
			for r := range size {
				if errs[r] != nil {
					t.Fatalf("rank %d: %v", r, errs[r])
				}
				if !testval.SameBits(got[r], want[r]) {
					t.Errorf("rank %d ends %.3g from a run without the bad step", r, testval.MaxAbs(got[r], want[r]))
				}
			}
		})
	}
}

// TestDataParallelRankFails: a rank whose gradient cannot be had (its
// GradFunc fails) or whose Options.Checked fails the step fails it on every
// rank, naming that rank, with ErrRankFailed and, only when the cause was a
// NaN or Inf gradient, ErrNotFinite.
func TestDataParallelRankFails(t *testing.T) {
	for _, tc := range []struct {
		name      string
		gradErr   error // rank 0's GradFunc error
		checked   error // rank 0's Checked error
		notFinite bool
	}{
		{"gradient", errors.New("no batch"), nil, false},
		{"checked-nan", nil, fmt.Errorf("program: gradient of %q: %w", "c", optim.ErrNotFinite), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := ranksDo(t, 2, func(c optim.Communicator) error {
				m := newShardModel[float64](t, false, dpGroups(optim.RGDConfig{}, optim.SGDConfig{}), optim.Options{})
				m.gradients(shard(batch(0), c.Rank(), 2))
				fail := func(err error) error {
					if c.Rank() == 0 {
						return err
					}
					return nil
				}
				p := optim.Param{Name: "c", Shape: []int{mP}, Value: optim.Host[float64](m.c), GradFunc: func() (optim.Value, error) { return optim.Host[float64](m.gc), fail(tc.gradErr) }}
				o := optim.Options{Comm: c, Checked: func() error { return fail(tc.checked) }}
				s, err := optim.NewSolver([]optim.Param{p}, []optim.Group{{LR: 0.1}}, o)
				if err != nil {
					return err
				}
				before := append([]float64(nil), m.c...)
				err = s.Step()
				if !testval.SameBits(before, m.c) || s.Steps() != 0 {
					return fmt.Errorf("the failed step moved the bias: %w", err)
				}
				return err
			})
			if want := errors.Join(tc.gradErr, tc.checked); !errors.Is(errs[0], tc.gradErr) && !errors.Is(errs[0], tc.checked) || !strings.Contains(fmt.Sprint(errs[0]), want.Error()) {
				t.Errorf("rank 0: %v, want its own error", errs[0])
			}
			if !errors.Is(errs[1], optim.ErrRankFailed) || errors.Is(errs[1], optim.ErrNotFinite) != tc.notFinite || !strings.Contains(fmt.Sprint(errs[1]), "rank 0") {
				t.Errorf("rank 1: %v, want ErrRankFailed naming rank 0 (ErrNotFinite: %v)", errs[1], tc.notFinite)
			}
		})
	}
}

// TestDataParallelChecksum: a weight flipped on one rank is caught by the
// next checksum on every rank, naming that rank, before any weight moves.
func TestDataParallelChecksum(t *testing.T) {
	for _, flipped := range []int{1, 2} {
		t.Run(fmt.Sprintf("rank-%d", flipped), func(t *testing.T) {
			const size = 3
			errs := ranksDo(t, size, func(c optim.Communicator) error {
				m := newShardModel[float64](t, false, dpGroups(optim.RSDMConfig{SubmanifoldSize: 4}, optim.SGDConfig{}), optim.Options{Comm: c, ChecksumEvery: 2})
				for k := 0; k < 4; k++ {
					if k == 2 && c.Rank() == flipped {
						m.w[7] = math.Nextafter(m.w[7], 2) // one unit of rounding
					}
					m.gradients(shard(batch(k), c.Rank(), size))
					before := m.values()
					if err := m.solver.Step(); err != nil {
						if !testval.SameBits(before, m.values()) {
							return fmt.Errorf("the failed step moved the weights: %w", err)
						}
						return fmt.Errorf("step %d: %w", k, err)
					}
				}
				return nil
			})
			want := fmt.Sprintf("step 2: optim: after 2 steps the weights of rank %d differ from rank 0's", flipped)
			for r, err := range errs {
				if !errors.Is(err, optim.ErrDiverged) || !strings.Contains(err.Error(), want) {
					t.Errorf("rank %d: %v, want %q", r, err, want)
				}
			}
		})
	}
}

// TestDataParallelResume: a Solver's state saved on rank 0 of 2 ranks
// resumes on 2 ranks with the bits of a run that never stopped, and on 3
// ranks and on one process within rounding of it, every rank with the same
// bits.
func TestDataParallelResume(t *testing.T) {
	rule, flat := optim.RSDMConfig{SubmanifoldSize: 4, Sampling: optim.Blocks, Momentum: 0.5, InnerSteps: 3, Seed: 5}, optim.AdamConfig{}
	through, _ := trainRanks[float64](t, 2, 0, 2*dpSteps, rule, flat, false, optim.Options{}, nil)
	_, models := trainRanks[float64](t, 2, 0, dpSteps, rule, flat, false, optim.Options{}, nil)
	saved := save(models[0])
	again, _ := trainRanks[float64](t, 2, dpSteps, dpSteps, rule, flat, false, optim.Options{}, saved)
	if !testval.SameBits(again[0], through[0]) || !testval.SameBits(again[1], through[1]) {
		t.Errorf("resumed on 2 ranks: %.3g from the run that never stopped", testval.MaxAbs(again[0], through[0]))
	}
	three, _ := trainRanks[float64](t, 3, dpSteps, dpSteps, rule, flat, false, optim.Options{}, saved)
	if !testval.SameBits(three[0], three[1]) || !testval.SameBits(three[0], three[2]) {
		t.Errorf("resumed on 3 ranks, the ranks differ")
	}
	alone, _ := trainAlone[float64](t, dpSteps, dpSteps, rule, flat, false, nil, saved)
	for name, got := range map[string][]float64{"3 ranks": three[0], "one process": alone} {
		if d := testval.MaxAbs(got, through[0]); d > tolerance[float64]() {
			t.Errorf("resumed on %s: %.3g from 2 ranks, want <= %.3g", name, d, tolerance[float64]())
		}
	}
}

// fakeDevice takes every parameter whose value is not a host slice, with
// a stepper that does nothing.
type fakeDevice struct{}

func (fakeDevice) Check(optim.Param) (bool, error) { return true, nil }
func (fakeDevice) Stepper(optim.Rule, optim.Param, optim.Binding) (optim.Stepper, error) {
	return fakeStepper{}, nil
}

type fakeStepper struct{}

// fakeValue is a device's memory of 2 float64 elements.
type fakeValue struct{}

func (fakeValue) Len() int      { return 2 }
func (fakeValue) Float32() bool { return false }

func (fakeStepper) Prepare(optim.Gradient, float64) error { return nil }
func (fakeStepper) Commit() error                         { return nil }
func (fakeStepper) Abort()                                {}
func (fakeStepper) State() optim.State                    { return optim.State{} }
func (fakeStepper) SetState(optim.State) error            { return nil }

// TestDataParallelRefuses: what a data-parallel Solver does not do yet is
// refused by NewSolver with ErrNotDistributed, naming what.
func TestDataParallelRefuses(t *testing.T) {
	w := newShardModel[float64](t, false, dpGroups(optim.RGDConfig{}, optim.SGDConfig{}), optim.Options{}).params
	device := []optim.Param{{Name: "d", Shape: []int{2}, Value: fakeValue{}}}
	for _, tc := range []struct {
		name   string
		params []optim.Param
		rule   optim.Rule
		o      optim.Options
		want   string
	}{
		{"orthogonal sampler", w, optim.RSDMConfig{SubmanifoldSize: 3, Sampling: optim.Orthogonal}, optim.Options{}, `weight "w": RSDM's orth sampler`},
		{"clipping", w, optim.RGDConfig{}, optim.Options{ClipNorm: 1}, "gradient clipping"},
		{"device", device, optim.RGDConfig{}, optim.Options{Device: fakeDevice{}}, `parameter "d": lives on a device`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := optim.NewSolver(tc.params, dpGroups(tc.rule, optim.SGDConfig{}), tc.o); err != nil {
				t.Fatalf("without a communicator: %v", err)
			}
			tc.o.Comm = dist.NewSingle()
			_, err := optim.NewSolver(tc.params, dpGroups(tc.rule, optim.SGDConfig{}), tc.o)
			if !errors.Is(err, optim.ErrNotDistributed) || !strings.Contains(fmt.Sprint(err), tc.want) {
				t.Errorf("%v, want ErrNotDistributed naming %q", err, tc.want)
			}
		})
	}
}

// TestDataParallelTraffic: a Solver says what it all-reduces per step: r x
// r numbers per RSDM weight, the gradient for RGD and the plain
// parameters, a flag per rank, against every gradient in full.
func TestDataParallelTraffic(t *testing.T) {
	for _, tc := range []struct {
		rule             optim.Rule
		constrained, all int64 // numbers
	}{
		{optim.RSDMConfig{SubmanifoldSize: 4}, 4*4 + 4*4, mN*mP + mP + mU*mV},
		{optim.RGDConfig{}, mN*mP + mU*mV, mN*mP + mP + mU*mV},
	} {
		errs := ranksDo(t, 2, func(c optim.Communicator) error {
			m := newShardModel[float32](t, false, dpGroups(tc.rule, optim.SGDConfig{}), optim.Options{Comm: c})
			want := optim.Traffic{Constrained: 4 * tc.constrained, Plain: 4 * mP, Flags: 4 * 2, FullGradient: 4 * tc.all}
			if got := m.solver.Traffic(); got != want {
				return fmt.Errorf("%v: traffic %+v, want %+v", tc.rule, got, want)
			}
			return nil
		})
		if err := errors.Join(errs...); err != nil {
			t.Error(err)
		}
	}
	if got := newShardModel[float32](t, false, dpGroups(optim.RGDConfig{}, nil), optim.Options{}).solver.Traffic(); got != (optim.Traffic{}) {
		t.Errorf("a Solver without a communicator: traffic %+v, want none", got)
	}
}

// TestDataParallelAllocs: a data-parallel step allocates no more than a
// step alone: nothing for dense gradients.
func TestDataParallelAllocs(t *testing.T) {
	for _, factored := range []bool{false, true} {
		var allocs [2]float64
		for i, c := range []optim.Communicator{nil, dist.NewSingle()} {
			m := newShardModel[float32](t, factored, dpGroups(optim.RSDMConfig{SubmanifoldSize: 4}, optim.AdamConfig{}), optim.Options{Comm: c, ChecksumEvery: 3})
			m.gradients(batch(0))
			var err error
			allocs[i] = testing.AllocsPerRun(20, func() { err = errors.Join(err, m.solver.Step()) })
			if err != nil {
				t.Fatal(err)
			}
		}
		if allocs[1] > allocs[0] || !factored && allocs[1] != 0 {
			t.Errorf("factored %v: %v allocations per data-parallel step, %v alone", factored, allocs[1], allocs[0])
		}
	}
}

// BenchmarkDataParallelRSDM steps the paper's 1024 x 1024 layer with RSDM
// (r = 300, permutation sampling, float32) on 1 and 2 in-process ranks and
// reports what a step all-reduces against what a full-gradient all-reduce
// would move: 90,000 numbers instead of 1,048,576. Ranks in one process
// share its cores: with OpenBLAS, OPENBLAS_NUM_THREADS=1 keeps 2 ranks from
// oversubscribing 2 cores (measured here: 10 ms a step against 28 ms).
func BenchmarkDataParallelRSDM(b *testing.B) {
	const n, r = 1024, 300
	rng := rand.New(rand.NewPCG(1, 1))
	w0, g := make([]float32, n*n), make([]float32, n*n)
	for i := range w0 {
		w0[i], g[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	if err := (optim.Param{Name: "w", Shape: []int{n, n}, Manifold: manifold.StiefelKind{}, Value: optim.Host[float32](w0)}).Orthonormalize(); err != nil {
		b.Fatal(err)
	}
	for _, ranks := range []int{1, 2} {
		b.Run(fmt.Sprintf("ranks=%d", ranks), func(b *testing.B) {
			comms, err := dist.NewLocal(ranks, time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			solvers := make([]*optim.Solver, ranks)
			for k, c := range comms {
				w := append([]float32(nil), w0...)
				p := []optim.Param{{Name: "w", Shape: []int{n, n}, Manifold: manifold.StiefelKind{}, Value: optim.Host[float32](w), Grad: optim.Host[float32](g)}}
				if solvers[k], err = optim.NewSolver(p, []optim.Group{{Rule: optim.RSDMConfig{SubmanifoldSize: r}, LR: 1e-3}}, optim.Options{Comm: c}); err != nil {
					b.Fatal(err)
				}
			}
			tr := solvers[0].Traffic()
			b.ResetTimer()
			var wg sync.WaitGroup
			errs := make([]error, ranks)
			for k := range solvers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range b.N {
						if err := solvers[k].Step(); err != nil {
							errs[k] = err
							return
						}
					}
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(tr.Constrained), "constrained-B/step")
			b.ReportMetric(float64(tr.Plain), "plain-B/step")
			b.ReportMetric(float64(tr.FullGradient), "full-gradient-B/step")
			b.ReportMetric(float64(tr.FullGradient)/float64(tr.Constrained+tr.Plain+tr.Flags), "x-fewer-B")
		})
	}
}

// Two ranks, goroutines here (processes under mpirun with dist.OpenMPI),
// each hold the same weight and the gradient of their half of a batch; their
// Solvers sum what RSDM needs of the gradients, the r x r matrix
// P G (PX)^T, and take the same step from its mean.
func ExampleOptions_dataParallel() {
	comms, _ := dist.NewLocal(2, time.Minute)
	var weights [2][]float64
	var traffic optim.Traffic
	var wg sync.WaitGroup
	for k, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, g := make([]float64, 16*4), make([]float64, 16*4)
			for i := range w {
				w[i] = math.Sin(float64(i)) // the same start on every rank
				g[i] = math.Cos(float64(i * (k + 1)))
			}
			p := optim.Param{Name: "w", Shape: []int{16, 4}, Manifold: manifold.StiefelKind{}, Value: optim.Host[float64](w), Grad: optim.Host[float64](g)}
			_ = p.Orthonormalize()
			s, err := optim.NewSolver([]optim.Param{p}, []optim.Group{{Rule: optim.RSDMConfig{SubmanifoldSize: 4, Seed: 1}, LR: 0.1}}, optim.Options{Comm: c})
			for range 3 {
				err = errors.Join(err, s.Step())
			}
			if err = errors.Join(err, s.CheckWeights()); err != nil {
				fmt.Println(err)
			}
			weights[k], traffic = w, s.Traffic()
		}()
	}
	wg.Wait()
	fmt.Printf("a step all-reduces %d bytes of P G (PX)^T, not %d of G\n", traffic.Constrained, traffic.FullGradient)
	fmt.Println("both ranks hold the same weight:", slices.Equal(weights[0], weights[1]))
	// Output:
	// a step all-reduces 128 bytes of P G (PX)^T, not 512 of G
	// both ranks hold the same weight: true
}

// TestDataParallelRefusesNamesRowSamplers: the refusal of a dense sampler
// names, as those to use instead, every sampler of optim.Samplers that
// draws rows and none that does not.
func TestDataParallelRefusesNamesRowSamplers(t *testing.T) {
	w := newShardModel[float64](t, false, dpGroups(optim.RGDConfig{}, optim.SGDConfig{}), optim.Options{}).params
	for _, dense := range optim.Samplers {
		if dense.Rows() {
			continue
		}
		rule := optim.RSDMConfig{SubmanifoldSize: 3, Sampling: dense}
		_, err := optim.NewSolver(w, dpGroups(rule, optim.SGDConfig{}), optim.Options{Comm: dist.NewSingle()})
		msg := fmt.Sprint(err)
		_, instead, ok := strings.Cut(msg, "sample rows: ")
		if !errors.Is(err, optim.ErrNotDistributed) || !ok {
			t.Fatalf("%v: %v, want ErrNotDistributed naming the samplers of rows", dense, err)
		}
		for _, s := range optim.Samplers {
			if named := strings.Contains(instead, s.String()); named != s.Rows() {
				t.Errorf("%v: %q names %v: %v, want %v", dense, instead, s, named, s.Rows())
			}
		}
	}
}
