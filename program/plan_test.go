package program

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
)

// TestChainedElementwise compiles models with and without chained
// elementwise kernels on every test backend (chained on the host too): their losses, outputs and
// gradients agree to the bit, since a Chain rounds each step as its own
// kernel did, and the chained programs launch no more kernels (the
// charRNN at most three quarters as many, logistic regression 60%).
func TestChainedElementwise(t *testing.T) {
	type build struct {
		name   string
		build  func() (*model, error)
		before float64 // the most kernels chained, as a fraction of those unchained
	}
	var builds []build
	for _, sm := range smallModels {
		before := map[string]float64{"charrnn": 0.75, "logreg": 0.6}[sm.name]
		builds = append(builds, build{sm.name, func() (*model, error) { return sm.build(t), nil }, before})
	}
	for _, mc := range modelCases() {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			builds = append(builds, build{fmt.Sprintf("%s/%v", mc.name, dt), func() (*model, error) { return mc.build(dt) }, 0})
		}
	}
	for bi, be := range testBackends(t) {
		for _, b := range builds {
			t.Run(fmt.Sprintf("%s/backend%d", b.name, bi), func(t *testing.T) {
				ref, got := newSides(t, b.name, b.build, compiled(be, sideConfig{unchained: true}), compiled(be, sideConfig{chainOnHost: true}))
				agree(t, b.name, ref, got, 0, 0)
				kr, kg := ref.(*programSide).prog, got.(*programSide).prog
				chains := 0
				for _, k := range kg.kernels {
					if _, ok := k.(backend.Chain); ok {
						chains++
					}
				}
				t.Logf("%d kernels unchained, %d chained (%d chains)", kr.Kernels(), kg.Kernels(), chains)
				limit := b.before
				if limit == 0 {
					limit = 1
				}
				if f := float64(kg.Kernels()) / float64(kr.Kernels()); f > limit || b.before > 0 && chains == 0 {
					t.Errorf("%d kernels chained, %d unchained (%d chains): want at most %.2f of them", kg.Kernels(), kr.Kernels(), chains, limit)
				}
			})
		}
	}
}

