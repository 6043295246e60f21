package checkpoint

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"gorgonia.org/tensor"
)

// StatefulProgram is a Program with state of its own besides its
// parameters (*program.Program implements it): the running statistics of
// gorgonia's BatchNorm ops, and the step that keys its random draws
// (dropout masks, random nodes). PutProgram saves that state and
// LoadProgram restores it, so that a resumed run draws and normalizes as
// the uninterrupted one does.
type StatefulProgram interface {
	Program
	// StateNames returns the names of the program's state tensors.
	StateNames() []string
	// StateInfo returns a state tensor's shape and element type, and
	// whether there is one of that name.
	StateInfo(name string) (tensor.Shape, tensor.Dtype, bool)
	// ReadState copies a state tensor into dst ([]float32 or []float64).
	ReadState(name string, dst any) error
	// WriteState copies src into a state tensor.
	WriteState(name string, src any) error
	// Step returns the step the next run draws for; SetStep sets it.
	Step() int
	SetStep(step int) error
}

// A program's state tensors are stored as the tensors modelPrefix +
// stateDir + their name, its step as the metadata modelPrefix + stepMeta.
const (
	stateDir = "state/"
	stepMeta = "program.step"
)

// putProgramState stores p's state under prefix.
func (f *File) putProgramState(prefix string, p StatefulProgram) error {
	for _, name := range p.StateNames() {
		shape, dt, ok := p.StateInfo(name)
		if !ok {
			return fmt.Errorf("checkpoint: the program lists state %q but has none", name)
		}
		var data any = make([]float64, shape.TotalSize())
		if dt == tensor.Float32 {
			data = make([]float32, shape.TotalSize())
		}
		if err := p.ReadState(name, data); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		f.Tensors[prefix+stateDir+name] = Tensor{Shape: append([]int(nil), shape...), Data: data}
	}
	f.Meta[prefix+stepMeta] = strconv.Itoa(p.Step())
	return nil
}

// programState is the state LoadProgram writes into a program.
type programState struct {
	names   []string
	data    []any
	step    int
	hasStep bool
}

// programState checks the state stored under prefix against p's: every
// state tensor of p, of its shape and type (converted as o says), and no
// other; and the step, where the checkpoint has one (checkpoints of
// programs without state before it was saved have none).
func (f *File) programState(prefix string, p StatefulProgram, o LoadOptions) (programState, error) {
	var st programState
	want := map[string]bool{}
	for _, name := range p.StateNames() {
		key := prefix + stateDir + name
		want[key] = true
		shape, dt, _ := p.StateInfo(name)
		t, ok := f.Tensors[key]
		if !ok {
			return st, fmt.Errorf("checkpoint: no tensor %q for the program's state: the checkpoint is of another model", key)
		}
		if !shape.Eq(tensor.Shape(t.Shape)) {
			return st, fmt.Errorf("checkpoint: tensor %q has shape %v, the program's state %v", key, t.Shape, shape)
		}
		_, is32 := t.Data.([]float32)
		_, is64 := t.Data.([]float64)
		switch {
		case !is32 && !is64:
			return st, fmt.Errorf("checkpoint: tensor %q holds %T, not float32 or float64 values", key, t.Data)
		case is32 != (dt == tensor.Float32) && !o.ConvertTypes:
			return st, fmt.Errorf("checkpoint: tensor %q is %v, the program's state %v (load with LoadOptions{ConvertTypes: true} to convert)", key, map[bool]string{true: "float32", false: "float64"}[is32], dt)
		}
		st.names = append(st.names, name)
		st.data = append(st.data, convert(t.Data, dt == tensor.Float32))
	}
	var extra []string
	for key := range f.Tensors {
		if strings.HasPrefix(key, prefix+stateDir) && !want[key] {
			extra = append(extra, key)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return st, fmt.Errorf("checkpoint: tensors %v are state the program does not have: the checkpoint is of another model", extra)
	}
	if v, ok := f.Meta[prefix+stepMeta]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return st, fmt.Errorf("checkpoint: %s is %q, want a step", prefix+stepMeta, v)
		}
		st.step, st.hasStep = n, true
	}
	return st, nil
}

// load writes the checked state into p.
func (st programState) load(p StatefulProgram) error {
	for i, name := range st.names {
		if err := p.WriteState(name, st.data[i]); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
	}
	if st.hasStep {
		if err := p.SetStep(st.step); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
	}
	return nil
}
