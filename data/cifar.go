package data

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
)

// CIFAR-10's binary format: each record is one label byte and 3 x 32 x 32
// pixel bytes, red plane, green plane, blue plane.
const (
	cifarSide   = 32
	cifarPixels = 3 * cifarSide * cifarSide
	cifarRecord = 1 + cifarPixels
	maxCIFAR    = 1 << 30 // bytes accepted from one batch file
	cifarFolder = "cifar-10-batches-bin"
)

// cifarBlock is how many records DecodeCIFAR10 reads into one block while
// the length of its input is unknown.
const cifarBlock = 256

// DecodeCIFAR10 reads one CIFAR-10 binary batch from r and returns its labels
// and pixels (channel-major per image). name is used in errors. The batch
// may be at most 1 GiB.
func DecodeCIFAR10(r io.Reader, name string) (labels, pixels []byte, err error) {
	// Read blocks of records until the input ends, then copy them into
	// slices of the exact size: memory follows the data, and a large batch
	// is held at most twice, never in a buffer grown by doubling.
	br := bufio.NewReader(r)
	var blocks [][]byte
	var total int64
	for {
		blk := make([]byte, cifarBlock*cifarRecord)
		n, err := io.ReadFull(br, blk)
		total += int64(n)
		if total > maxCIFAR {
			return nil, nil, fmt.Errorf("%w: %s: larger than %d bytes", ErrFormat, name, maxCIFAR)
		}
		if n > 0 {
			blocks = append(blocks, blk[:n])
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %s: %v", ErrFormat, name, err)
		}
	}
	if err := checkCIFARSize(name, total); err != nil {
		return nil, nil, err
	}
	n := int(total / cifarRecord)
	labels = make([]byte, n)
	pixels = make([]byte, n*cifarPixels)
	i := 0
	for b, blk := range blocks {
		for k := 0; k < len(blk); k += cifarRecord {
			if err := takeRecord(name, i, blk[k:k+cifarRecord], labels, pixels); err != nil {
				return nil, nil, err
			}
			i++
		}
		blocks[b] = nil
	}
	return labels, pixels, nil
}

// checkCIFARSize checks that a batch of size bytes holds whole records and
// is neither empty nor larger than maxCIFAR.
func checkCIFARSize(name string, size int64) error {
	switch {
	case size == 0:
		return fmt.Errorf("%w: %s: empty CIFAR-10 batch", ErrFormat, name)
	case size > maxCIFAR:
		return fmt.Errorf("%w: %s: larger than %d bytes", ErrFormat, name, maxCIFAR)
	case size%cifarRecord != 0:
		return fmt.Errorf("%w: %s: %d bytes is not a whole number of %d-byte CIFAR-10 records (truncated?)", ErrFormat, name, size, cifarRecord)
	}
	return nil
}

// takeRecord stores record i (label byte and pixels) in labels[i] and the
// i-th image of pixels.
func takeRecord(name string, i int, rec, labels, pixels []byte) error {
	if rec[0] >= 10 {
		return fmt.Errorf("%w: %s: record %d has label %d, want 0 to 9", ErrFormat, name, i, rec[0])
	}
	labels[i] = rec[0]
	copy(pixels[i*cifarPixels:(i+1)*cifarPixels], rec[1:])
	return nil
}

// ReadCIFAR10 reads and concatenates CIFAR-10 binary batch files. It
// checks their sizes first and refuses batches whose float32 pixels would
// take more than DefaultMaxBytes in all, before reading them.
func ReadCIFAR10(paths ...string) (*Set, error) {
	return ReadCIFAR10First(0, paths...)
}

// ReadCIFAR10First reads the first n records of CIFAR-10 binary batch
// files taken in order (all of them for n <= 0), as ReadCIFAR10 does,
// reading and allocating only what those n need.
func ReadCIFAR10First(n int, paths ...string) (*Set, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("data: no CIFAR-10 batch given")
	}
	counts := make([]int, len(paths))
	total := 0
	for i, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("data: %w", err)
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%w: %s: not a regular file", ErrFormat, p)
		}
		if err := checkCIFARSize(p, fi.Size()); err != nil {
			return nil, err
		}
		counts[i] = int(fi.Size() / cifarRecord)
		if n > 0 {
			counts[i] = min(counts[i], n-total)
		}
		total += counts[i]
	}
	name := paths[0]
	if len(paths) > 1 {
		name = fmt.Sprintf("%s and %d more", paths[0], len(paths)-1)
	}
	if b := PixelBytes(total, 3, cifarSide, cifarSide); b > DefaultMaxBytes {
		return nil, fmt.Errorf("%w: %s: %d images of 3x%dx%d take %d bytes as float32, more than the %d of data.DefaultMaxBytes", ErrFormat, name, total, cifarSide, cifarSide, b, DefaultMaxBytes)
	}
	labels := make([]byte, total)
	pixels := make([]byte, total*cifarPixels)
	at := 0
	for i, p := range paths {
		k := counts[i]
		if k == 0 {
			break // the first n records are read
		}
		whole := n <= 0 || at+k < n
		if err := readCIFARFile(p, labels[at:at+k], pixels[at*cifarPixels:(at+k)*cifarPixels], whole); err != nil {
			return nil, err
		}
		at += k
	}
	return newSet(name, append([]string(nil), paths...), total, 3, cifarSide, cifarSide, pixels, labels, name, 10)
}

// readCIFARFile reads exactly len(labels) records from the batch at path
// into labels and pixels and, if whole is set, checks that nothing follows
// them.
func readCIFARFile(path string, labels, pixels []byte, whole bool) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64*cifarRecord)
	rec := make([]byte, cifarRecord)
	for i := range labels {
		if _, err := io.ReadFull(br, rec); err != nil {
			return fmt.Errorf("%w: %s: record %d of %d: %v (did the file change while read?)", ErrFormat, path, i, len(labels), err)
		}
		if err := takeRecord(path, i, rec, labels, pixels); err != nil {
			return err
		}
	}
	if !whole {
		return nil
	}
	if n, _ := io.ReadFull(br, rec[:1]); n > 0 {
		return fmt.Errorf("%w: %s: more than the %d records it held when opened (did the file change while read?)", ErrFormat, path, len(labels))
	}
	return nil
}
