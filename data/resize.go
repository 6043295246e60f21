package data

import (
	"fmt"
	"math"
)

// Resize returns s with every image resampled to h x w by separable bilinear
// interpolation with pixel centres aligned (PyTorch's align_corners=False).
// When an axis shrinks, the triangle filter is widened by the shrink factor,
// so that each output pixel averages the input pixels it covers instead of
// sampling two of them (the antialiased resize of PIL and PyTorch).
// Resizing to the current size returns s.
//
// maxBytes bounds the memory Resize allocates, s.ResizeBytes(h, w); zero or
// less means DefaultMaxBytes. A larger resize is refused with an error
// naming the set's files and the figure, before anything is allocated.
func (s *Set) Resize(h, w int, maxBytes int64) (*Set, error) {
	if h < 1 || w < 1 || s.H < 1 || s.W < 1 || s.C < 1 || s.N < 0 || len(s.X) != s.N*s.Dim() {
		return nil, fmt.Errorf("data: resizing %s (%d values for %d images of %dx%dx%d) to %dx%d: want positive sizes and matching values", s.source(), len(s.X), s.N, s.C, s.H, s.W, h, w)
	}
	if h == s.H && w == s.W {
		return s, nil
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if b := s.ResizeBytes(h, w); b > maxBytes {
		return nil, fmt.Errorf("data: resizing %s (%d images of %dx%dx%d) to %dx%d takes %d bytes, more than the budget of %d", s.source(), s.N, s.C, s.H, s.W, h, w, b, maxBytes)
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
	return &t, nil
}

// ResizeBytes returns the bytes that Resize(h, w, ...) allocates: the
// resized float32 pixels, PixelBytes(s.N, s.C, h, w), and the resampling's
// scratch space, allowing for the allocator's rounding. It returns 0 when
// h x w is the current size, and math.MaxInt64 when the figure does not fit
// in an int64.
func (s *Set) ResizeBytes(h, w int) int64 {
	if h == s.H && w == s.W {
		return 0
	}
	if h < 1 || w < 1 || s.H < 1 || s.W < 1 {
		return PixelBytes(s.N, s.C, h, w)
	}
	const page = 8 << 10 // a large allocation is rounded up to pages
	b := float64(PixelBytes(s.N, s.C, h, w)) + page
	b += 8*float64(h)*float64(s.W) + page             // one plane resized along rows
	b += 1.25 * (tapBytes(s.H, h) + tapBytes(s.W, w)) // small slices round up by less than a quarter
	b += 1 << 10                                      // the Set
	if b >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(b)
}

// tapBytes bounds the memory of resampleWeights(in, out): out slices of at
// most 2*ceil(support)+3 taps each.
func tapBytes(in, out int) float64 {
	support := max(float64(in)/float64(out), 1)
	return float64(out) * (24 + 16*(2*math.Ceil(support)+3))
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
		taps[o] = make([]tap, 0, hi-lo+1)
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
