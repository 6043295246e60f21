package data

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/orthonet/orthonet/internal/datatest"
)

// TestLoadFirstBounded loads the first 100 examples of crafted files that
// announce 60,000 (47 MB of pixels, 188 MB as float32) in under 200 KB:
// what LoadSplitFirst allocates is bounded by the 100 it was asked for,
// not by what the headers claim.
func TestLoadFirstBounded(t *testing.T) {
	dir := t.TempDir()
	const n = 60000
	datatest.WriteHugeMNIST(t, dir, "train", n)
	datatest.WriteHugeMNIST(t, dir, "t10k", n)
	var total int64
	for _, e := range []string{"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"} {
		fi, err := os.Stat(filepath.Join(dir, e))
		if err != nil {
			t.Fatal(err)
		}
		total += fi.Size()
	}
	if total > 200<<10 {
		t.Fatalf("the crafted files take %d bytes; the test wants small ones", total)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	train, test, err := LoadSplitFirst("mnist", dir, 100, 50)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if train.N != 100 || test.N != 50 || len(train.X) != 100*28*28 || len(test.Y) != 50 {
		t.Errorf("loaded %d and %d examples (%d pixels, %d labels), want 100 and 50", train.N, test.N, len(train.X), len(test.Y))
	}
	// gzip's readers and windows take a few hundred KB; the 150 images 0.6 MB.
	if got := after.TotalAlloc - before.TotalAlloc; got > 8<<20 {
		t.Errorf("loading 100 + 50 examples allocated %d MB", got>>20)
	}
	// Without a limit the whole set is read, as before.
	all, err := LoadFirst("mnist", dir, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	if all.N != n {
		t.Errorf("LoadFirst with n = 0 read %d examples, want all %d", all.N, n)
	}
}

// TestLoadFirstCIFAR reads the first records of CIFAR-10 batches: across
// the first file's end, and within it without reading the rest.
func TestLoadFirstCIFAR(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i, count := range []int{3, 4} {
		b := make([]byte, count*cifarRecord)
		for k := 0; k < count; k++ {
			b[k*cifarRecord] = byte(i*5 + k)
		}
		p := filepath.Join(dir, "batch"+string(rune('a'+i)))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	for _, tc := range []struct{ n, want int }{{2, 2}, {5, 5}, {0, 7}, {9, 7}} {
		s, err := ReadCIFAR10First(tc.n, paths...)
		if err != nil {
			t.Fatalf("n = %d: %v", tc.n, err)
		}
		if s.N != tc.want || len(s.Y) != tc.want || len(s.X) != tc.want*cifarPixels {
			t.Errorf("n = %d: %d examples, want %d", tc.n, s.N, tc.want)
		}
		if tc.want >= 5 && s.Y[4] != 6 {
			t.Errorf("n = %d: label of example 4 is %d, want the second file's second (6)", tc.n, s.Y[4])
		}
	}
}
