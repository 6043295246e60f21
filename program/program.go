// Package program compiles a Gorgonia graph, with the gradient nodes that
// gorgonia.Grad wrote into it, into a program for a backend (package
// backend) and runs it: orthonet's replacement for Gorgonia's tape machine.
//
// Compile walks the graph once: it orders the nodes that the requested
// outputs and gradients need, lowers each Gorgonia op to backend kernels
// with its parameters read at compile time, makes Reshapes views, plans the
// temporary buffers with reuse by liveness, and keeps parameters, their
// gradients, inputs and constants resident in the backend. An op it does
// not know fails Compile with an error naming the op and the node; a
// compiled program never fails for want of a kernel.
//
// A training step is SetInput for each input, Run (forward and backward:
// gradients are written afresh, never accumulated), then a Solver's Step,
// which updates the parameters where they live. Read copies any output to
// the host; Collect copies outputs with the gradients' finite flags that
// the Step checks, in one wait for a device. On a backend whose buffers live on the host, the parameters'
// Gorgonia nodes are views of the program's buffers from the first Run on;
// elsewhere parameters move between the backend and their nodes only by
// StoreParams and LoadParams, and Run refuses (ErrParamsChanged) to train
// on a copy whose node was changed behind its back.
// checkpoint.File.LoadProgram loads a checkpoint into the nodes, the
// program and its solver in one call.
package program

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/program/lower"
)

// Config says what to compile.
type Config struct {
	// Backend runs the program. Required.
	Backend backend.Backend
	// Outputs are the nodes Read may read after Run (a loss, logits).
	Outputs []*G.Node
	// Params are the trainable leaves, with the manifold each lives on
	// (package param). Run computes the gradient of each (the node
	// gorgonia.Grad made for it) unless NoGrad is set. Their values are
	// copied from the nodes at Compile.
	Params []param.Param
	// NoGrad compiles the forward pass only (an evaluation program).
	NoGrad bool
	// Inputs are leaves whose values SetInput sets before each Run (data,
	// labels, dropout masks). Every other leaf is a constant: its value is
	// copied into the backend once, at Compile.
	Inputs []*G.Node
	// Profile times every kernel of every Run (see Profile); it costs two
	// clock readings per kernel.
	Profile bool
	// Groups, when set, are the optimizer groups the program's Solver will
	// step it with (NewSolver). Where the backend's buffers live on the
	// host (the CPU backend) and every constrained group's rule steps from
	// a gradient's factors for less (optim.FactoredRule: RSDM) with one
	// submanifold size r, the gradient of a constrained n x p weight that
	// is a product A^T B (a linear layer's, over a batch of K rows) is left
	// as its two factors wherever a step costs less from them: RSDM needs
	// only P G (PX)^T = (A P^T)^T (B (PX)^T), O(K r (p + r)) work against
	// O(K n p) to form G, so wherever r (p + r) < n p. Such a weight's
	// Param.Grad has no buffer; GradA and GradB hold the factors
	// (optim.Factored), and only such a rule steps it. Without Groups every
	// gradient is formed.
	Groups []optim.Group
	// Share, when set, is a compiled program on the same backend whose
	// parameter buffers this program uses for its parameters of the same
	// names (a forward-only evaluation program of a model being trained).
	Share *Program
	// EvalMode compiles gorgonia's ops that have a training mode (BatchNorm
	// and Dropout, its TrainModeOps) in inference mode, as
	// gorgonia.EvalMode() makes a VM run them; without it they compile in
	// training mode, as a VM runs them by default. (A VM sets every such
	// op's mode when it is made, whatever the op's own flag says; so does
	// Compile.) An evaluation program (NoGrad, Share) usually sets it: its
	// batch norms then use the running statistics, which a training-mode
	// program updates at every Run, and its dropout is the identity.
	EvalMode bool
	// Dropout lists leaves that are dropout masks (nn.Dropout's) which the
	// program draws itself at the start of every Run, on its backend, from
	// DropoutSeed, the mask's position in the list and the program's step
	// (backend.DropoutMask): the same masks on every backend, none copied
	// to a device.
	Dropout []Dropout
	// DropoutSeed seeds the masks of Dropout and every random draw of the
	// graph: gorgonia's Dropout ops and its random nodes (UniformRandomNode,
	// GaussianRandomNode, BinomialRandomNode), which the program draws at
	// every Run from the seed, the node (its stream is 2^32 plus its node's
	// ID, the same for a graph built by the same code) and the step
	// (backend.Dropout, backend.Random).
	DropoutSeed uint64
	// Accuracy, when its Logits are set, has every Run also count the
	// correct predictions of a classifier (backend.CountCorrect, the count
	// nn.Accuracy makes), which Collect returns: the logits need not leave
	// the backend.
	Accuracy Accuracy
	// MaxBytes bounds the bytes of the buffers Compile allocates in the
	// backend (every parameter, gradient, input, constant, output and
	// temporary, after temporaries share by liveness): a graph whose
	// buffers take more is refused before any is allocated, with an error
	// wrapping ErrMemory that names the largest buffers' nodes. Zero, the
	// default, means the memory left: the device's free memory for a
	// backend that reports it (a MemInfo method, the CUDA backend's), else
	// the host's as package internal/membudget finds it (the smallest of
	// MemAvailable, RLIMIT_AS less the address space held, and the
	// cgroup's limit less its usage), or no bound where none can be read.
	// Below zero: no bound.
	MaxBytes int64
	// unfused compiles every pattern the general way, without fusions:
	// what tests compare the fused kernels with.
	unfused bool
	// unchained keeps every elementwise kernel apart (no Chains): what
	// tests compare the chained programs with; chainOnHost chains them on
	// a host backend too, which by default keeps them apart.
	unchained, chainOnHost bool
}

