package training

import (
	"fmt"
	"math"
	"slices"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/internal/membudget"
	"github.com/orthonet/orthonet/program"
)

// ErrMemory reports a graph whose engine would take more memory than
// Config.MaxBytes allows: it is program.ErrMemory, which a compiled
// program's refusal wraps; a tape machine's refusal is it too.
var ErrMemory = program.ErrMemory

// tapeBudget returns the bytes a tape machine may allocate and what set
// them (Config.MaxBytes), ok false for no bound.
func tapeBudget(c *Config) (membudget.Budget, bool) {
	switch {
	case c.MaxBytes > 0:
		return membudget.Budget{Bytes: c.MaxBytes, Source: "Config.MaxBytes"}, true
	case c.MaxBytes < 0:
		return membudget.Budget{}, false
	}
	return membudget.Detect()
}

// nodeBytes returns the bytes of a node's value, saturating at
// math.MaxInt64.
func nodeBytes(n *G.Node) int64 {
	var size int64
	switch t := n.Type().(type) { // not n.Dtype(), which panics on a node of no element type
	case tensor.Dtype:
		size = int64(t.Size())
	case G.TensorType:
		if dt, ok := t.Of.(tensor.Dtype); ok {
			size = int64(dt.Size())
		}
	}
	elems := int64(n.Shape().TotalSize())
	if size < 1 || elems < 0 {
		return 0
	}
	if elems > math.MaxInt64/size {
		return math.MaxInt64
	}
	return elems * size
}

// checkTape refuses a graph (what: training or evaluation) whose op
// nodes' values, which a tape machine allocates, and the dual values
// (gradients) of the leaves duals, take more than the budget, before the
// machine is made. The error names the largest nodes.
func checkTape(c *Config, g *G.ExprGraph, what string, duals G.Nodes) error {
	budget, ok := tapeBudget(c)
	if !ok {
		return nil
	}
	var total int64
	var nodes []*G.Node
	for _, n := range g.AllNodes() {
		if n.Op() != nil { // a leaf's value is already there
			nodes = append(nodes, n)
			total = addSat(total, nodeBytes(n))
		}
	}
	for _, n := range duals {
		total = addSat(total, nodeBytes(n))
	}
	if total <= budget.Bytes {
		return nil
	}
	slices.SortStableFunc(nodes, func(a, b *G.Node) int { return cmpDesc(nodeBytes(a), nodeBytes(b)) })
	var largest []string
	for _, n := range nodes[:min(3, len(nodes))] {
		largest = append(largest, fmt.Sprintf("%q of shape %v (%s)", n.Name(), n.Shape(), membudget.Format(nodeBytes(n))))
	}
	return &tapeMemoryError{fmt.Sprintf("training: the tape machine's values of the %s graph take about %s, more than the %s available (%s); the largest: %s",
		what, membudget.Format(total), membudget.Format(budget.Bytes), budget.Source, strings.Join(largest, ", "))}
}

// tapeMemoryError is checkTape's refusal: it is ErrMemory.
type tapeMemoryError struct{ msg string }

func (e *tapeMemoryError) Error() string        { return e.msg }
func (e *tapeMemoryError) Is(target error) bool { return target == ErrMemory }

// cmpDesc orders larger first.
func cmpDesc(a, b int64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// addSat returns a + b, saturating at math.MaxInt64 (both >= 0).
func addSat(a, b int64) int64 {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}
