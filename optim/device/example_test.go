package device_test

import (
	"fmt"
	"log"
	"math"
	"math/rand/v2"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/optim/device"
)

// ExampleNew steps a 6 x 3 weight on the Stiefel manifold by RSDM and a
// bias by Adam where a backend keeps them (here the CPU backend's buffers,
// as a GPU's would be), through the one optim.Solver, and checks the weight
// against the same Solver on host slices.
func ExampleNew() {
	be := cpu.New(cpu.Options{})
	defer be.Close()
	st, _ := manifold.NewStiefel[float64](6, 3)
	w := make([]float64, 18)
	_ = st.Random(w, rand.New(rand.NewPCG(1, 2)))
	gw, b, gb := make([]float64, 18), []float64{1, 2}, []float64{0.5, -0.5}
	for i := range gw {
		gw[i] = float64(i%4) - 1.5
	}
	operand := func(h []float64) device.Operand {
		buf, err := be.Alloc(backend.Float64, len(h))
		if err != nil {
			log.Fatal(err)
		}
		if err := be.CopyIn(buf, 0, h); err != nil {
			log.Fatal(err)
		}
		return device.On(backend.At(buf, 0), len(h))
	}
	groups := []optim.Group{
		{Select: optim.Param.Constrained, LR: 0.2, Rule: optim.RSDMConfig{SubmanifoldSize: 3, Seed: 1}},
		{Rule: optim.AdamConfig{}, LR: 0.1},
	}
	wOnDevice := operand(w)
	onDevice, err := optim.NewSolver([]optim.Param{
		{Name: "w", Shape: []int{6, 3}, Manifold: manifold.StiefelKind{}, Value: wOnDevice, Grad: operand(gw)},
		{Name: "b", Shape: []int{2}, Value: operand(b), Grad: operand(gb)},
	}, groups, optim.Options{Device: device.New(be)})
	if err != nil {
		log.Fatal(err)
	}
	defer onDevice.Close()
	onHost, err := optim.NewSolver([]optim.Param{
		{Name: "w", Shape: []int{6, 3}, Manifold: manifold.StiefelKind{}, Value: optim.Host[float64](w), Grad: optim.Host[float64](gw)},
		{Name: "b", Shape: []int{2}, Value: optim.Host[float64](b), Grad: optim.Host[float64](gb)},
	}, groups, optim.Options{})
	if err != nil {
		log.Fatal(err)
	}
	for step := 0; step < 5; step++ {
		if err := onDevice.Step(); err != nil {
			log.Fatal(err)
		}
		if err := onHost.Step(); err != nil {
			log.Fatal(err)
		}
	}
	got := make([]float64, 18)
	if err := be.CopyOut(got, wOnDevice.Buf, wOnDevice.Off); err != nil {
		log.Fatal(err)
	}
	var diff float64
	for i := range got {
		diff = max(diff, math.Abs(got[i]-w[i]))
	}
	fmt.Println("device and host agree:", diff < 1e-9, "on the manifold:", st.Feasibility(got) < 1e-12)
	fmt.Println("steps:", onDevice.Steps(), "state:", onDevice.State()[0].Kind, onDevice.State()[1].Kind)
	// Output:
	// device and host agree: true on the manifold: true
	// steps: 5 state: rsdm adam
}
