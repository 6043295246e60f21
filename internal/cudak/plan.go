// Package cudak holds orthonet's CUDA kernels (kernels.cu, our own CUDA C++)
// and the planner that turns a backend kernel into launches of them and
// cuBLAS products. The CUDA backend (backend/cuda) runs the plans on a GPU,
// or on the host model of one (package cudak/standin, which compiles the
// same kernel source for the host), so that the kernels and the planning
// are tested without a GPU.
package cudak

import (
	_ "embed"
	"fmt"
	"math"
	"unsafe"

	"github.com/orthonet/orthonet/backend"
)

// Source is the CUDA C++ source of the kernels, for NVRTC.
//
//go:embed kernels.cu
var Source string

// CompileOptions are the NVRTC options the kernels are built with, besides
// the architecture: no contraction of a*b+c into fused multiply-adds, so
// that the kernels round as the CPU backend does.
var CompileOptions = []string{"--fmad=false", "-std=c++17"}

// Threads is the block size of every launch (NT in kernels.cu).
const Threads = 256

// maxGrid bounds the blocks of a launch; the kernels stride over the rest.
// A Device with a method MaxGrid() int returning a positive number bounds
// them further (tests do, so that the grid-stride loops repeat).
const maxGrid = 4096

// Device is what the planner needs from a backend.
type Device interface {
	// Addr returns the device address of an operand's first element.
	Addr(op backend.Operand) (uint64, error)
	// Scratch returns zeroed device memory of n elements of dt that the
	// backend keeps until it closes.
	Scratch(dt backend.DType, n int) (uint64, error)
	// Fault returns the address of the backend's four fault words, where
	// the row kernels record the first bad row index (see Fault).
	Fault() uint64
}

// Step is a Launch or a Gemm.
type Step interface{ isStep() }

// Launch runs kernel Kernel on Grid blocks of Threads threads with Args,
// the 64-bit words of its argument struct.
type Launch struct {
	Kernel string
	Grid   int
	Args   []uint64
}

// Gemm is a strided batched matrix product as cuBLAS takes it: column-major
// C = Alpha op(A) op(B) + Beta C, op(A) M x K and op(B) K x N, for Batch
// matrices; with Beta = 0, C is not read.
type Gemm struct {
	F64                       bool
	TransA, TransB            bool
	M, N, K                   int
	Alpha, Beta               float64
	A, B, C                   uint64
	LDA, LDB, LDC             int
	StrideA, StrideB, StrideC int
	Batch                     int
}

// Potrf is cuSOLVER's Cholesky factorization of the symmetric N x N matrix
// at A in place (its lower triangle, column-major), which leaves in the
// row-major upper triangle the factor R with A = R^T R; it writes 0 to the
// Int32 element at Info, or the order of the first minor that is not
// positive.
type Potrf struct {
	F64     bool
	N       int
	A, Info uint64
}

// Trsm is cuBLAS's triangular solve that sets the row-major M x N matrix at
// B to B R^-1, R the row-major upper triangle of the N x N matrix at A.
type Trsm struct {
	F64  bool
	M, N int
	A, B uint64
}

func (Launch) isStep() {}
func (Gemm) isStep()   {}
func (Potrf) isStep()  {}
func (Trsm) isStep()   {}

// Fault is the meaning of a backend's fault words, which the first kernel
// to fail writes: Words[0] is 1 after a row kernel met an index outside the
// indexed matrix (then the index, its entry among the indices, and the
// matrix's number of rows), 2 after a Cholesky factorization met a pivot
// that is not positive (then the pivot's index and the order).
type Fault struct{ Words [4]uint64 }

// Err returns the error the fault words report, or nil when Words[0] is 0.
func (f Fault) Err() error {
	switch f.Words[0] {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("row index %d (entry %d of the indices) outside 0 to %d", int64(f.Words[1]), int64(f.Words[2]), int64(f.Words[3])-1)
	case 2:
		return fmt.Errorf("QR factorization failed: pivot %d of the %d x %d Gram matrix is not clear of zero (the matrix is rank deficient, too ill-conditioned for Cholesky QR, or not finite)", int64(f.Words[1]), int64(f.Words[2]), int64(f.Words[2]))
	}
	return fmt.Errorf("unknown fault %d", f.Words[0])
}

