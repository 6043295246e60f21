package checkpoint

import (
	"fmt"

	G "gorgonia.org/gorgonia"
)

// Program is a compiled model that keeps its own copy of its parameters
// apart from their Gorgonia nodes (*program.Program implements it): in a
// backend's buffers, on a device.
type Program interface {
	// ParamNodes returns the parameters' nodes.
	ParamNodes() G.Nodes
	// StoreParams copies the program's parameters into their nodes.
	StoreParams() error
	// LoadParams copies the nodes' values into the program's parameters.
	LoadParams() error
}

// PutProgram stores a compiled program's parameters, as the program holds
// them now, under modelPrefix (as PutNodes does, by node name), the state of
// a StatefulProgram there too, and its solver's state under optimPrefix (as
// PutSolver does).
func (f *File) PutProgram(modelPrefix, optimPrefix string, p Program, s Solver) error {
	if err := p.StoreParams(); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := f.PutNodes(modelPrefix, p.ParamNodes()); err != nil {
		return err
	}
	if sp, ok := p.(StatefulProgram); ok {
		if err := f.putProgramState(modelPrefix, sp); err != nil {
			return err
		}
	}
	return f.PutSolver(optimPrefix, s)
}

// LoadProgram loads what PutProgram (or PutNodes and PutSolver) stored into
// a compiled program in one call: the parameters into their nodes and into
// the program's own copy, the state of a StatefulProgram (every state
// tensor it has, and its step where the checkpoint has one), and the
// solver's state and step count. Everything is checked before anything
// changes: a checkpoint of another model or optimizer is an error, and then
// the nodes, the program and the solver are as they were. (An error of the
// program's copy itself, a device fault, leaves the nodes and the solver
// loaded.)
func (f *File) LoadProgram(modelPrefix, optimPrefix string, p Program, s Solver, opts ...LoadOptions) error {
	pairs, err := f.nodeTensors(modelPrefix, p.ParamNodes(), loadOptions(opts))
	if err != nil {
		return err
	}
	sp, stateful := p.(StatefulProgram)
	var st programState
	if stateful {
		if st, err = f.programState(modelPrefix, sp, loadOptions(opts)); err != nil {
			return err
		}
	}
	if err := f.LoadSolver(optimPrefix, s, opts...); err != nil {
		return err
	}
	copyNodes(pairs)
	if err := p.LoadParams(); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if stateful {
		return st.load(sp)
	}
	return nil
}
