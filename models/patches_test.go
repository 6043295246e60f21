package models

import (
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestPatchesIsPatchify checks that the graph's patches (Patches, run on
// the tape machine) are the ones Patchify cuts on the host, value for
// value, for gray and RGB images.
func TestPatchesIsPatchify(t *testing.T) {
	for _, tc := range []struct{ batch, channels, side, patch int }{{2, 3, 8, 4}, {3, 1, 6, 2}, {1, 3, 4, 4}} {
		d := tc.channels * tc.side * tc.side
		images := make([]float32, tc.batch*d)
		for i := range images {
			images[i] = float32(i)
		}
		want := make([]float32, len(images))
		for i := 0; i < tc.batch; i++ {
			Patchify(want[i*d:(i+1)*d], images[i*d:(i+1)*d], tc.channels, tc.side, tc.patch)
		}
		g := G.NewGraph()
		x := G.NewTensor(g, tensor.Float32, 4, G.WithShape(tc.batch, tc.channels, tc.side, tc.side), G.WithName("images"),
			G.WithValue(tensor.New(tensor.WithShape(tc.batch, tc.channels, tc.side, tc.side), tensor.WithBacking(images))))
		p, err := Patches(x, tc.patch)
		if err != nil {
			t.Fatal(err)
		}
		per := tc.side / tc.patch
		if s := p.Shape(); !s.Eq(tensor.Shape{tc.batch, per * per, tc.patch * tc.patch * tc.channels}) {
			t.Fatalf("%+v: shape %v", tc, s)
		}
		var v G.Value
		G.Read(p, &v)
		runTape(t, g)
		got := v.Data().([]float32)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%+v: value %d is %v, Patchify's %v", tc, i, got[i], want[i])
			}
		}
	}
	if _, err := Patches(G.NewMatrix(G.NewGraph(), tensor.Float32, G.WithShape(2, 3)), 2); err == nil {
		t.Error("Patches of a matrix: no error")
	}
}
