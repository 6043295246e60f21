//go:build cgo

package program_test

import (
	"errors"
	"testing"

	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/program"
)

// TestNodesChangedOnDevice resumes a program on the CUDA backend (the host
// model of the device, or a GPU where ORTHONET_CUDA_GPU=1), whose
// parameters live apart from their nodes: a checkpoint loaded into the
// nodes without LoadParams fails Run with ErrParamsChanged, before the
// first Run and after it; LoadProgram resumes bit for bit.
func TestNodesChangedOnDevice(t *testing.T) {
	be := deviceBackend(t)
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		t.Run(dt.String(), func(t *testing.T) {
			const half, steps = 5, 10
			straight, path, wantLoss := straightRun(t, be, dt, half, steps, func(m *teacherNet, path string) { m.save(t, path) })
			f, err := checkpoint.Read(path)
			if err != nil {
				t.Fatal(err)
			}

			before := newTeacherNet(t, be, dt) // loaded before its first Run
			if err := f.LoadNodes("model.", param.Nodes(before.params)); err != nil {
				t.Fatal(err)
			}
			if _, err := before.train(half, steps); !errors.Is(err, program.ErrParamsChanged) {
				t.Errorf("Run after LoadNodes without LoadParams, before the first Run: %v, want ErrParamsChanged", err)
			}

			after := newTeacherNet(t, be, dt) // loaded after some steps
			if _, err := after.train(0, 2); err != nil {
				t.Fatal(err)
			}
			if err := f.LoadNodes("model.", param.Nodes(after.params)); err != nil {
				t.Fatal(err)
			}
			if _, err := after.train(half, steps); !errors.Is(err, program.ErrParamsChanged) {
				t.Errorf("Run after LoadNodes without LoadParams, after two steps: %v, want ErrParamsChanged", err)
			}
			if err := f.LoadProgram("model.", "optim.", after.prog, after.solver); err != nil {
				t.Fatal(err)
			}
			gotLoss, err := after.train(half, steps)
			if err != nil {
				t.Fatal(err)
			}
			endsAsStraight(t, "with LoadProgram", after, straight, gotLoss, wantLoss)
		})
	}
}
