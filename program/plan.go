package program

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/orthonet/orthonet/backend"
)

// planMemory, the planning phase, keeps the outputs and the parameters'
// values and gradients resident, maps every virtual buffer onto a physical
// one, temporaries sharing by liveness (slots, plan), and returns the
// program that runs the kernels.
func (c *compiler) planMemory() (*Program, error) {
	c.keepResident()
	for i := range c.pvals {
		pv := &c.pvals[i]
		pv.v = c.vals[pv.Node]
		if !c.cfg.NoGrad && pv.fa == nil {
			pv.g = c.vals[pv.Node.Deriv()]
		}
	}
	p := &Program{be: c.cfg.Backend}
	if err := c.plan(p); err != nil {
		_ = p.Close()
		return nil, err
	}
	return p, nil
}

// A slot is a physical buffer to be: the virtual buffers that take it in
// turn, sized to the largest.
type slot struct {
	dt      backend.DType
	n       int
	freeAt  int // kernel index after which the slot is free
	tenants []*vbuf
}

// slots assigns the virtual buffers to slots by a linear scan: a temporary
// takes the smallest free slot of its type that is large enough (from
// after the last kernel of its tenant), else a new one; a resident buffer
// has a slot of its own, never free.
func (c *compiler) slots() []*slot {
	for k, kern := range c.kernels {
		for _, op := range backend.Operands(kern) {
			vb, ok := op.Buf.(*vbuf)
			if !ok {
				continue
			}
			if vb.def < 0 {
				vb.def = k
			}
			vb.last = k
		}
	}
	var slots []*slot
	var temps []*vbuf
	for _, vb := range c.vbufs {
		switch {
		case vb.phys != nil: // shared
		case vb.persistent:
			slots = append(slots, &slot{dt: vb.dt, n: vb.n, freeAt: math.MaxInt, tenants: []*vbuf{vb}})
		case vb.def >= 0:
			temps = append(temps, vb)
		}
	}
	sort.SliceStable(temps, func(i, j int) bool { return temps[i].def < temps[j].def })
	for _, vb := range temps {
		var best *slot
		for _, s := range slots {
			if s.dt == vb.dt && s.freeAt < vb.def && (best == nil || fit(s.n, vb.n) < fit(best.n, vb.n)) {
				best = s
			}
		}
		if best == nil {
			best = &slot{dt: vb.dt}
			slots = append(slots, best)
		}
		best.n = max(best.n, vb.n)
		best.freeAt = vb.last
		best.tenants = append(best.tenants, vb)
	}
	return slots
}

// plan allocates the slots, copies the constants in and prepares the
// kernels on the physical buffers.
func (c *compiler) plan(p *Program) error {
	be := c.cfg.Backend
	slots := c.slots()
	if err := c.checkBudget(slots); err != nil {
		return err
	}
	for _, s := range slots {
		b, err := be.Alloc(s.dt, s.n)
		if err != nil {
			return fmt.Errorf("program: allocating %d values of %v: %w", s.n, s.dt, err)
		}
		p.owned = append(p.owned, b)
		for _, vb := range s.tenants {
			vb.phys = b
			if vb.init == nil {
				continue
			}
			if err := be.CopyIn(b, vb.physOff, vb.init); err != nil {
				return fmt.Errorf("program: copying %q in: %w", vb.name, err)
			}
		}
	}
	for _, k := range c.kernels {
		// The kernel on the physical buffers of its virtual ones.
		k = backend.MapOperands(k, func(op backend.Operand) backend.Operand {
			if vb, ok := op.Buf.(*vbuf); ok {
				return backend.Operand{Buf: vb.phys, Off: vb.physOff + op.Off}
			}
			return op
		})
		f, err := be.Prepare(k)
		if err != nil {
			return fmt.Errorf("program: preparing %s: %w", backend.Name(k), err)
		}
		p.funcs = append(p.funcs, f)
		p.kernels = append(p.kernels, k)
	}
	if c.cfg.Profile {
		p.profile = make([]time.Duration, len(c.kernels))
	}
	return nil
}

// fit scores how well a slot of n elements holds a tenant of m: a slot
// that needs no growth and wastes least comes first.
func fit(n, m int) int {
	if n >= m {
		return n - m
	}
	return 1<<40 + m - n
}
