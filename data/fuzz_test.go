package data

import (
	"bytes"
	"testing"
)

func FuzzDecodeIDX(f *testing.F) {
	im, lb := mnistFiles(3)
	for _, seed := range [][]byte{im, lb, gz(im), im[:10], idx([]int{1 << 20, 1 << 10}, nil), {0, 0, 8, 0}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		dims, payload, err := DecodeIDX(bytes.NewReader(b), "fuzz")
		if err != nil {
			return
		}
		size := 1
		for _, d := range dims {
			size *= d
		}
		if size != len(payload) {
			t.Fatalf("dims %v but %d payload bytes", dims, len(payload))
		}
	})
}

func FuzzDecodeCIFAR10(f *testing.F) {
	f.Add(cifarBatch(1))
	f.Add(cifarBatch(2)[:4000])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		labels, pixels, err := DecodeCIFAR10(bytes.NewReader(b), "fuzz")
		if err != nil {
			return
		}
		if len(pixels) != len(labels)*3072 {
			t.Fatalf("%d labels but %d pixels", len(labels), len(pixels))
		}
		for _, l := range labels {
			if l >= 10 {
				t.Fatalf("label %d accepted", l)
			}
		}
	})
}
