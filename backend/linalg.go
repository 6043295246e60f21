package backend

import (
	"errors"
	"fmt"

	"github.com/orthonet/orthonet/internal/linalg"
)

// The linear algebra of the retractions: the Q factor of a QR decomposition
// (Householder QR on the CPU, Cholesky QR twice on a device).
var _ defined = QF{}

// QF replaces A, an M x N matrix with M >= N, by the Q factor of its QR
// decomposition with the signs chosen so that diag(R) > 0: the QR
// retraction of the Stiefel manifold, and RSDM's inner retraction on O(r).
// GramBound, when above 0, bounds the condition number of A^T A: a backend
// may then use Cholesky QR where that is as accurate as Householder.
type QF struct {
	M, N      int
	A         Operand
	GramBound float64
}

// Check checks the operand.
func (k QF) Check() error {
	if k.M < k.N || k.N < 1 {
		return fmt.Errorf("backend: qf: %d x %d, want M >= N >= 1", k.M, k.N)
	}
	return CheckOperand("qf", k.A, 0, k.M*k.N)
}

// Host factors by Householder QR (Cholesky QR in float64 where GramBound
// allows).
func (k QF) Host(p *Pool) (Func, error) { return onFloats(p, k, qfHost[float32], qfHost[float64]) }

// Device factors by Cholesky QR, twice (the second pass restores the
// orthogonality the first loses to rounding): G = A^T A, G = R^T R,
// A = A R^-1. R's positive diagonal gives the Q factor's signs. GramBound
// is not needed: a rank-deficient or ill-conditioned A fails the
// factorization, which the backend reports at its next sync. Up to
// smallQF columns one block factors G and a thread per row solves;
// beyond, cuSOLVER and cuBLAS do.
func (k QF) Device(p Planner) {
	dt := DTypeOf(k.A)
	a := p.Addr(k.A)
	g := p.Scratch(dt, k.N*k.N)
	gram := DeviceGemm{TransA: true, M: k.N, N: k.N, K: k.M, Alpha: 1, A: a, B: a, C: g, LDA: k.N, LDB: k.N, LDC: k.N}
	// A pivot R_kk^2 at most tol G_kk means a column all but in the span of
	// those before it, where Cholesky QR loses what it computes.
	tol := 64 * 0x1p-52
	if dt == Float32 {
		tol = 64 * 0x1p-23
	}
	if k.N <= smallQF {
		r := p.Scratch(Float64, k.N*k.N)
		for range 2 {
			p.Gemm(gram)
			p.Launch("on_cholesky", 1, cholArgs{N: k.N, Tol: tol, G: g, R: r, Fault: p.Fault()})
			elementwise(p, "on_trsm", k.M, trsmArgs{M: k.M, N: k.N, A: a, R: r, Fault: p.Fault()})
		}
		return
	}
	info := p.Scratch(Int32, 1)
	diag := p.Scratch(Float64, k.N)
	for range 2 {
		p.Gemm(gram)
		elementwise(p, "on_diag_save", k.N, diagArgs{N: k.N, G: g, D: diag})
		p.Potrf(k.N, g, info)
		p.Launch("on_potrf_check", 1, potrfCheckArgs{N: k.N, Tol: tol, Info: info, R: g, D: diag, Fault: p.Fault()})
		p.Trsm(k.M, k.N, g, a)
	}
}

// smallQF is the most columns whose Q factor one block of a device
// computes.
const smallQF = 32

func qfHost[T Float](_ *Pool, k QF) Func {
	a := hostData[T](k.A)[:k.M*k.N]
	var q linalg.QR[T]
	var q64 linalg.QR[float64]
	return func() error {
		if k.GramBound > 0 && k.M == k.N && !linalg.Is32[T]() {
			return q64.QFGram(k.N, linalg.As64(a), k.GramBound)
		}
		if err := q.QF(k.M, k.N, a); err != nil {
			return errors.Join(errors.New("QR factorization failed"), err)
		}
		return nil
	}
}