// Dropout is a dropout mask leaf and its probability of a zero.
type Dropout struct {
	Node *G.Node
	P    float64
}

// ErrUnknownOp reports a graph with an op the compiler cannot lower.
var ErrUnknownOp = lower.ErrUnknownOp

// ErrMemory reports a graph whose buffers take more memory than
// Config.MaxBytes allows.
var ErrMemory = errors.New("program: more memory than the budget")

// Param is one trainable parameter of a compiled program.
type Param struct {
	// Node is the parameter's leaf in the graph.
	Node *G.Node
	// Manifold is the manifold the parameter lives on; nil for an
	// unconstrained one.
	Manifold manifold.Kind
	// Value and Grad are where its value and gradient live in the
	// backend, Size elements from each; Grad has no buffer in a program
	// compiled with NoGrad.
	Value, Grad backend.Operand
	Size        int
	// GradA and GradB, for a weight whose gradient the program leaves
	// factored (Config.Groups), are the K x n and K x p factors of its
	// gradient A^T B, with K = GradK.
	GradA, GradB backend.Operand
	GradK        int
}

// Program is a compiled graph. It is not safe for concurrent use.
type Program struct {
	be      backend.Backend
	funcs   []backend.Func
	kernels []backend.Kernel // each Func's kernel
	inputs  map[*G.Node]*val
	reads   map[*G.Node]*val
	params  []paramVal
	// flags holds, per parameter, whether its gradient may be non-finite
	// (suspect, from a product bound) and whether it is (scanned).
	flags     backend.Buffer
	flagsHost []int32
	flagsAny  any              // flagsHost, boxed once so that CheckGrads does not allocate
	owned     []backend.Buffer // buffers this program allocated
	step      backend.Buffer   // the step the random draws are keyed by (Float64)
	stepHost  []float64
	stepAny   any        // stepHost, boxed once
	stepN     int        // the step the next Run draws for
	states    []stateVal // batch norm's running statistics
	// profile holds each kernel's total time and runs, when profiling.
	profile []time.Duration
	runs    int
	// ints holds, per integer input or output, the host buffer its values
	// are converted in (ints.go).
	ints map[*val][]int32

	// flagsRead says Collect read the flags of the last Run into
	// flagsHost; correct holds Config.Accuracy's count of the last Run.
	flagsRead   bool
	correct     backend.Buffer
	correctHost []int32
	correctAny  any
	collect     []backend.Read // Collect's workspace
}

