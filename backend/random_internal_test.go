package backend

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDrawFunctions checks the functions the random draws compute with +,
// -, *, / alone against the standard library: lnUnit within 2 ulp of
// math.Log over [2^-53, 1] (the ends, the turn at sqrt(1/2), and random
// points), cos2pi within 1e-15 of math.Cos over [0, 1), the octant ends
// among them (math.Cos's argument 2 pi t is itself rounded, by up to
// 4.4e-16); and that
// unitDraw of streamKey is DropoutDraw, the masks' generator.
func TestDrawFunctions(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	us := []float64{0x1p-53, 0x1p-52, 3 * 0x1p-53, 0.5, math.Nextafter(math.Sqrt2/2, 0), math.Sqrt2 / 2, math.Nextafter(math.Sqrt2/2, 1), 1 - 0x1p-53, 1}
	for range 100000 {
		us = append(us, 1-float64(rng.Uint64()>>11)*0x1p-53)
		us = append(us, math.Ldexp(1-float64(rng.Uint64()>>11)*0x1p-53, -rng.IntN(52))) // small values too
	}
	for _, u := range us {
		got, want := lnUnit(u), math.Log(u)
		if ulp := math.Abs(math.Nextafter(want, 0) - want); math.Abs(got-want) > 2*ulp && got != want {
			t.Fatalf("lnUnit(%v) = %v, math.Log %v: %.3g ulp apart", u, got, want, math.Abs(got-want)/ulp)
		}
	}
	ts := []float64{0, 0.125, math.Nextafter(0.125, 1), 0.25, math.Nextafter(0.25, 1), 0.375, 0.5, math.Nextafter(0.5, 1), 0.75, 0.875, 1 - 0x1p-53}
	for range 100000 {
		ts = append(ts, float64(rng.Uint64()>>11)*0x1p-53)
	}
	for _, x := range ts {
		if got, want := cos2pi(x), math.Cos(2*math.Pi*x); math.Abs(got-want) > 1e-15 {
			t.Fatalf("cos2pi(%v) = %v, math.Cos %v: %.3g apart", x, got, want, math.Abs(got-want))
		}
	}
	for i := range uint64(1000) {
		if a, b := unitDraw(streamKey(3, 4, 5), i), DropoutDraw(3, 4, 5, i); a != b {
			t.Fatalf("draw %d: %v, DropoutDraw %v", i, a, b)
		}
	}
}
