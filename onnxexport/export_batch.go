package onnxexport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	G "gorgonia.org/gorgonia"

	"github.com/orthonet/orthonet/onnx"
)

// ErrBatchDependent reports a graph whose ONNX export depends on the batch
// size in a way ExportBatch cannot write in terms of the input's batch
// axis: a structure, an attribute or a constant that changes with it.
var ErrBatchDependent = errors.New("onnxexport: the ONNX export depends on the batch")

// BatchGraph builds the graph of a model for batches of batch examples and
// says what Export is to write of it. Each call builds a new graph with
// the same weights; only the shapes may differ.
type BatchGraph func(batch int) (*G.ExprGraph, Config, error)

// batchProbes are the batch sizes ExportBatch exports at: the first
// two fit each number that changes with the batch as a*batch + c, the
// third checks the fit. None is 1, where gorgonia may drop an axis.
var batchProbes = []int{2, 3, 5}

// ExportBatch returns the forward computation of the graphs build
// makes as one ONNX model for any batch size, as torch.onnx's dynamic_axes
// writes it: nothing in the model grows with the batch. It exports the
// graphs build makes at batches 2, 3 and 5 (Export) and compares the
// exports: they must have the same nodes, attributes and value names, and
// may differ only in
//
//   - the dimensions of the graph's inputs and outputs, each a*batch + c:
//     written as the symbolic dimension (dim_param) "batch" where it is the
//     batch, else as its formula ("2*batch+1");
//   - the entries of 1-D INT64 initializers (Reshape targets, Expand shapes,
//     Slice bounds), each a*batch + c: computed in the graph from the batch
//     axis of the first input that has one (Shape, Mul, Add, Concat), or
//     written as -1 in a target read only by Reshape where it is the one
//     entry that changes;
//   - the shape of a float initializer holding one value throughout (zeros,
//     say), its dimensions a*batch + c: written as Expand of that value to
//     the computed shape.
//
// Anything else that changes with the batch (a float constant of several
// values, a number not affine in the batch, a node or attribute) is refused
// with ErrBatchDependent naming it. Initializers no node reads (Export
// writes the count of a repeat, which its Expand does not read) are left
// out. The model computes at every batch, 1 included, what Export's
// export of the graph built at that batch computes.
func ExportBatch(build BatchGraph) (*onnx.Model, error) {
	if build == nil {
		return nil, errors.New("onnxexport: ExportBatch: no graph builder")
	}
	ms := make([]*onnx.Model, len(batchProbes))
	for i, b := range batchProbes {
		g, cfg, err := build(b)
		if err != nil {
			return nil, fmt.Errorf("onnxexport: ExportBatch: building the graph at batch %d: %w", b, err)
		}
		if g == nil {
			return nil, fmt.Errorf("onnxexport: ExportBatch: the builder returned no graph at batch %d", b)
		}
		if ms[i], err = Export(g, cfg); err != nil {
			return nil, fmt.Errorf("onnxexport: ExportBatch: at batch %d: %w", b, err)
		}
	}
	if err := sameStructure(ms); err != nil {
		return nil, fmt.Errorf("onnxexport: ExportBatch: %w", err)
	}
	r := newBatchRewriter(ms)
	if err := r.rewrite(); err != nil {
		return nil, fmt.Errorf("onnxexport: ExportBatch: %w", err)
	}
	return ms[0], nil
}

// affine is a number of a model at batch b: a*b + c.
type affine struct{ a, c int64 }

// fitAffine returns the affine function giving vs[i] at batchProbes[i],
// and false when there is none.
func fitAffine(vs []int64) (affine, bool) {
	x0, x1 := int64(batchProbes[0]), int64(batchProbes[1])
	dy := vs[1] - vs[0]
	if dy%(x1-x0) != 0 {
		return affine{}, false
	}
	f := affine{a: dy / (x1 - x0)}
	f.c = vs[0] - f.a*x0
	for i, b := range batchProbes {
		if f.a*int64(b)+f.c != vs[i] {
			return affine{}, false
		}
	}
	return f, true
}

