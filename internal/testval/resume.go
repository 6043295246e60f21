package testval

// TB is the part of testing.TB that the checks here report through.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
}

// Resumable is a run that StraightThenResumed drives: R is one run, S what
// a run saves to be resumed from.
type Resumable[R, S any] struct {
	// Start returns a fresh run before its first step.
	Start func() R
	// Step takes step i of a run.
	Step func(r R, i int)
	// Save returns what a fresh run needs to go on where r is.
	Save func(r R) S
	// Resume returns a fresh run that goes on from what Save returned.
	Resume func(s S) R
	// Result returns what must match at the end (any value Floats takes).
	Result func(r R) any
}

// StraightThenResumed checks, for each k in ks, that a run of total steps
// stopped after k, saved and resumed in a fresh run ends where a straight
// run of total steps does, bit for bit (SameBits).
func StraightThenResumed[R, S any](t TB, total int, ks []int, run Resumable[R, S]) {
	t.Helper()
	straight := run.Start()
	for i := range total {
		run.Step(straight, i)
	}
	want := run.Result(straight)
	for _, k := range ks {
		first := run.Start()
		for i := range k {
			run.Step(first, i)
		}
		second := run.Resume(run.Save(first))
		for i := k; i < total; i++ {
			run.Step(second, i)
		}
		if got := run.Result(second); !SameBits(got, want) {
			t.Errorf("stopped after %d of %d steps and resumed, the run ends elsewhere than a straight one: %s",
				k, total, Worst(Floats(got), Floats(want)))
		}
	}
}
