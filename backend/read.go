package backend

// Read is one copy out of a backend: len(Dst) elements of Src from element
// Off into Dst, a []float32, []float64 or []int32 of Src's type (as
// Backend.CopyOut takes them).
type Read struct {
	Dst any
	Src Buffer
	Off int
}

// Reader is a backend that makes several copies out after one wait for
// the device, where CopyOut would wait once for each (the CUDA backend).
type Reader interface {
	// CopyOutAll makes the reads after every Func run before it has
	// finished, waiting once. On error no Dst is to be trusted.
	CopyOutAll(reads []Read) error
}

// CopyOutAll makes the reads from be: in one wait where be is a Reader,
// else by one CopyOut each.
func CopyOutAll(be Backend, reads []Read) error {
	if r, ok := be.(Reader); ok {
		return r.CopyOutAll(reads)
	}
	for _, r := range reads {
		if err := be.CopyOut(r.Dst, r.Src, r.Off); err != nil {
			return err
		}
	}
	return nil
}

// Counts is what a device backend has enqueued and waited for.
type Counts struct {
	// Launches counts kernel launches and calls of the vendor's libraries
	// (each a matrix product or factorization on the device).
	Launches int
	// CopiesIn counts copies to the device (CopyIn).
	CopiesIn int
	// Waits counts the times the host waited for the device (CopyOut,
	// a Reader's CopyOutAll, Sync).
	Waits int
}

// Counter is a backend that counts its launches, copies and waits (the
// CUDA backend): what a training step costs it beyond its kernels' time.
type Counter interface {
	// Counts returns the counts since the backend started.
	Counts() Counts
}

// Add returns the sums of c's and o's counts.
func (c Counts) Add(o Counts) Counts {
	return Counts{Launches: c.Launches + o.Launches, CopiesIn: c.CopiesIn + o.CopiesIn, Waits: c.Waits + o.Waits}
}

// Sub returns the counts from o to c.
func (c Counts) Sub(o Counts) Counts {
	return Counts{Launches: c.Launches - o.Launches, CopiesIn: c.CopiesIn - o.CopiesIn, Waits: c.Waits - o.Waits}
}
