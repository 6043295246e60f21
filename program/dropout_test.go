package program

import (
	"math"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/internal/testval"
	"github.com/orthonet/orthonet/nn"
	"github.com/orthonet/orthonet/param"
)

// TestDropoutMasks compiles a graph with two dropout masks that the
// program draws, and checks on every test backend that each mask is
// backend.DropoutDraw's for its stream and step, that the output uses it,
// that a step draws the same mask again and another step another one.
func TestDropoutMasks(t *testing.T) {
	for _, be := range testBackends(t) {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			g := G.NewGraph()
			x := G.NewMatrix(g, dt, G.WithShape(40, 50), G.WithName("x"), G.WithValue(fill(dt, []int{40, 50}, 3)))
			w := G.NewMatrix(g, dt, G.WithShape(50, 50), G.WithName("w"), G.WithValue(fill(dt, []int{50, 50}, 4)))
			drop, err := nn.NewDropout(0.3)
			if err != nil {
				t.Fatal(err)
			}
			h := G.Must(drop.Apply(x))
			out := G.Must(drop.Apply(G.Must(G.Mul(h, w))))
			loss := G.Must(G.Sum(out))
			if _, err := G.Grad(loss, w); err != nil {
				t.Fatal(err)
			}
			masks := drop.Masks()
			prog, err := Compile(g, Config{Backend: be, Outputs: []*G.Node{out, loss}, Params: []param.Param{param.Plain(w)},
				Dropout: []Dropout{{masks[0], 0.3}, {masks[1], 0.3}}, DropoutSeed: 99})
			if err != nil {
				t.Fatal(err)
			}
			read := func(n *G.Node) []float64 {
				var h any = make([]float64, numel(n.Shape()))
				if dt == tensor.Float32 {
					h = make([]float32, numel(n.Shape()))
				}
				if err := prog.Read(n, h); err != nil {
					t.Fatal(err)
				}
				return testval.Floats(h)
			}
			runAt := func(step int) [][]float64 {
				if err := prog.SetStep(step); err != nil {
					t.Fatal(err)
				}
				if err := prog.Run(); err != nil {
					t.Fatal(err)
				}
				return [][]float64{read(masks[0]), read(masks[1]), read(out)}
			}
			a := runAt(5)
			keep := 1 / (1 - 0.3)
			for s, m := range a[:2] {
				zeros := 0
				for i, v := range m {
					want := 0.0
					if backend.DropoutDraw(99, uint64(s), 5, uint64(i)) >= 0.3 {
						want = keep
					}
					if math.Abs(v-want) > 1e-6 {
						t.Fatalf("%s %v: mask %d entry %d is %v, want %v", be.Name(), dt, s, i, v, want)
					}
					if v == 0 {
						zeros++
					}
				}
				if f := float64(zeros) / float64(len(m)); math.Abs(f-0.3) > 0.05 {
					t.Errorf("%s %v: mask %d has %.3f zeros, want about 0.3", be.Name(), dt, s, f)
				}
			}
			if testval.MaxRel(a[0], a[1]) == 0 {
				t.Errorf("%s %v: the two masks are equal", be.Name(), dt)
			}
			// out = mask1 * ((mask0 * x) w): zero wherever mask1 is.
			for i, v := range a[2] {
				if a[1][i] == 0 && v != 0 {
					t.Fatalf("%s %v: output entry %d is %v where its mask is 0", be.Name(), dt, i, v)
				}
			}
			if b := runAt(5); testval.MaxRel(b[0], a[0]) != 0 || testval.MaxRel(b[2], a[2]) != 0 {
				t.Errorf("%s %v: step 5 drew another mask the second time", be.Name(), dt)
			}
			if c := runAt(6); testval.MaxRel(c[0], a[0]) == 0 {
				t.Errorf("%s %v: steps 5 and 6 drew the same mask", be.Name(), dt)
			}
			prog.Close()
		}
	}
}
