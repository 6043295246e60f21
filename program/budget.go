package program

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/orthonet/orthonet/internal/membudget"
)

// memInfo is a backend that reports its device's memory (the CUDA
// backend).
type memInfo interface {
	MemInfo() (free, total int, err error)
}

// budget returns the bytes the program may allocate and what set them
// (Config.MaxBytes), ok false for no bound.
func (c *compiler) budget() (bytes int64, source string, ok bool) {
	switch m := c.cfg.MaxBytes; {
	case m > 0:
		return m, "Config.MaxBytes", true
	case m < 0:
		return 0, "", false
	}
	if d, isDev := c.cfg.Backend.(memInfo); isDev {
		if free, _, err := d.MemInfo(); err == nil {
			return int64(free), "the device's free memory", true
		}
	}
	if b, found := membudget.Detect(); found {
		return b.Bytes, b.Source, true
	}
	return 0, "", false
}

// slotBytes returns the bytes of a slot, saturating at math.MaxInt64.
func slotBytes(s *slot) int64 {
	size := int64(s.dt.Size())
	if int64(s.n) > math.MaxInt64/size {
		return math.MaxInt64
	}
	return int64(s.n) * size
}

// checkBudget refuses slots whose bytes add up to more than the budget,
// before any is allocated, naming the largest and the nodes they hold.
func (c *compiler) checkBudget(slots []*slot) error {
	limit, source, ok := c.budget()
	if !ok {
		return nil
	}
	var total int64
	for _, s := range slots {
		if b := slotBytes(s); b > math.MaxInt64-total {
			total = math.MaxInt64
		} else {
			total += b
		}
	}
	if total <= limit {
		return nil
	}
	return fmt.Errorf("%w: its %d buffers take %s, more than the %s available (%s); the largest: %s",
		ErrMemory, len(slots), membudget.Format(total), membudget.Format(limit), source, c.largestSlots(slots, 3))
}

// names returns what to call the nodes of the virtual buffers: their
// names, a gradient's as the gradient of its parameters.
func (c *compiler) names() map[*vbuf]string {
	names := map[*vbuf]string{}
	for _, vb := range c.vbufs {
		names[vb] = fmt.Sprintf("%q", vb.name)
	}
	for d, idx := range c.grads {
		v, ok := c.vals[d]
		if !ok || v.vb == nil {
			continue
		}
		var of []string
		for _, i := range idx {
			of = append(of, fmt.Sprintf("%q", c.pvals[i].Node.Name()))
		}
		names[v.vb] = "the gradient of " + strings.Join(of, " and ")
	}
	return names
}

// largestSlots describes the k largest slots, each by its bytes and the
// nodes whose values it holds (its largest tenant first).
func (c *compiler) largestSlots(slots []*slot, k int) string {
	order := slices.Clone(slots)
	slices.SortStableFunc(order, func(a, b *slot) int {
		switch ab, bb := slotBytes(a), slotBytes(b); {
		case ab > bb:
			return -1
		case ab < bb:
			return 1
		}
		return 0
	})
	names := c.names()
	var parts []string
	for _, s := range order[:min(k, len(order))] {
		parts = append(parts, fmt.Sprintf("%s of %v for %s", membudget.Format(slotBytes(s)), s.dt, tenantNames(s.tenants, names)))
	}
	return strings.Join(parts, ", ")
}

// tenantNames names the virtual buffers of a slot, the largest first, the
// first three by name and the rest by their count.
func tenantNames(vbs []*vbuf, names map[*vbuf]string) string {
	order := slices.Clone(vbs)
	slices.SortStableFunc(order, func(a, b *vbuf) int { return b.n - a.n })
	var named []string
	for _, vb := range order[:min(3, len(order))] {
		named = append(named, names[vb])
	}
	if more := len(order) - len(named); more > 0 {
		named = append(named, fmt.Sprintf("%d more", more))
	}
	return strings.Join(named, ", ")
}