// String writes f as a formula in batch: "batch", "2*batch", "batch-1".
func (f affine) String() string {
	var s string
	switch f.a {
	case 0:
		return fmt.Sprint(f.c)
	case 1:
		s = "batch"
	default:
		s = fmt.Sprintf("%d*batch", f.a)
	}
	if f.c != 0 {
		s += fmt.Sprintf("%+d", f.c)
	}
	return s
}

// sameStructure returns an error naming the first node, initializer,
// input or output whose name, type, rank or attributes differ between the
// exports ms (at batchProbes).
func sameStructure(ms []*onnx.Model) error {
	a := &ms[0].Graph
	for i, m := range ms[1:] {
		b := &m.Graph
		at := fmt.Sprintf("batch %d and %d", batchProbes[0], batchProbes[i+1])
		if len(a.Nodes) != len(b.Nodes) || len(a.Initializers) != len(b.Initializers) || len(a.Inputs) != len(b.Inputs) || len(a.Outputs) != len(b.Outputs) {
			return fmt.Errorf("%w: the exports at %s have %d and %d nodes, %d and %d initializers: the graph's structure changes with the batch",
				ErrBatchDependent, at, len(a.Nodes), len(b.Nodes), len(a.Initializers), len(b.Initializers))
		}
		for j := range a.Nodes {
			if d := nodeDiff(a.Nodes[j], b.Nodes[j]); d != "" {
				return fmt.Errorf("%w: ONNX node %q (%s) at %s: %s", ErrBatchDependent, a.Nodes[j].Name, a.Nodes[j].OpType, at, d)
			}
		}
		for j, t := range a.Initializers {
			if u := b.Initializers[j]; t.Name != u.Name || t.Type != u.Type || len(t.Dims) != len(u.Dims) {
				return fmt.Errorf("%w: initializer %q (%v %v) at batch %d is %q (%v %v) at batch %d", ErrBatchDependent,
					t.Name, t.Type, t.Dims, batchProbes[0], u.Name, u.Type, u.Dims, batchProbes[i+1])
			}
		}
		for j, v := range slices.Concat(a.Inputs, a.Outputs) {
			if u := slices.Concat(b.Inputs, b.Outputs)[j]; v.Name != u.Name || v.Type != u.Type || len(v.Dims) != len(u.Dims) {
				return fmt.Errorf("%w: graph input or output %q (%v %v) at batch %d is %q (%v %v) at batch %d", ErrBatchDependent,
					v.Name, v.Type, v.Dims, batchProbes[0], u.Name, u.Type, u.Dims, batchProbes[i+1])
			}
		}
	}
	return nil
}

// nodeDiff says how node b differs from node a, or returns "".
func nodeDiff(a, b onnx.Node) string {
	switch {
	case a.Name != b.Name || a.OpType != b.OpType:
		return fmt.Sprintf("the other export has node %q (%s) there", b.Name, b.OpType)
	case !slices.Equal(a.Inputs, b.Inputs) || !slices.Equal(a.Outputs, b.Outputs):
		return fmt.Sprintf("inputs %v and outputs %v, in the other export %v and %v", a.Inputs, a.Outputs, b.Inputs, b.Outputs)
	case len(a.Attrs) != len(b.Attrs):
		return fmt.Sprintf("%d and %d attributes", len(a.Attrs), len(b.Attrs))
	}
	for k := range a.Attrs {
		if !reflect.DeepEqual(a.Attrs[k], b.Attrs[k]) {
			return fmt.Sprintf("attribute %q changes with the batch", a.Attrs[k].Name())
		}
	}
	return ""
}

// reader is a node that reads a value: its name, op type and the input's
// index.
type reader struct {
	node, op string
	index    int
}

// batchRewriter turns the export at batchProbes[0] into one for any batch.
type batchRewriter struct {
	ms      []*onnx.Model
	g       *onnx.Graph         // ms[0]'s graph, rewritten in place
	used    map[string]bool     // value and node names taken
	readers map[string][]reader // the nodes that read each value
	pre     []onnx.Node         // nodes computing shapes, put before the others
	src     *onnx.ValueInfo     // the input whose axis srcAxis is the batch
	srcAxis int
	values  map[affine]string // the 1-D values holding [a*batch + c] made so far
	drop    map[string]bool   // initializers replaced by nodes
}