// TestChainHazards runs the chaining phase on kernel lists of its own:
// Map, Map into a temporary becomes one Chain; not where a kernel between
// them writes the first one's input, where the temporary is read twice or
// kept, where it is read at an offset, or where the sizes differ.
func TestChainHazards(t *testing.T) {
	mk := func(n int) *vbuf { return &vbuf{dt: backend.Float64, n: n, def: -1, last: -1} }
	at := func(vb *vbuf, off int) backend.Operand { return backend.Operand{Buf: vb, Off: off} }
	for _, c := range []struct {
		name   string
		build  func(x, tmp, out *vbuf) []backend.Kernel
		keep   bool // tmp resident
		chains bool
	}{
		{"fused", func(x, tmp, out *vbuf) []backend.Kernel {
			return []backend.Kernel{backend.Map{Op: backend.Exp, N: 8, Src: at(x, 0), Dst: at(tmp, 0)}, backend.Map{Op: backend.Tanh, N: 8, Src: at(tmp, 0), Dst: at(out, 0)}}
		}, false, true},
		{"input written between", func(x, tmp, out *vbuf) []backend.Kernel {
			return []backend.Kernel{backend.Map{Op: backend.Exp, N: 8, Src: at(x, 0), Dst: at(tmp, 0)}, backend.Fill{N: 8, Dst: at(x, 0), Value: 2},
				backend.Map{Op: backend.Tanh, N: 8, Src: at(tmp, 0), Dst: at(out, 0)}}
		}, false, false},
		{"read twice", func(x, tmp, out *vbuf) []backend.Kernel {
			return []backend.Kernel{backend.Map{Op: backend.Exp, N: 8, Src: at(x, 0), Dst: at(tmp, 0)}, backend.Map{Op: backend.Tanh, N: 8, Src: at(tmp, 0), Dst: at(out, 0)},
				backend.Map{Op: backend.Neg, N: 8, Src: at(tmp, 0), Dst: at(x, 0)}}
		}, false, false},
		{"kept", func(x, tmp, out *vbuf) []backend.Kernel {
			return []backend.Kernel{backend.Map{Op: backend.Exp, N: 8, Src: at(x, 0), Dst: at(tmp, 0)}, backend.Map{Op: backend.Tanh, N: 8, Src: at(tmp, 0), Dst: at(out, 0)}}
		}, true, false},
		{"at an offset", func(x, tmp, out *vbuf) []backend.Kernel {
			return []backend.Kernel{backend.Map{Op: backend.Exp, N: 8, Src: at(x, 0), Dst: at(tmp, 0)}, backend.Map{Op: backend.Tanh, N: 4, Src: at(tmp, 4), Dst: at(out, 0)}}
		}, false, false},
		{"as a scalar", func(x, tmp, out *vbuf) []backend.Kernel {
			return []backend.Kernel{backend.Map{Op: backend.Exp, N: 8, Src: at(x, 0), Dst: at(tmp, 0)},
				backend.Zip{Op: backend.Add, N: 8, A: at(x, 0), B: at(tmp, 0), BScalar: true, Dst: at(out, 0)}}
		}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			x, tmp, out := mk(8), mk(8), mk(8)
			x.persistent, out.persistent, tmp.persistent = true, true, c.keep
			comp := &compiler{kernels: c.build(x, tmp, out), vbufs: []*vbuf{x, tmp, out}, cfg: Config{chainOnHost: true}}
			n := len(comp.kernels)
			comp.chainElementwise()
			chains := 0
			for _, k := range comp.kernels {
				if _, ok := k.(backend.Chain); ok {
					chains++
				}
			}
			if c.chains != (chains == 1 && len(comp.kernels) == n-1) || !c.chains && len(comp.kernels) != n {
				t.Errorf("%d kernels became %d with %d chains; want chained %v", n, len(comp.kernels), chains, c.chains)
			}
		})
	}
}

// countingBackend counts the buffers allocated, and where free is set
// reports it as its device's free memory.
type countingBackend struct {
	backend.Backend
	allocs int
	free   int
}

func (b *countingBackend) Alloc(dt backend.DType, n int) (backend.Buffer, error) {
	b.allocs++
	return b.Backend.Alloc(dt, n)
}

// deviceBackend is a countingBackend with a MemInfo method.
type deviceBackend struct{ *countingBackend }

func (b deviceBackend) MemInfo() (free, total int, err error) { return b.free, 2 * b.free, nil }

// TestCompileMemoryBudget compiles the gradient of a 64 x 128 by
// 128 x 256 product under budgets: one below what its buffers take is
// refused before anything is allocated, naming the largest buffers'
// nodes (the weight and its gradient, 256 kB each); a large one, no
// bound and the default compile it.
func TestCompileMemoryBudget(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxBytes int64
		free     int // a device's free memory, where above 0
		want     string
	}{
		{name: "tiny", maxBytes: 1000, want: "more than the 1.0 kB available (Config.MaxBytes)"},
		{name: "below", maxBytes: 600_000, want: "more than the 600.0 kB available"},
		{name: "device", free: 4096, want: "the device's free memory"},
		{name: "large", maxBytes: 1 << 30},
		{name: "unbounded", maxBytes: -1},
		{name: "default"},
		{name: "device-large", free: 1 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := G.NewGraph()
			x := newLeaf(g, tensor.Float64, "x", []int{64, 128}, make([]float64, 64*128))
			w := newLeaf(g, tensor.Float64, "weight", []int{128, 256}, make([]float64, 128*256))
			loss := G.Must(G.Mean(G.Must(G.Mul(x, w))))
			if _, err := G.Grad(loss, w); err != nil {
				t.Fatal(err)
			}
			cb := &countingBackend{Backend: cpu.New(cpu.Options{}), free: tc.free}
			defer cb.Close()
			var be backend.Backend = cb
			if tc.free > 0 {
				be = deviceBackend{cb}
			}
			p, err := Compile(g, Config{Backend: be, Outputs: []*G.Node{loss}, Params: []param.Param{param.Plain(w)},
				Inputs: []*G.Node{x}, MaxBytes: tc.maxBytes})
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				p.Close()
				return
			}
			if !errors.Is(err, ErrMemory) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `the gradient of "weight"`) {
				t.Fatalf("error %v, want ErrMemory saying %q and naming the gradient of \"weight\"", err, tc.want)
			}
			if cb.allocs != 0 {
				t.Errorf("%d buffers allocated before the refusal, want none", cb.allocs)
			}
			t.Log(err)
		})
	}
}

