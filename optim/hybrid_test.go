package optim

import (
	"strings"
	"testing"

	"github.com/orthonet/orthonet/internal/problem"
	"github.com/orthonet/orthonet/manifold"
)

// TestHybrid checks that the hybrid picks a method, reports it, and
// converges to the PCA optimum with it; and that bad sizes are refused.
func TestHybrid(t *testing.T) {
	const n, p = 60, 20
	st, _ := manifold.NewStiefel[float64](n, p)
	pr := problem.NewPCA[float64](n, p, newRNG(1))
	x := make([]float64, n*p)
	_ = st.Random(x, newRNG(2))
	h, err := NewHybrid(st, HybridConfig{RSDM: RSDMConfig{LR: 1, SubmanifoldSize: 20, Seed: 1}, RGD: RGDConfig{LR: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	if h.Choice() != "" {
		t.Errorf("choice %q before the first step", h.Choice())
	}
	gap, it := run[float64](t, h, pr, x, 20000, 1e-6)
	if gap >= 1e-6 {
		t.Errorf("hybrid (%s): gap %.1e after %d steps", h.Choice(), gap, it)
	}
	if c := h.Choice(); c != "rgd" && !strings.HasPrefix(c, "rsdm-p r=") {
		t.Errorf("choice %q", c)
	}
	t.Logf("hybrid chose %s; gap %.1e after %d steps", h.Choice(), gap, it)
	for _, cfg := range []HybridConfig{
		{RSDM: RSDMConfig{LR: 1, SubmanifoldSize: 61}, RGD: RGDConfig{LR: 0.1}},
		{RSDM: RSDMConfig{LR: 1, SubmanifoldSize: 10}, RGD: RGDConfig{LR: 0.1}, Sizes: []int{1}},
		{RSDM: RSDMConfig{LR: 1, SubmanifoldSize: 10}},
	} {
		if _, err := NewHybrid(st, cfg); err == nil {
			t.Errorf("NewHybrid accepted %+v", cfg)
		}
	}
}
