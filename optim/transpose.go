package optim

// transpose writes the transpose of src, an r x c row-major matrix, into
// dst (c x r).
func transpose[T Float](dst, src []T, r, c int) {
	const tile = 32
	for i0 := 0; i0 < r; i0 += tile {
		for j0 := 0; j0 < c; j0 += tile {
			for i := i0; i < min(i0+tile, r); i++ {
				row := src[i*c : (i+1)*c]
				for j := j0; j < min(j0+tile, c); j++ {
					dst[j*r+i] = row[j]
				}
			}
		}
	}
}
