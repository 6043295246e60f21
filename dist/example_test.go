package dist_test

import (
	"fmt"
	"sync"

	"github.com/orthonet/orthonet/dist"
)

// Three ranks, goroutines of one process, sum their gradients: every rank
// ends with the same total, as each rank of `mpirun -np 3` would.
func ExampleNewLocal() {
	ranks, err := dist.NewLocal(3, 0)
	if err != nil {
		panic(err)
	}
	sums := make([][]float32, len(ranks))
	var wg sync.WaitGroup
	for _, c := range ranks {
		wg.Go(func() {
			grad := []float32{float32(c.Rank()), 1} // this rank's shard's gradient
			if err := c.AllReduceSum32(grad); err != nil {
				c.Abort(err) // no rank may be left waiting
				return
			}
			sums[c.Rank()] = grad
		})
	}
	wg.Wait()
	fmt.Println(sums)
	// Output: [[3 3] [3 3] [3 3]]
}

// A process that trains alone has the group of one: its sums change
// nothing, so code written for N ranks runs unchanged.
func ExampleOpen() {
	c, err := dist.Open("single")
	if err != nil {
		panic(err)
	}
	defer c.Close()
	grad := []float64{0.5, -2}
	if err := dist.AllReduceSum(c, grad); err != nil {
		panic(err)
	}
	fmt.Println(c.Rank(), c.Size(), grad)
	// Output: 0 1 [0.5 -2]
}