// reportingBackend is a countingBackend over a backend with a MemInfo
// method, which it passes on.
type reportingBackend struct {
	*countingBackend
	m memInfo
}

func (b reportingBackend) MemInfo() (free, total int, err error) { return b.m.MemInfo() }

// hugeProduct compiles, by default budget, the forward pass of a
// (2^18, 2^20) input by a small weight: its input buffer alone would take
// 1 TB, more than any machine these tests run on has, so Compile must
// refuse it, before allocating, saying what set the budget.
func hugeProduct(t *testing.T, be backend.Backend, source string) {
	t.Helper()
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(1<<18, 1<<20), G.WithName("huge input"))
	w := newLeaf(g, tensor.Float32, "w", []int{1 << 20, 2}, make([]float64, 2<<20))
	y := G.Must(G.Mul(x, w))
	cb := &countingBackend{Backend: be}
	var counted backend.Backend = cb
	if m, ok := be.(memInfo); ok {
		counted = reportingBackend{cb, m}
	}
	_, err := Compile(g, Config{Backend: counted, Outputs: []*G.Node{y}, Params: []param.Param{param.Plain(w)}, NoGrad: true, Inputs: []*G.Node{x}})
	if !errors.Is(err, ErrMemory) || !strings.Contains(err.Error(), `"huge input"`) || !strings.Contains(err.Error(), source) {
		t.Fatalf("error %v, want ErrMemory naming \"huge input\" and %q", err, source)
	}
	if cb.allocs != 0 {
		t.Errorf("%d buffers allocated before the refusal", cb.allocs)
	}
	t.Log(err)
}

// TestCompileDefaultBudget checks the default budget on the CPU backend:
// the host's memory, as internal/membudget finds it.
func TestCompileDefaultBudget(t *testing.T) {
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc/meminfo: the host's memory is not known")
	}
	be := cpu.New(cpu.Options{})
	defer be.Close()
	hugeProduct(t, be, "available (")
}

var listingFile = flag.String("listing", "", "TestListing writes the programs' listing to this file")

