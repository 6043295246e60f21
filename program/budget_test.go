package program

import (
	"errors"
	"os"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/param"
)

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