func newBatchRewriter(ms []*onnx.Model) *batchRewriter {
	g := &ms[0].Graph
	r := &batchRewriter{ms: ms, g: g, used: map[string]bool{}, readers: map[string][]reader{}, values: map[affine]string{}, drop: map[string]bool{}}
	for _, v := range slices.Concat(g.Inputs, g.Outputs) {
		r.used[v.Name] = true
	}
	for _, t := range g.Initializers {
		r.used[t.Name] = true
	}
	for _, n := range g.Nodes {
		r.used[n.Name] = true
		for _, out := range n.Outputs {
			r.used[out] = true
		}
		for k, in := range n.Inputs {
			r.readers[in] = append(r.readers[in], reader{n.Name, n.OpType, k})
		}
	}
	return r
}

// rewrite makes r.g independent of the batch: symbolic input and output
// dimensions, and the initializers that change with the batch computed
// from the input's batch axis.
func (r *batchRewriter) rewrite() error {
	if err := r.valueInfos(r.g.Inputs, func(m *onnx.Model) []onnx.ValueInfo { return m.Graph.Inputs }, "input"); err != nil {
		return err
	}
	if err := r.valueInfos(r.g.Outputs, func(m *onnx.Model) []onnx.ValueInfo { return m.Graph.Outputs }, "output"); err != nil {
		return err
	}
	for i, t := range r.g.Initializers {
		if len(r.readers[t.Name]) == 0 && !slices.ContainsFunc(r.g.Outputs, func(v onnx.ValueInfo) bool { return v.Name == t.Name }) {
			r.drop[t.Name] = true // unread (the count of a repeat, say): whatever its value
			continue
		}
		if err := r.initializer(i); err != nil {
			return err
		}
	}
	r.g.Initializers = slices.DeleteFunc(r.g.Initializers, func(t onnx.Tensor) bool { return r.drop[t.Name] })
	r.g.Nodes = append(r.pre, r.g.Nodes...)
	return nil
}

// valueInfos gives the dimensions of vs (the graph's inputs or outputs, of)
// that change with the batch symbolic names, and takes the first input
// axis that is the batch as the one shapes are computed from.
func (r *batchRewriter) valueInfos(vs []onnx.ValueInfo, of func(*onnx.Model) []onnx.ValueInfo, what string) error {
	for i := range vs {
		v := &vs[i]
		for k := range v.Dims {
			f, changes, err := r.fit(func(m *onnx.Model) int64 { return of(m)[i].Dims[k] })
			if err != nil {
				return fmt.Errorf("graph %s %q, dimension %d: %w", what, v.Name, k, err)
			}
			if !changes {
				continue
			}
			if v.Params == nil {
				v.Params = make([]string, len(v.Dims))
			}
			v.Params[k], v.Dims[k] = f.String(), -1
			if r.src == nil && what == "input" && f == (affine{a: 1}) {
				r.src, r.srcAxis = v, k
			}
		}
	}
	return nil
}

// fit returns the affine function of the batch that at(m) is in the
// exports, and whether it changes with the batch.
func (r *batchRewriter) fit(at func(*onnx.Model) int64) (affine, bool, error) {
	vs := make([]int64, len(r.ms))
	for i, m := range r.ms {
		vs[i] = at(m)
	}
	f, ok := fitAffine(vs)
	if !ok {
		return affine{}, false, fmt.Errorf("%w: %v at batches %v is not a*batch + c", ErrBatchDependent, vs, batchProbes)
	}
	return f, f.a != 0, nil
}

// readBy names the nodes that read value name, for error messages.
func (r *batchRewriter) readBy(name string) string {
	var s []string
	for _, rd := range r.readers[name] {
		s = append(s, fmt.Sprintf("%q (%s)", rd.node, rd.op))
	}
	if len(s) == 0 {
		return "no node"
	}
	return "node " + strings.Join(s, ", ")
}