// KernelTime is the time a Run spends in one kind of kernel.
type KernelTime struct {
	// Kernel describes the kernels: their name and shape.
	Kernel string
	// Count is how many such kernels one Run launches.
	Count int
	// PerRun is their total time per Run.
	PerRun time.Duration
}

// Profile returns, for a program compiled with Config.Profile, the time per
// Run spent in each kind of kernel (the same name and sizes), most first,
// and the number of Runs measured. On a backend that runs kernels
// asynchronously the times are those of launching them.
func (p *Program) Profile() ([]KernelTime, int) {
	if p.profile == nil || p.runs == 0 {
		return nil, p.runs
	}
	var res []KernelTime
	at := map[string]int{} // a description's place in res
	for i, d := range p.profile {
		desc := describe(p.kernels[i])
		j, ok := at[desc]
		if !ok {
			j = len(res)
			at[desc] = j
			res = append(res, KernelTime{Kernel: desc})
		}
		res[j].Count++
		res[j].PerRun += d / time.Duration(p.runs)
	}
	slices.SortFunc(res, func(a, b KernelTime) int { // most time first, then by name
		return cmp.Or(cmp.Compare(b.PerRun, a.PerRun), strings.Compare(a.Kernel, b.Kernel))
	})
	return res, p.runs
}

// paramVal is a parameter with the values of its node and gradient.
type paramVal struct {
	Param
	v, g   *val
	fa, fb *val // the factors of a factored gradient
	// node is what the program knows of the parameter's node since it last
	// copied the node's value in or out.
	node binding
}

// binding is a parameter node's value as the program last copied it in or
// out (the first Run, LoadParams, StoreParams). On a backend whose buffers
// live on the host the node's value is then a view of the program's
// buffer, so that node and program hold one copy; on another (a GPU) Run
// compares the node with what the program last copied, to refuse training
// on a stale copy.
type binding struct {
	value  G.Value  // the node's value; nil until the first Run
	shared bool     // value is a view of the program's buffer
	elems  elems    // value's elements (off the host)
	probe  []uint64 // the bits of the elements at probePositions
	sum    uint64   // checksum of all elements
	verify bool     // the next Run compares the checksum, not only the probes
}

// val is where one node's value lives: a slice of a (virtual, until
// planned) buffer.
type val struct {
	shape tensor.Shape
	size  int
	vb    *vbuf
	off   int
}

func (v *val) operand() backend.Operand { return backend.Operand{Buf: v.vb, Off: v.off} }

// vbuf is a buffer before planning: the kernels are lowered against vbufs,
// which the planner then maps onto physical buffers, sharing one among
// temporaries whose lifetimes do not overlap.
type vbuf struct {
	dt         backend.DType
	n          int
	persistent bool
	def, last  int // first and last kernel that touches it; -1 if none
	phys       backend.Buffer
	physOff    int
	init       any // host data copied in after allocation (constants)
	name       string
}

func (b *vbuf) DType() backend.DType { return b.dt }
func (b *vbuf) Len() int             { return b.n }

// Kernels returns how many kernels a Run launches.
func (p *Program) Kernels() int { return len(p.funcs) }

// Backend returns the backend the program runs on.
func (p *Program) Backend() backend.Backend { return p.be }

// Run runs the program once: the forward pass and, unless compiled with
// NoGrad, the backward pass, writing every parameter's gradient afresh. Its
// random draws are those of the program's step, which it then advances by
// one (SetStep).
//
// Run fails with an error wrapping ErrParamsChanged, before any kernel runs,
// when a parameter's node was given another value since the program copied
// it (at Compile, LoadParams or StoreParams) without LoadParams: the
// program would otherwise train on its stale copy. On a backend whose
// buffers live on the host, the first Run makes each parameter node's value
// a view of the program's buffer: from then on the node and the program
// hold one copy, and writing into the node's data writes the parameter.
//
// Run does not panic: a panic in a kernel it calls becomes an error that
// names the kernel.
func (p *Program) Run() (err error) {
	i := -1 // the kernel running, which a panic's error names
	defer func() {
		if r := recover(); r != nil {
			if i < 0 {
				err = fmt.Errorf("program: Run: %v", r)
			} else {
				err = fmt.Errorf("program: kernel %d (%s): %v", i, backend.Name(p.kernels[i]), r)
			}
		}
	}()
	p.flagsRead = false
	if err := p.checkNodes(); err != nil {
		return err
	}
	if err := p.copyStep(); err != nil {
		return err
	}
	var f func() error
	for i, f = range p.funcs {
		var t0 time.Time
		if p.profile != nil {
			t0 = time.Now()
		}
		err := f()
		if p.profile != nil {
			p.profile[i] += time.Since(t0)
		}
		if err != nil {
			return fmt.Errorf("program: kernel %d (%s): %w", i, backend.Name(p.kernels[i]), err)
		}
	}
	if p.profile != nil {
		p.runs++
	}
	p.stepN++
	return nil
}

