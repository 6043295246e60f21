package data

import "math"

// Resize returns s with every image resampled to h x w by separable bilinear
// interpolation with pixel centres aligned (PyTorch's align_corners=False).
// When an axis shrinks, the triangle filter is widened by the shrink factor,
// so that each output pixel averages the input pixels it covers instead of
// sampling two of them (the antialiased resize of PIL and PyTorch).
// Resizing to the current size returns s.
func (s *Set) Resize(h, w int) *Set {
	if h == s.H && w == s.W {
		return s
	}
	rows := resampleWeights(s.H, h)
	cols := resampleWeights(s.W, w)
	t := *s
	t.H, t.W = h, w
	t.X = make([]float32, s.N*s.C*h*w)
	tmp := make([]float64, h*s.W) // one plane resized along rows
	for plane := 0; plane < s.N*s.C; plane++ {
		in := s.X[plane*s.H*s.W : (plane+1)*s.H*s.W]
		out := t.X[plane*h*w : (plane+1)*h*w]
		for i, taps := range rows {
			row := tmp[i*s.W : (i+1)*s.W]
			clear(row)
			for _, tp := range taps {
				src := in[tp.index*s.W : (tp.index+1)*s.W]
				for j, v := range src {
					row[j] += tp.weight * float64(v)
				}
			}
		}
		for i := 0; i < h; i++ {
			row := tmp[i*s.W : (i+1)*s.W]
			for j, taps := range cols {
				var v float64
				for _, tp := range taps {
					v += tp.weight * row[tp.index]
				}
				out[i*w+j] = float32(v)
			}
		}
	}
	return &t
}

type tap struct {
	index  int
	weight float64
}

// resampleWeights returns, for each of out output samples along an axis of
// in samples, the input indices and normalized weights that make it.
func resampleWeights(in, out int) [][]tap {
	scale := float64(in) / float64(out)
	support := max(scale, 1) // triangle half-width, in input pixels
	taps := make([][]tap, out)
	for o := range taps {
		centre := (float64(o)+0.5)*scale - 0.5
		lo := int(math.Floor(centre - support))
		hi := int(math.Ceil(centre + support))
		var sum float64
		for i := lo; i <= hi; i++ {
			wgt := 1 - math.Abs(float64(i)-centre)/support
			if wgt <= 0 {
				continue
			}
			idx := min(max(i, 0), in-1) // edges repeat
			taps[o] = append(taps[o], tap{idx, wgt})
			sum += wgt
		}
		for k := range taps[o] {
			taps[o][k].weight /= sum
		}
	}
	return taps
}
