package fused_test

import (
	"fmt"
	"hash"
	"hash/fnv"
	"log"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/fused"
	"github.com/orthonet/orthonet/program"
)

// silu is an op of one's own: x sigmoid(x) elementwise, which one backend
// kernel computes (backend.Map of backend.SiLU).
type silu struct{}

func (silu) Arity() int            { return 1 }
func (silu) Type() hm.Type         { a := hm.TypeVariable('a'); return hm.NewFnType(a, a) }
func (silu) ReturnsPtr() bool      { return false }
func (silu) CallsExtern() bool     { return false }
func (silu) OverwritesInput() int  { return -1 }
func (silu) String() string        { return "SiLU" }
func (silu) WriteHash(h hash.Hash) { _, _ = h.Write([]byte("SiLU")) }
func (o silu) Hashcode() uint32    { h := fnv.New32a(); o.WriteHash(h); return h.Sum32() }
func (silu) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return in[0].(tensor.Shape).Clone(), nil
}

// Kernel is the op's lowering.
func (silu) Kernel(shapes [][]int, in []backend.Operand, out backend.Operand) backend.Kernel {
	return backend.Map{Op: backend.SiLU, N: tensor.Shape(shapes[0]).TotalSize(), Src: in[0], Dst: out}
}

// Do runs the kernel on the host, for the tape machine.
func (o silu) Do(vals ...G.Value) (G.Value, error) { return fused.Do(o, vals...) }

// An op that carries its lowering runs on the tape machine and compiles
// into a program without any change to orthonet.
func ExampleLowering() {
	g := G.NewGraph()
	x := G.NewVector(g, tensor.Float64, G.WithShape(4), G.WithName("x"),
		G.WithValue(tensor.New(tensor.WithShape(4), tensor.WithBacking([]float64{-2, 0, 1, 30}))))
	y, err := G.ApplyOp(silu{}, x)
	if err != nil {
		log.Fatal(err)
	}

	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("tape machine: %.4f\n", y.Value().Data())

	be := cpu.New(cpu.Options{})
	defer be.Close()
	prog, err := program.Compile(g, program.Config{Backend: be, Outputs: []*G.Node{y}, NoGrad: true})
	if err != nil {
		log.Fatal(err)
	}
	if err := prog.Run(); err != nil {
		log.Fatal(err)
	}
	out := make([]float64, 4)
	if err := prog.Read(y, out); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("program:      %.4f\n", out)
	// Output:
	// tape machine: [-0.2384 0.0000 0.7311 30.0000]
	// program:      [-0.2384 0.0000 0.7311 30.0000]
}