// TestListing, with -listing FILE, writes a listing of every kernel (its
// fields, each operand as its buffer and offset), parameter and buffer of
// the programs of the test models (FFN, ViT, CNN, RNN, custom) and
// Gorgonia's convnet, in both float types, on the CPU backend and on those
// moreBackends adds: a refactoring of the compiler that must not change
// what it emits compares the file before and after (docs/executor.md). The
// listing of one build must be the same on a second compile: that is what
// it asserts without the flag.
func TestListing(t *testing.T) {
	backends := append([]func() backend.Backend{func() backend.Backend { return cpu.New(cpu.Options{}) }}, moreBackends...)
	var all strings.Builder
	for bi, start := range backends {
		be := start()
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			for _, mc := range append(modelCases(), modelCase{"convnet", func(dt tensor.Dtype) (*model, error) {
				m, _ := convnet(t, 4, dt)
				return m, nil
			}}) {
				for ci, cfg := range listingConfigs() {
					first := listModel(t, be, mc, dt, cfg)
					if *listingFile == "" {
						if second := listModel(t, be, mc, dt, cfg); second != first {
							t.Errorf("%s %v on backend %d, config %d: two compiles list differently", mc.name, dt, bi, ci)
						}
						continue
					}
					fmt.Fprintf(&all, "== backend %d (%T) %s %v config %d\n%s", bi, be, mc.name, dt, ci, first)
				}
			}
		}
		be.Close()
	}
	if *listingFile != "" {
		if err := os.WriteFile(*listingFile, []byte(all.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// listingConfigs are the compiler's settings TestListing lists under: the
// defaults, and RSDM with r = 2 asking for factored gradients.
func listingConfigs() []Config {
	rsdm := groups(optim.Group{LR: 0.3, Rule: optim.RSDMConfig{SubmanifoldSize: 2, Seed: 1}}, optim.Group{Rule: optim.AdamConfig{}, LR: 0.01})
	return []Config{{}, {Groups: rsdm}}
}

// listModel compiles mc's model on be under cfg and lists its program.
func listModel(t *testing.T, be backend.Backend, mc modelCase, dt tensor.Dtype, cfg Config) string {
	m, err := mc.build(dt)
	if err != nil {
		t.Fatal(err)
	}
	if mc.name != "convnet" { // convnet's gradients are in its graph
		if _, err := G.Grad(m.loss, param.Nodes(m.params)...); err != nil {
			t.Fatal(err)
		}
	}
	p := m.compile(t, be, cfg)
	l := lister{ids: map[backend.Buffer]int{}}
	for _, pm := range p.Params() {
		fmt.Fprintf(&l.b, "param %s manifold=%v size=%d value=%s grad=%s gradA=%s gradB=%s k=%d\n", pm.Node.Name(), pm.Manifold, pm.Size,
			l.operand(pm.Value), l.operand(pm.Grad), l.operand(pm.GradA), l.operand(pm.GradB), pm.GradK)
	}
	for _, k := range p.kernels {
		l.b.WriteString(backend.Name(k))
		l.value(reflect.ValueOf(k))
		l.b.WriteByte('\n')
	}
	for i, b := range l.bufs {
		fmt.Fprintf(&l.b, "buffer b%d %v %d\n", i, b.DType(), b.Len())
	}
	return l.b.String()
}

// lister names each buffer by the order it first appears in.
type lister struct {
	b    strings.Builder
	ids  map[backend.Buffer]int
	bufs []backend.Buffer
}

func (l *lister) operand(op backend.Operand) string {
	if op.Buf == nil {
		return "-"
	}
	id, ok := l.ids[op.Buf]
	if !ok {
		id = len(l.bufs)
		l.ids[op.Buf] = id
		l.bufs = append(l.bufs, op.Buf)
	}
	return fmt.Sprintf("b%d+%d", id, op.Off)
}

// value writes v's fields, operands by their buffer.
func (l *lister) value(v reflect.Value) {
	switch {
	case v.Type() == reflect.TypeFor[backend.Operand]():
		l.b.WriteString(" " + l.operand(v.Interface().(backend.Operand)))
	case v.Kind() == reflect.Struct:
		for i := range v.NumField() {
			if !v.Type().Field(i).IsExported() {
				continue
			}
			l.b.WriteString(" " + v.Type().Field(i).Name + ":")
			l.value(v.Field(i))
		}
	case v.Kind() == reflect.Slice || v.Kind() == reflect.Array:
		l.b.WriteString(" [")
		for i := range v.Len() {
			l.value(v.Index(i))
		}
		l.b.WriteString(" ]")
	case v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface:
		if v.IsNil() {
			l.b.WriteString(" nil")
			return
		}
		l.value(v.Elem())
	default:
		fmt.Fprintf(&l.b, " %v", v.Interface())
	}
}
