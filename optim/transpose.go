package optim

// transposed steps a wide weight W (orthonormal rows, W W^T = I) as its
// transpose W^T, a column-orthonormal rows x cols matrix: the optimizer
// sees W^T and its gradient G^T, copied in before a step and back after it.
// A factored gradient A^T B of W is B^T A for W^T: its factors swap, with
// no copy.
type transposed[T Float] struct {
	inner      twoPhase[T]
	rows, cols int // of W^T
	xt, gt     []T
}

var _ twoPhase[float32] = (*transposed[float32])(nil)

func newTransposed[T Float](o twoPhase[T], rows, cols int) *transposed[T] {
	return &transposed[T]{inner: o, rows: rows, cols: cols, xt: make([]T, rows*cols), gt: make([]T, rows*cols)}
}

// transpose writes the transpose of src, an r x c row-major matrix, into
// dst (c x r).
func transpose[T Float](dst, src []T, r, c int) {
	const tile = 32
	for i0 := 0; i0 < r; i0 += tile {
		for j0 := 0; j0 < c; j0 += tile {
			for i := i0; i < min(i0+tile, r); i++ {
				row := src[i*c : (i+1)*c]
				for j := j0; j < min(j0+tile, c); j++ {
					dst[j*r+i] = row[j]
				}
			}
		}
	}
}

func (t *transposed[T]) prepare(x, grad []T) error {
	transpose(t.xt, x, t.cols, t.rows)
	transpose(t.gt, grad, t.cols, t.rows)
	return t.inner.prepare(t.xt, t.gt)
}

func (t *transposed[T]) prepareFactored(x []T, g Factored[T]) error {
	fs, ok := t.inner.(interface {
		prepareFactored(x []T, g Factored[T]) error
	})
	if !ok {
		return errFactoredRSDMOnly
	}
	transpose(t.xt, x, t.cols, t.rows)
	return fs.prepareFactored(t.xt, Factored[T]{K: g.K, A: g.B, B: g.A})
}

func (t *transposed[T]) commit(x, _ []T) {
	t.inner.commit(t.xt, t.gt)
	transpose(x, t.xt, t.rows, t.cols)
}

func (t *transposed[T]) abort()                 { t.inner.abort() }
func (t *transposed[T]) State() State           { return t.inner.State() }
func (t *transposed[T]) SetState(s State) error { return t.inner.SetState(s) }
func (t *transposed[T]) SetLR(lr float64) error { return t.inner.SetLR(lr) }
