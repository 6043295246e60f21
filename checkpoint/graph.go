package checkpoint

import (
	"encoding/base64"
	"fmt"
	"sort"
	"strconv"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/optim"
)

// PutNodes stores the value of every node as the tensor prefix + its name.
// Every node must have a name (gorgonia.WithName), unique among nodes.
func (f *File) PutNodes(prefix string, nodes G.Nodes) error {
	seen := map[string]bool{}
	for i, n := range nodes {
		if unnamed(n) {
			return fmt.Errorf("checkpoint: node %d of %d has no name (Gorgonia calls it %q); give every parameter a unique name with gorgonia.WithName", i+1, len(nodes), n.Name())
		}
		if seen[n.Name()] {
			return fmt.Errorf("checkpoint: two nodes are named %q", n.Name())
		}
		seen[n.Name()] = true
		d, ok := n.Value().(*tensor.Dense)
		if !ok || d == nil {
			return fmt.Errorf("checkpoint: node %q has no dense value", n.Name())
		}
		var data any
		switch v := d.Data().(type) {
		case []float32:
			data = append([]float32(nil), v...)
		case []float64:
			data = append([]float64(nil), v...)
		default:
			return fmt.Errorf("checkpoint: node %q holds %v, want float32 or float64", n.Name(), d.Dtype())
		}
		f.Tensors[prefix+n.Name()] = Tensor{Shape: append([]int(nil), d.Shape()...), Data: data}
	}
	return nil
}

// unnamed reports whether n has the name Gorgonia makes up for a node
// created without one: its op and its children's ids, "%!s(<nil>)()" for
// an input node.
func unnamed(n *G.Node) bool {
	s, ok := strings.CutPrefix(n.Name(), fmt.Sprintf("%s(", n.Op()))
	if !ok {
		return false
	}
	s, ok = strings.CutSuffix(s, ")")
	if !ok {
		return false
	}
	if s == "" {
		return true
	}
	for _, c := range strings.Split(s, ", ") {
		id, ok := strings.CutPrefix(c, "%")
		if !ok || id == "" || strings.Trim(id, "0123456789abcdef") != "" {
			return false
		}
	}
	return true
}

// LoadOptions change how LoadNodes and LoadSolver read a checkpoint.
type LoadOptions struct {
	// ConvertTypes loads float64 tensors into float32 nodes and optimizer
	// buffers (rounding to nearest) and float32 into float64. Without it a
	// tensor of another element type than the model's is an error.
	ConvertTypes bool
}

func loadOptions(opts []LoadOptions) LoadOptions {
	if len(opts) > 0 {
		return opts[0]
	}
	return LoadOptions{}
}

// convert returns data as the element type of like ([]float32 or
// []float64), converting when they differ.
func convert(data any, float32s bool) any {
	switch d := data.(type) {
	case []float64:
		if float32s {
			out := make([]float32, len(d))
			for i, v := range d {
				out[i] = float32(v)
			}
			return out
		}
	case []float32:
		if !float32s {
			out := make([]float64, len(d))
			for i, v := range d {
				out[i] = float64(v)
			}
			return out
		}
	}
	return data
}

// LoadNodes copies the tensors stored by PutNodes into the nodes' values. A
// missing tensor, a tensor under prefix that no node takes, or a shape or
// element type that differs (unless the options convert types) is an
// error, and then no node is changed.
func (f *File) LoadNodes(prefix string, nodes G.Nodes, opts ...LoadOptions) error {
	pairs, err := f.nodeTensors(prefix, nodes, loadOptions(opts))
	if err != nil {
		return err
	}
	copyNodes(pairs)
	return nil
}

// nodeTensor is a node's value and the tensor to load into it.
type nodeTensor struct {
	dst *tensor.Dense
	src Tensor
}

