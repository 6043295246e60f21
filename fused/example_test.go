package fused_test

import (
	"fmt"
	"log"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/fused"
)

// A softmax cross-entropy loss and its gradient: one node each, and a logit
// of 1e4 does not overflow.
func Example() {
	g := G.NewGraph()
	matrix := func(name string, v ...float64) *G.Node {
		return G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName(name),
			G.WithValue(tensor.New(tensor.WithShape(2, 3), tensor.WithBacking(v))))
	}
	logits := matrix("logits", 2, 1, 0, 0, 0, 1e4)
	labels := matrix("labels", 1, 0, 0, 0, 1, 0)
	loss, err := fused.SoftmaxCrossEntropy(logits, labels)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := G.Grad(loss, logits); err != nil {
		log.Fatal(err)
	}
	vm := G.NewTapeMachine(g, G.BindDualValues(logits))
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		log.Fatal(err)
	}
	grad, err := logits.Grad()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(loss.Op())
	fmt.Printf("loss %.4f\n", loss.Value().Data())
	fmt.Printf("gradient %.4f\n", grad.Data())
	// Output:
	// SoftmaxCrossEntropy
	// loss 5000.2038
	// gradient [-0.1674 0.1224 0.0450 0.0000 -0.5000 0.5000]
}