// SetStep sets the step whose random values the next Run draws: the masks
// of Config.Dropout, gorgonia's Dropout ops and random nodes. Each Run
// advances the step by one, so that a program whose step is never set
// draws anew at every Run; a training loop may set it to its own step
// count before each Run (cmd/train does). A checkpoint of the program
// (checkpoint.File.PutProgram) keeps the step.
func (p *Program) SetStep(step int) error {
	if step < 0 || step > 1<<53 {
		return fmt.Errorf("program: step %d, want 0 to 2^53", step)
	}
	p.stepN = step
	return nil
}

// CheckGrads reports whether every gradient of the last Run is finite:
// nil if so, else an error that names the first parameter with a NaN or
// Inf in its gradient and wraps optim.ErrNotFinite. The check was made
// while the gradients were computed, into flags that CheckGrads reads
// (unless Collect read them after the Run); a gradient flagged only by the
// bound on its factors is scanned here to be sure.
func (p *Program) CheckGrads() error {
	if p.flags == nil {
		return errors.New("program: compiled with NoGrad or without parameters: there are no gradients")
	}
	if !p.flagsRead {
		if err := p.be.CopyOut(p.flagsAny, p.flags, 0); err != nil {
			return err
		}
	}
	for i := range p.params {
		pv := &p.params[i]
		bad := p.flagsHost[2*i+1] != 0
		if !bad && p.flagsHost[2*i] != 0 {
			// A bound on the factors failed: scan the gradient, or for a
			// factored one its factors (an overflow of their product is
			// then caught by RSDM itself).
			scans := []*val{pv.g}
			if pv.fa != nil {
				scans = []*val{pv.fa, pv.fb}
			}
			for _, v := range scans {
				finite := scan[float64]
				if v.vb.dt == backend.Float32 {
					finite = scan[float32]
				}
				ok, err := finite(p.be, v)
				if err != nil {
					return err
				}
				bad = bad || !ok
			}
		}
		if bad {
			return fmt.Errorf("program: gradient of %q: %w", pv.Node.Name(), optim.ErrNotFinite)
		}
	}
	return nil
}

// scan reports whether every element of v, of type T, is finite, reading
// it on the host.
func scan[T linalg.Float](be backend.Backend, v *val) (bool, error) {
	host := make([]T, v.size)
	err := be.CopyOut(host, v.vb.phys, v.vb.physOff+v.off)
	return err == nil && linalg.Finite(host), err
}

// SetInput copies data ([]float32 or []float64 of n's type and size) into
// the input n; an integer input (indices) takes []int, []int32 or []int64,
// each entry within the range of int32, and a boolean one []bool. (Converting
// a slice to an interface allocates: a caller that reuses one slice can
// convert it once and pass the same value.)
func (p *Program) SetInput(n *G.Node, data any) error {
	v, ok := p.inputs[n]
	if !ok {
		return fmt.Errorf("program: node %q is not an input of the program", n.Name())
	}
	if v.vb.dt == backend.Int32 {
		return p.setInts(n, v, data)
	}
	if l, ok := lower.HostLen(data); !ok || l != v.size {
		return fmt.Errorf("program: input %q takes %d values of %v, got %T of %d", n.Name(), v.size, v.vb.dt, data, l)
	}
	return p.be.CopyIn(v.vb.phys, v.vb.physOff+v.off, data)
}

