//go:build cgo

package dist_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/orthonet/orthonet/dist"
)

// BenchmarkAllReduceMPI times the float32 all-reduce of 2 ranks under
// mpirun: the r x r matrix that RSDM-P sums per weight (r = 300) against the
// full 1024 x 1024 gradient. Each run of the benchmark starts one mpirun
// whose ranks make b.N timed all-reduces after a warm-up; ns/op includes
// starting mpirun, so read ns/allreduce (the slower rank's loop time over
// b.N) and B/allreduce. Run it with a count of iterations:
//
//	go test -run '^$' -bench AllReduceMPI -benchtime 200x ./dist
func BenchmarkAllReduceMPI(b *testing.B) {
	for _, s := range allReduceSizes {
		b.Run(s.name, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := mpirun(b, ctx, 2, "bench", strconv.Itoa(s.n), strconv.Itoa(b.N))
			out, err := cmd.CombinedOutput()
			if err != nil {
				b.Fatalf("%v: %v\n%s", cmd, err, out)
			}
			m := regexp.MustCompile(`seconds=(\S+)`).FindSubmatch(out)
			if m == nil {
				b.Fatalf("no time in the output:\n%s", out)
			}
			sec, err := strconv.ParseFloat(string(m[1]), 64)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(sec*1e9/float64(b.N), "ns/allreduce")
			b.ReportMetric(float64(4*s.n), "B/allreduce")
		})
	}
}

// benchChild is one rank of BenchmarkAllReduceMPI: os.Args[1] elements,
// os.Args[2] timed all-reduces; rank 0 prints the slower rank's seconds.
func benchChild(c dist.Communicator) int {
	if len(os.Args) < 3 {
		fmt.Println("FAIL: bench wants the elements and the iterations")
		return 1
	}
	n, err1 := strconv.Atoi(os.Args[1])
	iters, err2 := strconv.Atoi(os.Args[2])
	if err1 != nil || err2 != nil || n < 0 || iters < 1 {
		fmt.Printf("FAIL: bench %q\n", os.Args[1:])
		return 1
	}
	buf := make([]float32, n)
	for range 3 {
		if err := c.AllReduceSum32(buf); err != nil {
			c.Abort(err)
			return 1
		}
	}
	if err := c.Barrier(); err != nil {
		c.Abort(err)
		return 1
	}
	start := time.Now()
	for range iters {
		if err := c.AllReduceSum32(buf); err != nil {
			c.Abort(err)
			return 1
		}
	}
	took := time.Since(start).Seconds()
	slowest := 0.0
	for r := range c.Size() { // each rank's time, from that rank to all
		t := []float64{took}
		if err := c.Broadcast64(t, r); err != nil {
			c.Abort(err)
			return 1
		}
		slowest = max(slowest, t[0])
	}
	if c.Rank() == 0 {
		fmt.Printf("bench n=%d iters=%d seconds=%g\n", n, iters, slowest)
	}
	if err := c.Close(); err != nil {
		fmt.Printf("FAIL: %v\n", err)
		return 1
	}
	return 0
}