// Plan checks k and returns the steps that run it. A kernel the kernels
// cannot run is an error wrapping backend.ErrUnsupported.
func Plan(d Device, k backend.Kernel) ([]Step, error) {
	if c, ok := k.(backend.Checker); ok {
		if err := c.Check(); err != nil {
			return nil, err
		}
	}
	p := planner{d: d}
	if g, ok := d.(interface{ MaxGrid() int }); ok {
		p.maxGrid = g.MaxGrid()
	}
	switch k := k.(type) {
	case backend.Fill:
		p.fill(k)
		return p.done()
	case backend.CheckFinite:
		p.checkFinite(k)
		return p.done()
	}
	dt, err := floatType(k)
	if err != nil {
		return nil, err
	}
	if d, ok := k.(backend.IdentityDelta); ok { // float64 in, the destination's type out
		dt = backend.DTypeOf(d.Dst)
	}
	p.sfx = suffix(dt)
	switch k := k.(type) {
	case backend.Gemm:
		p.gemm(k)
	case backend.Map:
		p.elementwise("on_map", k.N, int(k.Op), k.N, k.Src, k.Dst)
	case backend.Zip:
		p.elementwise("on_zip", k.N, int(k.Op), k.N, k.AScalar, k.BScalar, k.A, k.B, k.Dst)
	case backend.Reduce:
		p.reduce(k)
	case backend.Softmax:
		p.alongAxis("on_softmax", k.Outer, k.Inner, k.Log, k.Outer, k.Axis, k.Inner, k.Src, k.Dst)
	case backend.SoftmaxGrad:
		p.alongAxis("on_softmax_grad", k.Outer, k.Inner, k.Log, k.Outer, k.Axis, k.Inner, k.Y, k.DY, k.DX)
	case backend.Copy:
		p.copy(k)
	case backend.CheckProduct:
		p.checkProduct(k, dt)
	case backend.GatherRows:
		p.rows(k.N, k.Width, k.Rows, k.Src, k.Dst, true)
	case backend.ScatterRows:
		p.rows(k.N, k.Width, k.Rows, k.Src, k.Dst, false)
	case backend.SoftmaxCrossEntropy:
		// A block per row, then one block adds the rows' losses in order.
		part := p.scratch(backend.Float64, k.Rows)
		p.launch("on_ce_rows", rowGrid(k.Rows), k.Rows, k.Classes, k.Z, k.T, part)
		p.launch("on_ce", 1, k.Rows, part, k.Loss)
	case backend.SoftmaxCrossEntropyGrad:
		p.launch("on_ce_grad", rowGrid(k.Rows), k.Rows, k.Classes, k.Z, k.T, k.G, k.DZ)
	case backend.LayerNorm:
		p.launch("on_layer_norm", rowGrid(k.Rows), k.Rows, k.D, k.Eps, k.X, k.Gamma, k.Beta, k.Y)
	case backend.LayerNormGrad:
		p.launch("on_layer_norm_grad", rowGrid(k.Rows), k.Rows, k.D, k.Eps, k.X, k.Gamma, k.DY, k.DX)
	case backend.LayerNormParamGrad:
		p.layerNormParamGrad(k)
	case backend.Attention:
		p.attention(k.Seqs, k.Tokens, k.Heads, k.D, k.Scale, k.Q, k.K, k.V, k.Out, backend.Operand{}, dt)
	case backend.AttentionGrad:
		p.attention(k.Seqs, k.Tokens, k.Heads, k.D, k.Scale, k.Q, k.K, k.V, k.DQKV, k.DOut, dt)
	case backend.BiasAct:
		p.elementwise("on_bias_act", k.Rows*k.N, k.Rows, k.N, int(k.Act), false, k.X, k.Bias, k.X, k.Y)
	case backend.BiasActGrad:
		p.elementwise("on_bias_act", k.Rows*k.N, k.Rows, k.N, int(k.Act), true, k.X, k.Bias, k.DY, k.DX)
	case backend.QF:
		p.qf(k, dt)
	case backend.SGDStep:
		p.elementwise("on_sgd", k.N, k.N, k.Momentum, k.Decay, k.W, k.G, k.Mom, k.LR)
	case backend.AdamStep:
		p.elementwise("on_adam", k.N, k.N, k.Beta1, k.Beta2, k.Eps, k.Decay, k.W, k.G, k.M, k.V, k.Hyper)
	case backend.AddScaled:
		p.elementwise("on_add_scaled", k.N, k.N, k.Alpha, k.X, k.Y, k.Dst, k.Scale)
	case backend.SkewStep:
		p.elementwise("on_skew", k.R*k.R, k.R, k.B, k.Y, k.LR)
	case backend.IdentityDelta:
		p.elementwise("on_identity_delta", k.R*k.R, k.R, k.Y, k.Dst)
	case backend.Symmetrize:
		p.elementwise("on_symmetrize", k.N*k.N, k.N, k.A)
	case backend.DropoutMask:
		p.elementwise("on_dropout_mask", k.N, k.N, k.P, k.Seed, k.Stream, k.Step, k.Dst)
	default:
		return nil, fmt.Errorf("%w: %s", backend.ErrUnsupported, k.Name())
	}
	return p.done()
}

