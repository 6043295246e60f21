package program

import (
	"fmt"

	G "gorgonia.org/gorgonia"

	"github.com/orthonet/orthonet/program/lower"
)

// Integer and boolean inputs and outputs, which a program keeps in Int32
// buffers (see package lower's ints.go): SetInput and Read convert them.

// intScratch returns the program's host buffer for the integer values of
// v, made once.
func (p *Program) intScratch(v *val) []int32 {
	if p.ints == nil {
		p.ints = map[*val][]int32{}
	}
	s, ok := p.ints[v]
	if !ok {
		s = make([]int32, v.size)
		p.ints[v] = s
	}
	return s
}

// setInts copies integers or booleans into the integer input v.
func (p *Program) setInts(n *G.Node, v *val, data any) error {
	if l, ok := lower.HostLen(data); !ok || l != v.size {
		return fmt.Errorf("program: input %q takes %d integers ([]int, []int32, []int64 or []bool), got %T of %d", n.Name(), v.size, data, l)
	}
	if d, ok := data.([]int32); ok {
		return p.be.CopyIn(v.vb.phys, v.vb.physOff+v.off, d)
	}
	s := p.intScratch(v)
	if err := lower.FillInt32(n.Name(), s, data); err != nil {
		return err
	}
	return p.be.CopyIn(v.vb.phys, v.vb.physOff+v.off, s)
}

// readInts reads the integer or boolean value v into dst.
func (p *Program) readInts(n *G.Node, v *val, dst any) error {
	if l, ok := lower.HostLen(dst); !ok || l != v.size {
		return fmt.Errorf("program: node %q has %d integers or booleans, reading into %T of %d (want []int32, []int, []int64 or []bool)", n.Name(), v.size, dst, l)
	}
	if d, ok := dst.([]int32); ok {
		return p.be.CopyOut(d, v.vb.phys, v.vb.physOff+v.off)
	}
	s := p.intScratch(v)
	if err := p.be.CopyOut(s, v.vb.phys, v.vb.physOff+v.off); err != nil {
		return err
	}
	switch d := dst.(type) {
	case []int:
		for i, x := range s {
			d[i] = int(x)
		}
	case []int64:
		for i, x := range s {
			d[i] = int64(x)
		}
	case []bool:
		for i, x := range s {
			d[i] = x != 0
		}
	default:
		return fmt.Errorf("program: node %q holds integers or booleans, reading into %T (want []int32, []int, []int64 or []bool)", n.Name(), dst)
	}
	return nil
}