// initializer rewrites initializer i where it changes with the batch.
func (r *batchRewriter) initializer(i int) error {
	t := &r.g.Initializers[i]
	same := true
	for _, m := range r.ms[1:] {
		u := &m.Graph.Initializers[i]
		same = same && slices.Equal(t.Dims, u.Dims) && bytes.Equal(t.Raw, u.Raw)
	}
	if same {
		return nil
	}
	var err error
	switch t.Type {
	case onnx.Int64:
		err = r.intInitializer(i)
	case onnx.Float, onnx.Double:
		err = r.floatInitializer(i)
	default:
		err = fmt.Errorf("%w: a %v initializer", ErrBatchDependent, t.Type)
	}
	if err != nil {
		return fmt.Errorf("initializer %q (%v %v at batch %d), read by %s: %w", t.Name, t.Type, t.Dims, batchProbes[0], r.readBy(t.Name), err)
	}
	return nil
}

// int64s returns the values of an INT64 tensor.
func int64s(t *onnx.Tensor) []int64 {
	v := make([]int64, len(t.Raw)/8)
	for i := range v {
		v[i] = int64(binary.LittleEndian.Uint64(t.Raw[8*i:]))
	}
	return v
}

// intInitializer rewrites a 1-D INT64 initializer (a shape, axes, bounds)
// whose entries change with the batch: -1 where it is a Reshape target
// with one such entry, else a vector computed from the batch.
func (r *batchRewriter) intInitializer(i int) error {
	t := &r.g.Initializers[i]
	if len(t.Dims) != 1 {
		return fmt.Errorf("%w: only 1-D INT64 initializers (shapes, axes, bounds) may change with the batch", ErrBatchDependent)
	}
	for _, m := range r.ms[1:] {
		if !slices.Equal(t.Dims, m.Graph.Initializers[i].Dims) {
			return fmt.Errorf("%w: its length changes with the batch", ErrBatchDependent)
		}
	}
	entries := make([]affine, t.Dims[0])
	changing := 0
	for k := range entries {
		f, changes, err := r.fit(func(m *onnx.Model) int64 { return int64s(&m.Graph.Initializers[i])[k] })
		if err != nil {
			return fmt.Errorf("entry %d: %w", k, err)
		}
		entries[k] = f
		if changes {
			changing++
		}
	}
	onlyReshape := len(r.readers[t.Name]) > 0
	for _, rd := range r.readers[t.Name] {
		onlyReshape = onlyReshape && rd.op == "Reshape" && rd.index == 1
	}
	if onlyReshape && changing == 1 {
		v := make([]int64, len(entries))
		for k, f := range entries {
			v[k] = f.c
			if f.a != 0 {
				v[k] = -1
			}
		}
		*t = onnx.Int64Tensor(t.Name, t.Dims, v)
		return nil
	}
	r.drop[t.Name] = true
	return r.vector(t.Name, entries)
}

// floatInitializer rewrites a float initializer whose shape changes with
// the batch and that holds one value throughout, the same at every batch,
// as Expand of that value to the shape computed from the batch.
func (r *batchRewriter) floatInitializer(i int) error {
	t := &r.g.Initializers[i]
	width := 4
	if t.Type == onnx.Double {
		width = 8
	}
	if len(t.Raw) < width {
		return fmt.Errorf("%w: it holds no value", ErrBatchDependent)
	}
	value := t.Raw[:width]
	for b, m := range r.ms {
		raw := m.Graph.Initializers[i].Raw
		if len(raw) < width || !bytes.Equal(raw[:width], value) {
			return fmt.Errorf("%w: its value at batch %d is not the one at batch %d", ErrBatchDependent, batchProbes[b], batchProbes[0])
		}
		for k := 0; k < len(raw); k += width {
			if !bytes.Equal(raw[k:k+width], value) {
				return fmt.Errorf("%w: it holds several values at batch %d (a constant whose shape follows the batch must hold one value throughout, such as zeros: compute others in the graph from a smaller constant)",
					ErrBatchDependent, batchProbes[b])
			}
		}
	}
	dims := make([]affine, len(t.Dims))
	for k := range dims {
		f, _, err := r.fit(func(m *onnx.Model) int64 { return m.Graph.Initializers[i].Dims[k] })
		if err != nil {
			return fmt.Errorf("dimension %d: %w", k, err)
		}
		dims[k] = f
	}
	ones := make([]int64, len(t.Dims))
	for k := range ones {
		ones[k] = 1
	}
	one := r.fresh(t.Name + ".value")
	r.g.Initializers = append(r.g.Initializers, onnx.Tensor{Name: one, Type: t.Type, Dims: ones, Raw: slices.Clone(value)})
	shape := r.fresh(t.Name + ".shape")
	if err := r.vector(shape, dims); err != nil {
		return err
	}
	r.drop[t.Name] = true
	r.pre = append(r.pre, onnx.Node{Name: r.fresh(t.Name + ".expand"), OpType: "Expand", Inputs: []string{one, shape}, Outputs: []string{t.Name}})
	return nil
}