// floatType returns the float type of k's data; int32 data is refused as
// the CPU backend refuses it.
func floatType(k backend.Kernel) (backend.DType, error) {
	for _, op := range k.Operands() {
		if dt := backend.DTypeOf(op); dt == backend.Float32 || dt == backend.Float64 {
			return dt, nil
		}
	}
	return 0, fmt.Errorf("%w: %s of int32 data", backend.ErrUnsupported, k.Name())
}

type planner struct {
	d       Device
	maxGrid int // the Device's bound on a launch's blocks, or 0
	sfx     string
	steps   []Step
	err     error
}

func (p *planner) done() ([]Step, error) {
	if p.err != nil {
		return nil, p.err
	}
	return p.steps, nil
}

// words encodes kernel arguments as the words of an argument struct:
// integers and booleans as int64, floats as float64, operands and
// addresses as device addresses.
func (p *planner) words(args ...any) []uint64 {
	w := make([]uint64, 0, len(args))
	for _, a := range args {
		switch v := a.(type) {
		case int:
			w = append(w, uint64(int64(v)))
		case bool:
			if v {
				w = append(w, 1)
			} else {
				w = append(w, 0)
			}
		case float64:
			w = append(w, math.Float64bits(v))
		case uint64:
			w = append(w, v)
		case backend.Operand:
			if v.Buf == nil { // an operand a kernel may go without
				w = append(w, 0)
				continue
			}
			addr, err := p.d.Addr(v)
			if err != nil && p.err == nil {
				p.err = err
			}
			w = append(w, addr)
		default:
			panic(fmt.Sprintf("cudak: argument of type %T", a))
		}
	}
	return w
}

// launch adds a launch of name (with the planner's type suffix) on grid
// blocks.
func (p *planner) launch(name string, grid int, args ...any) {
	if p.maxGrid > 0 {
		grid = min(grid, p.maxGrid)
	}
	p.steps = append(p.steps, Launch{Kernel: name + p.sfx, Grid: grid, Args: p.words(args...)})
}

// elementwise adds a launch whose threads stride over n items; nothing
// when n is 0.
func (p *planner) elementwise(name string, n int, args ...any) {
	if n > 0 {
		p.launch(name, elemGrid(n), args...)
	}
}

// alongAxis adds a launch of a kernel along the middle axis of (outer,
// axis, inner) arrays: with inner 1 the axis is a row of consecutive
// elements, and name+"_rows" takes a block per row; otherwise name takes a
// thread per lane (o, in).
func (p *planner) alongAxis(name string, outer, inner int, args ...any) {
	if inner == 1 {
		p.launch(name+"_rows", rowGrid(outer), args...)
		return
	}
	p.elementwise(name, outer*inner, args...)
}