// Read copies the value of n, an output, parameter or input of the program,
// into dst ([]float32 or []float64 of n's type and size); integers and
// booleans (comparisons built with retSame false) are read into []int32,
// []int, []int64 or []bool.
func (p *Program) Read(n *G.Node, dst any) error {
	v, err := p.readVal(n)
	if err != nil {
		return err
	}
	if v.vb.dt == backend.Int32 {
		return p.readInts(n, v, dst)
	}
	if err := fitsRead(n, v, dst); err != nil {
		return err
	}
	return p.be.CopyOut(dst, v.vb.phys, v.vb.physOff+v.off)
}

// readVal returns the value of n, an output, parameter or input of the
// program (Read and Collect).
func (p *Program) readVal(n *G.Node) (*val, error) {
	v, ok := p.reads[n]
	if !ok {
		return nil, fmt.Errorf("program: node %q is not an output, parameter or input of the program", n.Name())
	}
	return v, nil
}

// fitsRead reports an error unless dst is a host slice of v's size.
func fitsRead(n *G.Node, v *val, dst any) error {
	if l, ok := lower.HostLen(dst); !ok || l != v.size {
		return fmt.Errorf("program: node %q has %d values of %v, reading into %T of %d", n.Name(), v.size, v.vb.dt, dst, l)
	}
	return nil
}

// Params returns the program's parameters in the order of Config.Params.
func (p *Program) Params() []Param {
	out := make([]Param, len(p.params))
	for i, pv := range p.params {
		out[i] = pv.Param
	}
	return out
}

// ParamNodes returns the parameters' Gorgonia nodes in the order of
// Config.Params (what checkpoint.File.PutNodes and LoadNodes take).
func (p *Program) ParamNodes() G.Nodes {
	out := make(G.Nodes, len(p.params))
	for i, pv := range p.params {
		out[i] = pv.Node
	}
	return out
}

// StoreParams copies every parameter's value from the backend into its
// Gorgonia node (before a checkpoint is written, or the nodes read), and
// the running statistics of every gorgonia BatchNorm into its op (what its
// Stats returns), so that the tape machine sees them. On a backend whose
// buffers live on the host the nodes are views of the program's buffers
// after the first Run, and this copies no parameter.
func (p *Program) StoreParams() error {
	for i := range p.params {
		pv := &p.params[i]
		if err := p.be.CopyOut(pv.Node.Value().Data(), pv.v.vb.phys, pv.v.vb.physOff+pv.v.off); err != nil {
			return fmt.Errorf("program: storing %q: %w", pv.Node.Name(), err)
		}
		if err := p.bind(pv); err != nil {
			return err
		}
	}
	return p.storeStates()
}

// LoadParams copies every parameter's value from its Gorgonia node into the
// backend: after the nodes were given new values (a checkpoint loaded with
// checkpoint.File.LoadNodes; checkpoint.File.LoadProgram does both).
func (p *Program) LoadParams() error {
	for i := range p.params {
		pv := &p.params[i]
		if err := p.be.CopyIn(pv.v.vb.phys, pv.v.vb.physOff+pv.v.off, pv.Node.Value().Data()); err != nil {
			return fmt.Errorf("program: loading %q: %w", pv.Node.Name(), err)
		}
		if err := p.bind(pv); err != nil {
			return err
		}
	}
	return nil
}

// ErrParamsChanged reports a parameter whose Gorgonia node was given
// another value after the program copied it, without Program.LoadParams:
// Run refuses to train on its stale copy.
var ErrParamsChanged = errors.New("program: a parameter's node changed behind the program's back")

// probePositions is how many elements of each parameter Run compares with
// the node's on a backend off the host: a checkpoint loaded into the nodes
// changes all of them.
const probePositions = 16

// checkNodes binds every parameter's node at the first Run, and at every
// Run checks that no node changed since the program last copied it: its
// value replaced (gorgonia.Let), or, off the host, its elements written.
func (p *Program) checkNodes() error {
	for i := range p.params {
		pv := &p.params[i]
		b := &pv.node
		if b.value == nil { // the first Run
			if init := pv.v.vb.init; init != nil && !sameBits(pv.Node.Value().Data(), init) {
				return p.changed(pv, "was written after Compile")
			}
			if err := p.bind(pv); err != nil {
				return err
			}
			pv.v.vb.init = nil // the copy Compile kept is not needed any more
			continue
		}
		if pv.Node.Value() != b.value {
			return p.changed(pv, "was given another value")
		}
		if b.shared {
			continue
		}
		written := b.verify && b.elems.checksum() != b.sum
		b.verify = false
		for j := range b.probe {
			written = written || b.elems.bits(probeAt(j, b.elems.n)) != b.probe[j]
		}
		if written {
			return p.changed(pv, "was written")
		}
	}
	return nil
}

