package main

import (
	"io"

	"github.com/orthonet/orthonet/training"
)

// The subcommands' engine: a trained network run forward only
// (training.Evaluator), on the CPU backend, the GPU or Gorgonia's tape
// machine.

// devices and engines list the values of -device and -engine.
var (
	devices = []string{"auto", "cpu", "cuda"}
	engines = []string{"program", "tape"}
)

// newEvaluator returns an evaluator that runs net forward only, on -engine
// and -device.
func newEvaluator(c config, net *network) (*training.Evaluator, error) {
	return training.NewEvaluator(net.model(c, nil, nil), training.EvaluatorConfig{Shape: net.set.Shape(), Classes: net.set.Classes,
		Device: c.device, Engine: c.engine, MaxBytes: c.maxMemory})
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