func elemGrid(n int) int   { return max(1, min((n+Threads-1)/Threads, maxGrid)) }
func rowGrid(rows int) int { return max(1, min(rows, maxGrid)) }

func (p *planner) scratch(dt backend.DType, n int) uint64 {
	addr, err := p.d.Scratch(dt, n)
	if err != nil && p.err == nil {
		p.err = err
	}
	return addr
}

// suffix returns the suffix of the kernels' names for data of dt.
func suffix(dt backend.DType) string {
	switch dt {
	case backend.Float32:
		return "_f32"
	case backend.Float64:
		return "_f64"
	}
	return "_i32"
}

func (p *planner) fill(k backend.Fill) {
	p.sfx = suffix(backend.DTypeOf(k.Dst))
	p.elementwise("on_fill", k.N, k.N, k.Value, k.Dst)
}

func (p *planner) checkFinite(k backend.CheckFinite) {
	if backend.DTypeOf(k.Src) == backend.Int32 {
		return // integers are finite
	}
	p.sfx = suffix(backend.DTypeOf(k.Src))
	p.elementwise("on_check_finite", k.N, k.N, k.Src, k.Flag)
}

// gemm plans a product; rowMajor does the turn into cuBLAS's terms. An
// empty inner dimension is C = Beta C, by a kernel of ours: cuBLAS's
// handling of k = 0 is not something to rely on.
func (p *planner) gemm(k backend.Gemm) {
	if k.M == 0 || k.N == 0 {
		return
	}
	if k.K == 0 {
		p.elementwise("on_scale_strided", k.Batches()*k.M*k.N, k.Batches(), k.M, k.N, k.LDC, k.StrideC, k.Beta, k.C)
		return
	}
	w := p.words(k.A, k.B, k.C)
	p.rowMajor(k.TransA, k.TransB, k.M, k.N, k.K, k.Alpha, k.Beta, w[0], k.LDA, k.StrideA, w[1], k.LDB, k.StrideB, w[2], k.LDC, k.StrideC, k.Batches())
}

func (p *planner) reduce(k backend.Reduce) {
	op := int(k.Op)
	if k.Inner == 1 {
		p.launch("on_reduce_rows", rowGrid(k.Outer), op, k.Outer, k.Mid, k.Inner, k.Src, k.Dst)
		return
	}
	if k.Op == backend.Sum && k.Outer*k.Inner < splitCols && k.Mid >= 2*splitRows {
		// Few sums over many rows: each is split into chunks of rows, summed
		// by blocks of their own, then the chunks' sums added in order.
		cols, chunks := k.Outer*k.Inner, chunksOf(k.Mid)
		part := p.scratch(backend.Float64, chunks*cols)
		p.launch("on_sum_partial", min(chunks*((cols+Threads-1)/Threads), maxGrid), k.Outer, k.Mid, k.Inner, chunks, k.Src, part)
		p.elementwise("on_sum_parts", cols, cols, chunks, part, k.Dst)
		return
	}
	p.elementwise("on_reduce_mid", k.Outer*k.Inner, op, k.Outer, k.Mid, k.Inner, k.Src, k.Dst)
}

// A sum down a middle axis is split into chunks of at least splitRows rows
// when there are fewer than splitCols sums: a thread per sum would then
// leave most of a GPU idle.
const (
	splitCols = 1 << 15
	splitRows = 64
)

// chunksOf returns how many chunks the rows of a split sum go into.
func chunksOf(rows int) int { return max(1, min(rows/splitRows, 128)) }

func (p *planner) copy(k backend.Copy) {
	shape, ss, ds := k.Simplified()
	n := 1
	for _, s := range shape {
		n *= s
	}
	if n == 0 {
		return
	}
	args := []any{len(shape), n, k.Add}
	for _, list := range [][]int{shape, ss, ds} {
		for i := range backend.MaxDims {
			v := 0
			if i < len(list) {
				v = list[i]
			}
			args = append(args, v)
		}
	}
	p.elementwise("on_copy", n, append(args, k.Src, k.Dst)...)
}

