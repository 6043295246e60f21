package backend

import (
	"fmt"
	"math"
)

var _ defined = CountCorrect{}

// CountCorrect writes into Count (one Int32 element) how many of the Rows
// rows of Scores, a Rows x Classes matrix, have their largest entry where
// the one-hot rows of Targets (of the same shape) have theirs: a
// classifier's correct predictions over a batch, counted where its logits
// live. A row's largest entry is nn.Accuracy's: where a scan from the first
// entry that moves on only to a strictly larger one ends (so that ties go to
// the first, and a NaN holds the place it was first met at).
type CountCorrect struct {
	Rows, Classes          int
	Scores, Targets, Count Operand
}

// Check checks the operands.
func (k CountCorrect) Check() error {
	if k.Rows > math.MaxInt32 {
		return fmt.Errorf("backend: %s: %d rows, more than an int32 counts", Name(k), k.Rows)
	}
	n := k.Rows * k.Classes
	return checkSized(k, []int{k.Rows, k.Classes}, DTypeOf(k.Scores), "scores", k.Scores, n, "targets", k.Targets, n,
		Int32, "count", k.Count, 1)
}

// Host counts row by row.
func (k CountCorrect) Host(p *Pool) (Func, error) {
	return onFloats(p, k, countCorrectHost[float32], countCorrectHost[float64])
}

// Device counts with one block, a thread per row (on_count_correct).
func (k CountCorrect) Device(p Planner) {
	p.Launch("on_count_correct", 1, k.Rows, k.Classes, k.Scores, k.Targets, k.Count)
}

func countCorrectHost[T Float](_ *Pool, k CountCorrect) Func {
	n := k.Rows * k.Classes
	s, t, count := hostData[T](k.Scores)[:n], hostData[T](k.Targets)[:n], hostData[int32](k.Count)[:1]
	return func() error {
		var c int32
		for r := range k.Rows {
			if argmax(s[r*k.Classes:(r+1)*k.Classes]) == argmax(t[r*k.Classes:(r+1)*k.Classes]) {
				c++
			}
		}
		count[0] = c
		return nil
	}
}

// argmax returns where a scan of row from its first entry that moves on
// only to a strictly larger entry ends.
func argmax[T Float](row []T) int {
	best := 0
	for j, v := range row {
		if v > row[best] {
			best = j
		}
	}
	return best
}
