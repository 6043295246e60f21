package gorgoniaop

import (
	"fmt"
	"reflect"
	"slices"
	"unsafe"

	G "gorgonia.org/gorgonia"
)

// Order returns the nodes the targets depend on, children before parents,
// reading each node's arguments with children (Args when nil).
func Order(g *G.ExprGraph, targets []*G.Node, children func(*G.Node) []*G.Node) ([]*G.Node, error) {
	if children == nil {
		children = Args
	}
	const active, done = 1, 2 // a node's state; 0 is unseen
	state := map[*G.Node]int{}
	var out []*G.Node
	var visit func(n *G.Node) error
	visit = func(n *G.Node) error {
		switch state[n] {
		case active:
			return fmt.Errorf("the graph has a cycle through node %q", n.Name())
		case done:
			return nil
		}
		state[n] = active
		for _, ch := range children(n) {
			if err := visit(ch); err != nil {
				return err
			}
		}
		state[n] = done
		out = append(out, n)
		return nil
	}
	for _, t := range targets {
		if t.Graph() != g {
			return nil, fmt.Errorf("node %q belongs to another graph", t.Name())
		}
		if err := visit(t); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// childrenField is the index of gorgonia.Node's children field, the
// arguments its op was applied to; -1 where the field is missing or of
// another type (a Gorgonia other than v0.9.18's layout).
var childrenField = func() int {
	f, ok := reflect.TypeFor[G.Node]().FieldByName("children")
	if !ok || f.Type != reflect.TypeFor[G.Nodes]() || len(f.Index) != 1 {
		return -1
	}
	return f.Index[0]
}()

// Args returns the arguments of n's op in order, as the node records them.
//
// It does not ask the graph (ExprGraph.From): From finds a node by its ID
// through an index of positions in the graph's node list that
// ExprGraph.RemoveNode leaves stale, so after one of Gorgonia's rewrites
// removes a node (log(1-x) becomes log1p(-x) in BinaryXent, for one) From
// may return another node's arguments. The node's own list is exact; From
// is the fallback only where the field is not found.
func Args(n *G.Node) []*G.Node {
	if childrenField >= 0 {
		f := reflect.ValueOf(n).Elem().Field(childrenField)
		return slices.Clone(*(*G.Nodes)(unsafe.Pointer(f.UnsafeAddr())))
	}
	it := n.Graph().From(n.ID())
	var out []*G.Node
	for it.Next() {
		out = append(out, it.Node().(*G.Node))
	}
	return out
}

// FloatData returns a copy of a leaf's float value as a host slice,
// []float32 or []float64 (a scalar as a slice of one). ok is false, with
// no error, where the leaf holds other values (integers, booleans), which
// the caller converts as it needs.
func FloatData(n *G.Node) (data any, ok bool, err error) {
	val := n.Value()
	if val == nil {
		return nil, false, fmt.Errorf("leaf %q has no value", n.Name())
	}
	switch d := val.Data().(type) {
	case []float32:
		return append([]float32(nil), d...), true, nil
	case []float64:
		return append([]float64(nil), d...), true, nil
	case float32:
		return []float32{d}, true, nil
	case float64:
		return []float64{d}, true, nil
	}
	return nil, false, nil
}