func (p *planner) checkProduct(k backend.CheckProduct, dt backend.DType) {
	limit := math.MaxFloat64 / 2
	if dt == backend.Float32 {
		limit = math.MaxFloat32 / 2
	}
	ws := p.scratch(backend.Float64, 2) // two 64-bit words, zero between runs
	p.elementwise("on_absmax", k.RA*(k.CA+k.CB), k.RA*k.CA, k.RA*k.CB, k.A, k.B, ws)
	p.launch("on_product_verdict", 1, k.RA, limit, ws, k.Flag)
}

func (p *planner) rows(n, width int, rows, src, dst backend.Operand, gather bool) {
	if n == 0 || width == 0 {
		return
	}
	m := dst
	if gather {
		m = src
	}
	limit := (m.Buf.Len() - m.Off) / width
	p.elementwise("on_rows", n*width, n, width, limit, gather, rows, src, dst, p.d.Fault())
}

func (p *planner) layerNormParamGrad(k backend.LayerNormParamGrad) {
	stats := p.scratch(backend.Float64, 2*k.Rows)
	p.launch("on_layer_norm_stats", rowGrid(k.Rows), k.Rows, k.D, k.Eps, k.X, stats)
	if k.D >= splitCols || k.Rows < 2*splitRows {
		p.elementwise("on_layer_norm_param", k.D, k.Rows, k.D, k.X, k.DY, stats, k.DParams)
		return
	}
	chunks := chunksOf(k.Rows)
	part := p.scratch(backend.Float64, chunks*2*k.D)
	p.launch("on_layer_norm_param_partial", min(chunks*((k.D+Threads-1)/Threads), maxGrid), k.Rows, k.D, chunks, k.X, k.DY, stats, part)
	p.elementwise("on_sum_parts", 2*k.D, 2*k.D, chunks, part, k.DParams)
}

// qf plans the Q factor by Cholesky QR, twice (the second pass restores
// the orthogonality the first loses to rounding): G = A^T A, G = R^T R,
// A = A R^-1. R's positive diagonal gives the Q factor's signs. GramBound
// is not needed: a rank-deficient or ill-conditioned A fails the
// factorization, which the backend reports at its next sync. Up to
// smallQF columns one block factors G and a thread per row solves;
// beyond, cuSOLVER and cuBLAS do.
func (p *planner) qf(k backend.QF, dt backend.DType) {
	a := p.words(k.A)[0]
	g := p.scratch(dt, k.N*k.N)
	// A pivot R_kk^2 at most tol G_kk means a column all but in the span of
	// those before it, where Cholesky QR loses what it computes.
	tol := 64 * 0x1p-52
	if dt == backend.Float32 {
		tol = 64 * 0x1p-23
	}
	if k.N <= smallQF {
		r := p.scratch(backend.Float64, k.N*k.N)
		for range 2 {
			p.rowMajor(true, false, k.N, k.N, k.M, 1, 0, a, k.N, 0, a, k.N, 0, g, k.N, 0, 1)
			p.launch("on_cholesky", 1, k.N, tol, g, r, p.d.Fault())
			p.elementwise("on_trsm", k.M, k.M, k.N, a, r, p.d.Fault())
		}
		return
	}
	info := p.scratch(backend.Int32, 1)
	diag := p.scratch(backend.Float64, k.N)
	f64 := dt == backend.Float64
	for range 2 {
		p.rowMajor(true, false, k.N, k.N, k.M, 1, 0, a, k.N, 0, a, k.N, 0, g, k.N, 0, 1)
		p.elementwise("on_diag_save", k.N, k.N, g, diag)
		p.steps = append(p.steps, Potrf{F64: f64, N: k.N, A: g, Info: info})
		p.launch("on_potrf_check", 1, k.N, tol, info, g, diag, p.d.Fault())
		p.steps = append(p.steps, Trsm{F64: f64, M: k.M, N: k.N, A: g, B: a})
	}
}

// smallQF is the most columns whose Q factor one block computes.
const smallQF = 32