// fresh returns an unused name made from base.
func (r *batchRewriter) fresh(base string) string {
	name := base
	for k := 1; r.used[name]; k++ {
		name = fmt.Sprintf("%s_%d", base, k)
	}
	r.used[name] = true
	return name
}

// vector writes nodes computing the 1-D INT64 value name holding entries
// at the model's batch: runs of constant entries as initializers, the
// others from the batch, concatenated.
func (r *batchRewriter) vector(name string, entries []affine) error {
	var parts []string
	for k := 0; k < len(entries); {
		if entries[k].a != 0 {
			v, err := r.affineValue(entries[k])
			if err != nil {
				return err
			}
			parts = append(parts, v)
			k++
			continue
		}
		var run []int64
		for ; k < len(entries) && entries[k].a == 0; k++ {
			run = append(run, entries[k].c)
		}
		parts = append(parts, r.ints(name+".const", run...))
	}
	if len(parts) == 1 {
		r.pre = append(r.pre, onnx.Node{Name: r.fresh(name + ".identity"), OpType: "Identity", Inputs: parts, Outputs: []string{name}})
		return nil
	}
	r.pre = append(r.pre, onnx.Node{Name: r.fresh(name + ".concat"), OpType: "Concat", Inputs: parts, Outputs: []string{name}, Attrs: []onnx.Attr{onnx.Int("axis", 0)}})
	return nil
}

// ints returns the name of a new 1-D INT64 initializer holding v.
func (r *batchRewriter) ints(base string, v ...int64) string {
	name := r.fresh(base)
	r.g.Initializers = append(r.g.Initializers, onnx.Int64Tensor(name, []int64{int64(len(v))}, v))
	return name
}

// affineValue returns the name of a 1-D INT64 value holding [a*batch + c]
// computed from the batch axis of the input (Shape, Mul, Add), made once.
func (r *batchRewriter) affineValue(f affine) (string, error) {
	if v, ok := r.values[f]; ok {
		return v, nil
	}
	if r.src == nil {
		return "", fmt.Errorf("%w: no graph input has a dimension that is the batch, to compute %s from", ErrBatchDependent, f)
	}
	var v string
	switch f {
	case affine{a: 1}:
		v = r.fresh("batch")
		r.pre = append(r.pre, onnx.Node{Name: r.fresh("batch.shape"), OpType: "Shape", Inputs: []string{r.src.Name}, Outputs: []string{v},
			Attrs: []onnx.Attr{onnx.Int("start", int64(r.srcAxis)), onnx.Int("end", int64(r.srcAxis)+1)}})
	default:
		b, err := r.affineValue(affine{a: 1})
		if err != nil {
			return "", err
		}
		v = b
		if f.a != 1 {
			v = r.binary("Mul", v, r.ints("batch.factor", f.a))
		}
		if f.c != 0 {
			v = r.binary("Add", v, r.ints("batch.offset", f.c))
		}
	}
	r.values[f] = v
	return v, nil
}

// binary appends a node of op type op on a and b and returns its output.
func (r *batchRewriter) binary(op, a, b string) string {
	out := r.fresh("batch." + strings.ToLower(op))
	r.pre = append(r.pre, onnx.Node{Name: out, OpType: op, Inputs: []string{a, b}, Outputs: []string{out}})
	return out
}
