package device_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/optim/device"
)

// TestStepSizesOneCopy counts the copies to the device of a Solver's steps
// (on the backends that count them, backend.Counter): the step sizes of
// every parameter go up in one copy, and each RSDM weight's rows in one
// more; the four parameters' step sizes had taken four copies.
func TestStepSizesOneCopy(t *testing.T) {
	for bi, newBackend := range deviceBackends {
		be := newBackend()
		defer be.Close()
		c, ok := be.(backend.Counter)
		if !ok {
			continue
		}
		for name, groups := range deviceConfigs() {
			t.Run(fmt.Sprintf("backend%d/%s", bi, name), func(t *testing.T) {
				r := newDeviceRun[float32](t, be, groups)
				rsdm := 0
				if _, ok := groups[0].Rule.(optim.RSDMConfig); ok {
					rsdm = 2 // the tall and the wide weight
				}
				for s := range 3 {
					before := c.Counts()
					if err := r.dev.Step(); err != nil {
						t.Fatal(err)
					}
					if got := c.Counts().Sub(before).CopiesIn; got != 1+rsdm {
						t.Errorf("step %d: %d copies to the device, want %d (the step sizes, then %d RSDM weights' rows)", s+1, got, 1+rsdm, rsdm)
					}
				}
			})
		}
	}
}

// TestManySteppers steps more parameters than one buffer of step sizes
// holds, in three groups of their own step sizes, on the host and on each
// backend: the same values (SGD rounds alike on both), each parameter
// stepped by its own group's step size; closing the Solver frees the
// buffers (on a backend that says how much it holds).
func TestManySteppers(t *testing.T) {
	const n = 600
	for bi, newBackend := range deviceBackends {
		be := newBackend()
		defer be.Close()
		live, counts := be.(interface{ Live() int })
		before := 0
		if counts {
			before = live.Live()
		}
		var hp, dp []optim.Param
		values, grads := make([][]float64, n), make([][]float64, n)
		bufs := make([]backend.Buffer, 0, 2*n)
		for i := range n {
			values[i], grads[i] = []float64{float64(i), -1}, []float64{1, float64(i % 7)}
			v, _ := be.Alloc(backend.Float64, 2)
			g, _ := be.Alloc(backend.Float64, 2)
			bufs = append(bufs, v, g)
			if err := be.CopyIn(v, 0, values[i]); err != nil {
				t.Fatal(err)
			}
			if err := be.CopyIn(g, 0, grads[i]); err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("p%d", i)
			hp = append(hp, optim.Param{Name: name, Shape: []int{2}, Value: optim.Host[float64](append([]float64(nil), values[i]...)), Grad: optim.Host[float64](grads[i])})
			dp = append(dp, optim.Param{Name: name, Shape: []int{2}, Value: device.On(backend.At(v, 0), 2), Grad: device.On(backend.At(g, 0), 2)})
		}
		var groups []optim.Group
		for k := range 3 {
			groups = append(groups, optim.Group{LR: 0.1 * float64(k+1), Rule: optim.SGDConfig{}, Select: func(p optim.Param) bool {
				var i int
				fmt.Sscanf(p.Name, "p%d", &i)
				return i%3 == k
			}})
		}
		host, err := optim.NewSolver(hp, groups, optim.Options{})
		if err != nil {
			t.Fatal(err)
		}
		dev, err := optim.NewSolver(dp, groups, optim.Options{Device: device.New(be)})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := host.Step(); err != nil {
				t.Fatal(err)
			}
			if err := dev.Step(); err != nil {
				t.Fatal(err)
			}
		}
		got := make([]float64, 2)
		for i := range n {
			if err := be.CopyOut(got, bufs[2*i], 0); err != nil {
				t.Fatal(err)
			}
			want := hp[i].Value.(optim.Host[float64])
			if got[0] != want[0] || got[1] != want[1] {
				t.Fatalf("backend %d: parameter %d is %v, the host's %v", bi, i, got, want)
			}
			if lr := 0.1 * float64(i%3+1); math.Abs(want[0]-(float64(i)-2*lr)) > 1e-12 {
				t.Fatalf("parameter %d: %v after two steps of %v", i, want[0], lr)
			}
		}
		if err := dev.Close(); err != nil {
			t.Fatal(err)
		}
		for _, b := range bufs {
			if err := be.Free(b); err != nil {
				t.Fatal(err)
			}
		}
		if counts && live.Live() != before {
			t.Errorf("backend %d: %d bytes held after the Solver closed, %d before it", bi, live.Live(), before)
		}
	}
}