func (p *Program) changed(pv *paramVal, what string) error {
	return fmt.Errorf("%w: the node of %q %s since the program copied it; call LoadParams to train from the node's value (checkpoint.File.LoadProgram loads a checkpoint into the nodes, the program and its solver at once)",
		ErrParamsChanged, pv.Node.Name(), what)
}

// bind records the parameter node's value as the program's copy now
// equals it: on the host it makes the node's value a view of the program's
// buffer (unless it is one already).
func (p *Program) bind(pv *paramVal) error {
	n := pv.Node
	v := n.Value()
	d, dense := v.(*tensor.Dense)
	if h, ok := hostSlice(pv.Value, pv.Size); ok && dense {
		if !sameMemory(d.Data(), h) {
			view := tensor.New(tensor.WithShape(d.Shape().Clone()...), tensor.WithBacking(h))
			if err := G.UnsafeLet(n, view); err != nil {
				return fmt.Errorf("program: binding %q to its buffer: %w", n.Name(), err)
			}
			v = n.Value()
		}
		pv.node = binding{value: v, shared: true}
		return nil
	}
	b := binding{value: v, verify: true, elems: elemsOf(v.Data())}
	b.probe = make([]uint64, min(b.elems.n, probePositions))
	for j := range b.probe {
		b.probe[j] = b.elems.bits(probeAt(j, b.elems.n))
	}
	b.sum = b.elems.checksum()
	pv.node = b
	return nil
}

// probeAt returns the j-th of min(n, probePositions) positions spread over
// n elements, the first and the last among them.
func probeAt(j, n int) int {
	if k := min(n, probePositions); k > 1 {
		return j * (n - 1) / (k - 1)
	}
	return 0
}

// elems reads the bits of a value's elements: a slice's, or a scalar's
// (a copy).
type elems struct {
	bits func(i int) uint64
	n    int
	f32  bool
}

func elemsOf(data any) elems {
	switch x := data.(type) {
	case []float32:
		return elems{func(i int) uint64 { return uint64(math.Float32bits(x[i])) }, len(x), true}
	case []float64:
		return elems{func(i int) uint64 { return math.Float64bits(x[i]) }, len(x), false}
	case float32:
		return elemsOf([]float32{x})
	case float64:
		return elemsOf([]float64{x})
	}
	return elems{} // no elements
}

// checksum is FNV-1a over the elements' bits.
func (e elems) checksum() uint64 {
	h := uint64(14695981039346656037)
	for i := range e.n {
		h = (h ^ e.bits(i)) * 1099511628211
	}
	return h
}

// sameMemory reports whether the host slices a and b are the same memory.
func sameMemory(a, b any) bool {
	x, y := reflect.ValueOf(a), reflect.ValueOf(b)
	return reflect.TypeOf(a) == reflect.TypeOf(b) && x.Kind() == reflect.Slice && x.Len() == y.Len() && x.Len() > 0 && x.Pointer() == y.Pointer()
}

// sameBits reports whether a value's data (a slice or a scalar) holds the
// same elements, bit for bit, as the host slice b.
func sameBits(a, b any) bool {
	x, y := elemsOf(a), elemsOf(b)
	if x.bits == nil || y.bits == nil || x.n != y.n || x.f32 != y.f32 {
		return false
	}
	for i := range x.n {
		if x.bits(i) != y.bits(i) {
			return false
		}
	}
	return true
}

// Close frees the buffers the program allocated (not those it shares).
func (p *Program) Close() error {
	var errs []error
	for _, b := range p.owned {
		errs = append(errs, p.be.Free(b))
	}
	p.owned = nil
	return errors.Join(errs...)
}