// nodeTensors checks that the tensors under prefix fit the nodes one to
// one and returns the pairs LoadNodes copies, converted as o says.
func (f *File) nodeTensors(prefix string, nodes G.Nodes, o LoadOptions) ([]nodeTensor, error) {
	want := map[string]bool{}
	var pairs []nodeTensor
	for _, n := range nodes {
		name := prefix + n.Name()
		want[name] = true
		t, ok := f.Tensors[name]
		if !ok {
			return nil, fmt.Errorf("checkpoint: no tensor %q: the checkpoint is of another model", name)
		}
		d, ok := n.Value().(*tensor.Dense)
		if !ok || d == nil {
			return nil, fmt.Errorf("checkpoint: node %q has no dense value to load into", n.Name())
		}
		if !d.Shape().Eq(tensor.Shape(t.Shape)) && !(len(t.Shape) == 0 && d.Shape().IsScalar()) {
			return nil, fmt.Errorf("checkpoint: tensor %q has shape %v, the model's %v", name, t.Shape, d.Shape())
		}
		switch t.Data.(type) {
		case []float32, []float64:
			if d.Dtype() != tensor.Float32 && d.Dtype() != tensor.Float64 {
				return nil, fmt.Errorf("checkpoint: node %q holds %v, not float32 or float64 weights", n.Name(), d.Dtype())
			}
			_, is32 := t.Data.([]float32)
			if is32 != (d.Dtype() == tensor.Float32) {
				if !o.ConvertTypes {
					return nil, fmt.Errorf("checkpoint: tensor %q is %v, the model's %v (load with LoadOptions{ConvertTypes: true} to convert)", name, map[bool]string{true: "float32", false: "float64"}[is32], d.Dtype())
				}
				t.Data = convert(t.Data, d.Dtype() == tensor.Float32)
			}
		default:
			return nil, fmt.Errorf("checkpoint: tensor %q holds %T, not weights", name, t.Data)
		}
		pairs = append(pairs, nodeTensor{d, t})
	}
	var extra []string
	for name := range f.Tensors {
		if strings.HasPrefix(name, prefix) && !want[name] && !strings.Contains(name[len(prefix):], "/") {
			extra = append(extra, name)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return nil, fmt.Errorf("checkpoint: tensors %v belong to no node: the checkpoint is of another model", extra)
	}
	return pairs, nil
}

// copyNodes copies each pair's tensor into its node's value.
func copyNodes(pairs []nodeTensor) {
	for _, p := range pairs {
		switch v := p.src.Data.(type) {
		case []float32:
			copy(p.dst.Data().([]float32), v)
		case []float64:
			copy(p.dst.Data().([]float64), v)
		}
	}
}

// solverParam is one parameter's optimizer state without its buffers.
type solverParam struct {
	Name     string            `json:"name"`
	Kind     string            `json:"kind"`
	Counters map[string]int64  `json:"counters,omitempty"`
	Random   map[string]string `json:"random,omitempty"` // base64 of MarshalBinary
	Buffers  []string          `json:"buffers,omitempty"`
}

// Solver is what PutSolver and LoadSolver need of an optimizer over named
// parameters: *optim.Solver (what paramopt.NewSolver and program.NewSolver
// return) implements it.
type Solver interface {
	Params() []optim.ParamInfo
	State() []optim.State
	SetState([]optim.State) error
	// Steps is the step count that drives the schedules.
	Steps() int
	SetSteps(int) error
}

// stepsKey is the metadata key, after the prefix, of a solver's steps.
const stepsKey = "solver.steps"

func prod(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// PutSolver stores the state of s: each buffer as the tensor prefix +
// parameter name + "/" + buffer name, the rest as JSON under the metadata
// key prefix + "solver".
func (f *File) PutSolver(prefix string, s Solver) error {
	states := s.State()
	params := s.Params()
	if len(states) != len(params) {
		return fmt.Errorf("checkpoint: the solver has %d parameters but %d states", len(params), len(states))
	}
	out := make([]solverParam, len(states))
	for i, st := range states {
		name := params[i].Name
		sp := solverParam{Name: name, Kind: st.Kind, Counters: st.Counters, Random: map[string]string{}}
		for k, v := range st.Random {
			sp.Random[k] = base64.StdEncoding.EncodeToString(v)
		}
		shape := params[i].Shape
		for k, v := range st.Buffers {
			_, n, err := dtypeOf(v)
			if err != nil {
				return fmt.Errorf("checkpoint: solver buffer %s/%s: %w", name, k, err)
			}
			bs := []int{n}
			if prod(shape) == n {
				bs = shape // a moment buffer is stored in its parameter's shape
			}
			f.Tensors[prefix+name+"/"+k] = Tensor{Shape: bs, Data: v}
			sp.Buffers = append(sp.Buffers, k)
		}
		sort.Strings(sp.Buffers)
		out[i] = sp
	}
	f.Meta[prefix+stepsKey] = strconv.Itoa(s.Steps())
	return f.SetJSON(prefix+"solver", out)
}

// SolverSteps returns the step count PutSolver stored under prefix, and
// whether there is one (checkpoints written before solvers counted steps
// have none).
func (f *File) SolverSteps(prefix string) (int, bool, error) {
	v, ok := f.Meta[prefix+stepsKey]
	if !ok {
		return 0, false, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, true, fmt.Errorf("checkpoint: %s is %q, want a step count", prefix+stepsKey, v)
	}
	return n, true, nil
}

// LoadSolver restores into s the state stored by PutSolver from a solver
// over parameters of the same names, in the same order, and its step count
// when the checkpoint has one. With the options' ConvertTypes, buffers of
// the other float type are converted to the parameters'. On error s is
// unchanged.
func (f *File) LoadSolver(prefix string, s Solver, opts ...LoadOptions) error {
	o := loadOptions(opts)
	steps, hasSteps, err := f.SolverSteps(prefix)
	if err != nil {
		return err
	}
	var in []solverParam
	if err := f.JSON(prefix+"solver", &in); err != nil {
		return err
	}
	params := s.Params()
	if len(in) != 0 && len(in) != len(params) {
		return fmt.Errorf("checkpoint: solver state for %d parameters, the model has %d", len(in), len(params))
	}
	states := make([]optim.State, len(in))
	for i, sp := range in {
		if name := params[i].Name; sp.Name != name {
			return fmt.Errorf("checkpoint: solver state %d is for %q, the model's parameter %d is %q", i, sp.Name, i, name)
		}
		st := optim.State{Kind: sp.Kind, Counters: sp.Counters, Random: map[string][]byte{}, Buffers: map[string]any{}}
		for k, v := range sp.Random {
			b, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				return fmt.Errorf("checkpoint: solver state of %q: random source %q: %w", sp.Name, k, err)
			}
			st.Random[k] = b
		}
		for _, k := range sp.Buffers {
			t, ok := f.Tensors[prefix+sp.Name+"/"+k]
			if !ok {
				return fmt.Errorf("checkpoint: no tensor %q for the solver state", prefix+sp.Name+"/"+k)
			}
			st.Buffers[k] = t.Data
			if o.ConvertTypes && params[i].Float32 != nil {
				st.Buffers[k] = convert(t.Data, *params[i].Float32)
			}
		}
		states[i] = st
	}
	if err := s.SetState(states); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if hasSteps {
		return s.SetSteps(steps)
	}
	return nil
}
