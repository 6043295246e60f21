package main

import (
	"fmt"
	"io"
	"math"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	cudabackend "github.com/orthonet/orthonet/backend/cuda"
	"github.com/orthonet/orthonet/data"
	"github.com/orthonet/orthonet/nn"
	"github.com/orthonet/orthonet/program"
	"github.com/orthonet/orthonet/training"
)

// The subcommands' engine: a trained network run forward only, on the
// CPU backend, the GPU or Gorgonia's tape machine.

// devices and engines list the values of -device and -engine.
var (
	devices = []string{"auto", "cpu", "cuda"}
	engines = []string{"program", "tape"}
)

// evalEngine runs an evaluation network forward on its input buffer.
type evalEngine struct {
	net  *network
	vm   G.VM             // -engine tape
	be   backend.Backend  // -engine program
	prog *program.Program // -engine program
	z    []float32        // the logits read from prog
}

// newEvalEngine returns an engine that runs net forward only, on -engine
// and -device.
func newEvalEngine(c config, net *network) (*evalEngine, error) {
	e := &evalEngine{net: net}
	if c.engine == "tape" {
		e.vm = G.NewTapeMachine(net.logits.Graph())
		return e, nil
	}
	var err error
	if c.device == "cuda" {
		e.be, err = cudabackend.New(cudabackend.Options{})
	} else {
		e.be = cpu.New(cpu.Options{})
	}
	if err != nil {
		return nil, err
	}
	e.prog, err = program.Compile(net.logits.Graph(), program.Config{Backend: e.be, Outputs: []*G.Node{net.logits},
		Params: net.Params(), NoGrad: true, Inputs: []*G.Node{net.x}, MaxBytes: c.maxMemory})
	if err != nil {
		e.close()
		return nil, fmt.Errorf("compiling the evaluation graph: %w", err)
	}
	e.z = make([]float32, tensor.Shape(net.logits.Shape()).TotalSize())
	return e, nil
}

// evaluate runs the network on its input buffer and returns the logits.
func (e *evalEngine) evaluate() ([]float32, error) {
	if e.vm != nil {
		e.vm.Reset()
		if err := e.vm.RunAll(); err != nil {
			return nil, err
		}
		return e.net.logits.Value().Data().([]float32), nil
	}
	if err := e.prog.SetInput(e.net.x, e.net.xb); err != nil {
		return nil, err
	}
	if err := e.prog.Run(); err != nil {
		return nil, err
	}
	return e.z, e.prog.Read(e.net.logits, e.z)
}

// close frees the engine.
func (e *evalEngine) close() {
	if e.vm != nil {
		e.vm.Close()
	}
	if e.prog != nil {
		e.prog.Close()
	}
	if e.be != nil {
		e.be.Close()
	}
}

// evaluateWith returns the loss and accuracy of the network of e over the
// first count images of s, passing each chunk's logits and labels to
// observe where set.
func evaluateWith(e *evalEngine, s *data.Set, count int, observe func(logits []float32, labels []int)) (training.Eval, error) {
	d, k := s.Dim(), s.Classes
	batch := len(e.net.xb) / d
	labels := make([]int, batch)
	var correct, lossSum float64
	for lo := 0; lo < count; lo += batch {
		n := min(batch, count-lo)
		e.net.fill(s.X[lo*d:(lo+n)*d], n)
		z, err := e.evaluate()
		if err != nil {
			return training.Eval{}, fmt.Errorf("evaluating: %w", err)
		}
		for i, y := range s.Y[lo : lo+n] {
			labels[i] = int(y)
		}
		acc, err := nn.Accuracy(z[:n*k], labels[:n], k)
		if err != nil {
			return training.Eval{}, fmt.Errorf("evaluating: %w", err)
		}
		loss, err := nn.CrossEntropyLoss(z[:n*k], labels[:n], k)
		if err != nil {
			return training.Eval{}, fmt.Errorf("evaluating: %w", err)
		}
		correct += math.Round(acc * float64(n))
		lossSum += loss * float64(n)
		if observe != nil {
			observe(z[:n*k], labels[:n])
		}
	}
	return training.Eval{Loss: lossSum / float64(count), Accuracy: correct / float64(count), Examples: count}, nil
}

// selectDevice settles -device for a subcommand (training.SelectDevice);
// the tape machine runs on the CPU.
func selectDevice(c *config, log io.Writer) error {
	if c.engine == "tape" && c.device == "auto" {
		c.device = "cpu"
		return nil
	}
	var err error
	c.device, err = training.SelectDevice(c.device, log)
	return err
}
