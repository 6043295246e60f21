package data

import (
	"bytes"
	"fmt"
	"io"
	"os"
)

// CIFAR-10's binary format: each record is one label byte and 3 x 32 x 32
// pixel bytes, red plane, green plane, blue plane.
const (
	cifarSide   = 32
	cifarRecord = 1 + 3*cifarSide*cifarSide
	maxCIFAR    = 1 << 30 // bytes accepted from one batch file
)

// DecodeCIFAR10 reads one CIFAR-10 binary batch from r and returns its labels
// and pixels (channel-major per image). name is used in errors.
func DecodeCIFAR10(r io.Reader, name string) (labels, pixels []byte, err error) {
	var buf bytes.Buffer
	got, err := buf.ReadFrom(io.LimitReader(r, maxCIFAR+1))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrFormat, name, err)
	}
	switch {
	case got == 0:
		return nil, nil, fmt.Errorf("%w: %s: empty CIFAR-10 batch", ErrFormat, name)
	case got > maxCIFAR:
		return nil, nil, fmt.Errorf("%w: %s: larger than %d bytes", ErrFormat, name, maxCIFAR)
	case got%cifarRecord != 0:
		return nil, nil, fmt.Errorf("%w: %s: %d bytes is not a whole number of %d-byte CIFAR-10 records (truncated?)", ErrFormat, name, got, cifarRecord)
	}
	b := buf.Bytes()
	n := len(b) / cifarRecord
	labels = make([]byte, n)
	pixels = make([]byte, 0, n*(cifarRecord-1))
	for i := 0; i < n; i++ {
		rec := b[i*cifarRecord : (i+1)*cifarRecord]
		if rec[0] >= 10 {
			return nil, nil, fmt.Errorf("%w: %s: record %d has label %d, want 0 to 9", ErrFormat, name, i, rec[0])
		}
		labels[i] = rec[0]
		pixels = append(pixels, rec[1:]...)
	}
	return labels, pixels, nil
}

// ReadCIFAR10 reads and concatenates CIFAR-10 binary batch files.
func ReadCIFAR10(paths ...string) (*Set, error) {
	var labels, pixels []byte
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("data: %w", err)
		}
		l, px, err := DecodeCIFAR10(f, p)
		f.Close()
		if err != nil {
			return nil, err
		}
		labels = append(labels, l...)
		pixels = append(pixels, px...)
	}
	if len(labels) == 0 {
		return nil, fmt.Errorf("data: no CIFAR-10 batch given")
	}
	name := paths[0]
	if len(paths) > 1 {
		name = fmt.Sprintf("%s and %d more", paths[0], len(paths)-1)
	}
	return newSet(name, len(labels), 3, cifarSide, cifarSide, pixels, labels, 10)
}
