// Package gradcheck compares Gorgonia's gradients with central finite
// differences, for the tests of nn and models.
package gradcheck

import (
	"fmt"
	"math"

	G "gorgonia.org/gorgonia"
)

// Check computes the gradient of the scalar float64 node loss with respect
// to each node of wrt with Gorgonia, then perturbs every entry of each by
// +-h and compares the central difference of the loss. It returns an error
// naming the first entry that differs by more than tol (relative, floor 1).
// It must be called before any gorgonia.Grad on the graph; the nodes are
// left holding their original values.
func Check(g *G.ExprGraph, loss *G.Node, h, tol float64, wrt ...*G.Node) error {
	if _, err := G.Grad(loss, wrt...); err != nil {
		return err
	}
	vm := G.NewTapeMachine(g, G.BindDualValues(wrt...))
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		return err
	}
	grads := make([][]float64, len(wrt))
	for k, n := range wrt {
		gv, err := n.Grad()
		if err != nil {
			return err
		}
		grads[k] = append([]float64(nil), gv.Data().([]float64)...)
	}
	vm.Reset()
	eval := func() (float64, error) {
		if err := vm.RunAll(); err != nil {
			return 0, err
		}
		f, ok := loss.Value().Data().(float64)
		vm.Reset()
		if !ok {
			return 0, fmt.Errorf("gradcheck: loss is not a float64 scalar")
		}
		return f, nil
	}
	for k, n := range wrt {
		v := n.Value().Data().([]float64)
		for i := range v {
			orig := v[i]
			v[i] = orig + h
			fp, err := eval()
			if err != nil {
				return err
			}
			v[i] = orig - h
			fm, err := eval()
			v[i] = orig
			if err != nil {
				return err
			}
			fd := (fp - fm) / (2 * h)
			if math.Abs(fd-grads[k][i]) > tol*max(1, math.Abs(fd)) {
				return fmt.Errorf("d loss / d %s[%d]: Gorgonia %.9g, finite difference %.9g", n.Name(), i, grads[k][i], fd)
			}
		}
	}
	_, err := eval()
	return err
}
