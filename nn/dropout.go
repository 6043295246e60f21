package nn

import (
	"fmt"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
)

// Dropout zeroes each entry with probability P and scales the rest by
// 1/(1-P) (inverted dropout), with masks drawn from a caller's seeded
// generator, so runs are reproducible: gorgonia.Dropout seeds its generator
// from the clock.
// Each Apply adds a mask node; Fill redraws all of them before a step.
type Dropout struct {
	P     float64
	masks []*G.Node
}

// NewDropout returns dropout with probability p in [0, 1).
func NewDropout(p float64) (*Dropout, error) {
	if p < 0 || p >= 1 {
		return nil, fmt.Errorf("nn: dropout probability %v, want [0, 1)", p)
	}
	return &Dropout{P: p}, nil
}

// Apply returns x times a mask of x's shape (all ones until Fill). With
// P = 0 it returns x.
func (d *Dropout) Apply(x *G.Node) (*G.Node, error) {
	if d.P == 0 {
		return x, nil
	}
	mask := G.NewTensor(x.Graph(), x.Dtype(), x.Dims(), G.WithShape(x.Shape()...), G.WithName(fmt.Sprintf("dropout%d", len(d.masks))), G.WithInit(G.Ones()))
	d.masks = append(d.masks, mask)
	return G.HadamardProd(x, mask)
}

// Masks returns the mask nodes added so far.
func (d *Dropout) Masks() []*G.Node { return d.masks }

// Fill draws every mask afresh from rng.
func (d *Dropout) Fill(rng *rand.Rand) {
	keep := 1 / (1 - d.P)
	for _, m := range d.masks {
		switch v := m.Value().Data().(type) {
		case []float32:
			for i := range v {
				v[i] = 0
				if rng.Float64() >= d.P {
					v[i] = float32(keep)
				}
			}
		case []float64:
			for i := range v {
				v[i] = 0
				if rng.Float64() >= d.P {
					v[i] = keep
				}
			}
		}
	}
}