// rowMajor adds the row-major product C = alpha op(A) op(B) + beta C over
// a strided batch, as backend.Gemm defines it, in cuBLAS's column-major
// terms: row-major C is column-major C^T = op(B)^T op(A)^T, so the operands
// and their transposes swap.
func (p *planner) rowMajor(ta, tb bool, m, n, k int, alpha, beta float64, a uint64, lda, sa int, b uint64, ldb, sb int, c uint64, ldc, sc, batch int) {
	if batch == 1 {
		sa, sb, sc = 0, 0, 0
	}
	p.steps = append(p.steps, Gemm{
		F64: p.sfx == "_f64", TransA: tb, TransB: ta, M: n, N: m, K: k, Alpha: alpha, Beta: beta,
		A: b, B: a, C: c, LDA: ldb, LDB: lda, LDC: ldc, StrideA: sb, StrideB: sa, StrideC: sc, Batch: batch,
	})
}

// attention plans Attention (dOut has no buffer) or AttentionGrad, out
// being Out or DQKV: per head, the weights of every sequence by one batched
// product, a softmax over all of them, then the products of the layer or
// of its gradient.
func (p *planner) attention(seqs, t, heads, d int, scale float64, q, k, v, out, dout backend.Operand, dt backend.DType) {
	dh, n := d/heads, seqs*t*d
	w := p.words(q, k, v, out)
	qa, ka, va, oa := w[0], w[1], w[2], w[3]
	es := uint64(dt.Size())
	head := func(base uint64, h int) uint64 { return base + uint64(h*dh)*es }
	blocks := seqs * t * t // one head's weights: seqs blocks of t x t
	pw := p.scratch(dt, heads*blocks)
	pb := func(h int) uint64 { return pw + uint64(h*blocks)*es }
	for h := range heads {
		p.rowMajor(false, true, t, t, dh, scale, 0, head(qa, h), d, t*d, head(ka, h), d, t*d, pb(h), t, t*t, seqs)
	}
	p.alongAxis("on_softmax", heads*blocks/t, 1, false, heads*blocks/t, t, 1, pw, pw)
	if dout.Buf == nil {
		for h := range heads {
			p.rowMajor(false, false, t, dh, t, 1, 0, pb(h), t, t*t, head(va, h), d, t*d, head(oa, h), d, t*d, seqs)
		}
		return
	}
	doa := p.words(dout)[0]
	dq, dk, dv := oa, oa+uint64(n)*es, oa+uint64(2*n)*es
	dpw := p.scratch(dt, heads*blocks)
	dpb := func(h int) uint64 { return dpw + uint64(h*blocks)*es }
	for h := range heads {
		// dV = P^T dO, dP = dO V^T
		p.rowMajor(true, false, t, dh, t, 1, 0, pb(h), t, t*t, head(doa, h), d, t*d, head(dv, h), d, t*d, seqs)
		p.rowMajor(false, true, t, t, dh, 1, 0, head(doa, h), d, t*d, head(va, h), d, t*d, dpb(h), t, t*t, seqs)
	}
	// dS = P (dP - rowsum(dP P)), in place of dP
	p.alongAxis("on_softmax_grad", heads*blocks/t, 1, false, heads*blocks/t, t, 1, pw, dpw, dpw)
	for h := range heads {
		// dQ = scale dS K, dK = scale dS^T Q
		p.rowMajor(false, false, t, dh, t, scale, 0, dpb(h), t, t*t, head(ka, h), d, t*d, head(dq, h), d, t*d, seqs)
		p.rowMajor(true, false, t, dh, t, scale, 0, dpb(h), t, t*t, head(qa, h), d, t*d, head(dk, h), d, t*d, seqs)
	}
}

// HostBytes returns a Go slice of elements ([]float32, []float64 or []int32)
// as its bytes, and their type: what a device backend copies in and out.
func HostBytes(s any) ([]byte, backend.DType, error) {
	switch v := s.(type) {
	case []float32:
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v)), backend.Float32, nil
	case []float64:
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 8*len(v)), backend.Float64, nil
	case []int32:
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v)), backend.Int32, nil
	}
	return nil, 0, fmt.Errorf("a %T, want []float32, []float64 or []int32", s)
}
