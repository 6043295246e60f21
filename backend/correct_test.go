package backend_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/nn"
)

// TestCountCorrectIsAccuracy checks CountCorrect against nn.Accuracy, which
// cmd/train's metrics were computed with on the host: the same count over
// logits with ties and NaNs, in float32 and float64 (backendtest then
// holds the CUDA kernel to the CPU's count).
func TestCountCorrectIsAccuracy(t *testing.T) {
	be := cpu.New(cpu.Options{Threads: 1})
	defer be.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	const rows, classes = 64, 10
	logits, targets := make([]float64, rows*classes), make([]float64, rows*classes)
	labels := make([]int, rows)
	for trial := range 20 {
		for i := range logits {
			logits[i] = float64(rng.IntN(5)) / 2 // ties
			if rng.IntN(40) == 0 {
				logits[i] = math.NaN()
			}
		}
		clear(targets)
		for r := range labels {
			labels[r] = rng.IntN(classes)
			targets[r*classes+labels[r]] = 1
		}
		for _, dt := range []backend.DType{backend.Float32, backend.Float64} {
			want, got := accuracyAndCount(t, be, dt, logits, targets, labels, classes)
			if got != want {
				t.Errorf("trial %d, %v: CountCorrect counts %d of %d rows, nn.Accuracy %d", trial, dt, got, rows, want)
			}
		}
	}
}

// accuracyAndCount returns nn.Accuracy's count of correct rows and
// CountCorrect's, on be, for logits and targets stored in dt.
func accuracyAndCount(t *testing.T, be backend.Backend, dt backend.DType, logits, targets []float64, labels []int, classes int) (want, got int) {
	t.Helper()
	conv := func(v []float64) any {
		if dt == backend.Float64 {
			return v
		}
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out
	}
	var acc float64
	var err error
	switch l := conv(logits).(type) {
	case []float32:
		acc, err = nn.Accuracy(l, labels, classes)
	case []float64:
		acc, err = nn.Accuracy(l, labels, classes)
	}
	if err != nil {
		t.Fatal(err)
	}
	s, _ := be.Alloc(dt, len(logits))
	tg, _ := be.Alloc(dt, len(targets))
	c, _ := be.Alloc(backend.Int32, 1)
	for _, x := range []struct {
		b backend.Buffer
		v any
	}{{s, conv(logits)}, {tg, conv(targets)}, {c, []int32{-1}}} {
		if err := be.CopyIn(x.b, 0, x.v); err != nil {
			t.Fatal(err)
		}
	}
	f, err := be.Prepare(backend.CountCorrect{Rows: len(labels), Classes: classes, Scores: backend.At(s, 0), Targets: backend.At(tg, 0), Count: backend.At(c, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if err := f(); err != nil {
		t.Fatal(err)
	}
	n := make([]int32, 1)
	if err := be.CopyOut(n, c, 0); err != nil {
		t.Fatal(err)
	}
	return int(math.Round(acc * float64(len(labels)))), int(n[0])
}
