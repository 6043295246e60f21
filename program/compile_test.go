package program

import (
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/param"
)

// TestFactorGrads checks the factoring phase on the FFN: with
// FactorForRSDM every gradient it leaves factored loses the product that
// formed it and its check, which one check of the factors replaces, and
// nothing else changes (the same kernels otherwise, in the same order).
func TestFactorGrads(t *testing.T) {
	be := cpu.New(cpu.Options{})
	defer be.Close()
	compile := func(r int) *Program {
		m, err := modelCases()[0].build(tensor.Float64) // the FFN
		if err != nil {
			t.Fatal(err)
		}
		if _, err := G.Grad(m.loss, param.Nodes(m.params)...); err != nil {
			t.Fatal(err)
		}
		return m.compile(t, be, Config{FactorForRSDM: r})
	}
	plain, factored := compile(0), compile(5)
	var k int // the number of gradients left factored
	for _, p := range factored.Params() {
		if p.GradK > 0 {
			k++
		}
	}
	if k == 0 {
		t.Fatal("FactorForRSDM left no FFN gradient factored")
	}
	got, want := kernelTypes(factored), kernelTypes(plain)
	if got["gemm"] != want["gemm"]-k {
		t.Errorf("%d products factored, %d products, %d without: want %d fewer", k, got["gemm"], want["gemm"], k)
	}
	if len(factored.kernels) != len(plain.kernels)-k {
		t.Errorf("%d gradients factored: %d kernels, %d without, want %d fewer", k, len(factored.kernels), len(plain.kernels), k)
	}
	// The kernels that are not a factored gradient's are the same, in the
	// same order.
	var a, b []string
	for _, kern := range plain.kernels {
		a = append(a, backend.Name(kern))
	}
	for _, kern := range factored.kernels {
		b = append(b, backend.Name(kern))
	}
	for i, j := 0, 0; i < len(a) && j < len(b); i, j = i+1, j+1 {
		if a[i] != b[j] {
			// a factored gradient: its product and check became one check
			if a[i] != "gemm" || b[j] != "check-product" || i+1 >= len(a) || !isCheck(a[i+1]) {
				t.Fatalf("kernel %d: %s, without factoring %s (then %v)", j, b[j], a[i], a[i+1:min(i+3, len(a))])
			}
			i++
		}
	}
}

func isCheck(name string) bool { return name == "check-product" || name == "check-finite" }
