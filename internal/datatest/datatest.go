// Package datatest writes files in the formats package data reads, for the
// tests of data and of the commands that load data sets.
package datatest

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

// WritePNG writes img as a PNG file at path, making its folder where there
// is none. It fails t where the file cannot be written.
func WritePNG(t testing.TB, path string, img image.Image) {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// IDXHeader returns the header of an unsigned-byte IDX file with the given
// dimensions: the magic number 0x000008NN (NN the number of dimensions),
// then each dimension as a big-endian uint32.
func IDXHeader(dims ...int) []byte {
	b := []byte{0, 0, 0x08, byte(len(dims))}
	for _, d := range dims {
		b = binary.BigEndian.AppendUint32(b, uint32(d))
	}
	return b
}

// WriteHugeMNIST writes prefix-images-idx3-ubyte.gz and
// prefix-labels-idx1-ubyte.gz into dir: gzip'd MNIST-format files of a few
// hundred kilobytes whose headers announce n images of 28 x 28 and n
// labels, all zero (gzip members of 1 MiB of zeros, repeated). A loader
// that allocates what the headers announce, rather than what it was asked
// to read, shows in its memory use. It fails t where a file cannot be
// written.
func WriteHugeMNIST(t testing.TB, dir, prefix string, n int) {
	t.Helper()
	member := func(b []byte) []byte {
		var z bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
		_, _ = zw.Write(b)
		_ = zw.Close()
		return z.Bytes()
	}
	for _, f := range []struct {
		name string
		head []byte
		size int
	}{
		{prefix + "-images-idx3-ubyte.gz", IDXHeader(n, 28, 28), n * 28 * 28},
		{prefix + "-labels-idx1-ubyte.gz", IDXHeader(n), n},
	} {
		var out bytes.Buffer
		out.Write(member(f.head))
		const mib = 1 << 20
		zeros := member(make([]byte, mib))
		for left := f.size; left > 0; left -= mib {
			if left >= mib {
				out.Write(zeros)
			} else {
				out.Write(member(make([]byte, left)))
			}
		}
		if err := os.WriteFile(filepath.Join(dir, f.name), out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
