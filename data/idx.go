package data

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"os"
)

// maxIDXBytes bounds the payload an IDX header may announce: 1 GiB, well
// above MNIST's 47 MB, far below what a corrupt header could claim.
const maxIDXBytes = 1 << 30

// DecodeIDX reads an IDX file of unsigned bytes (type code 0x08) from r and
// returns its dimensions and data. name is used in errors. gzip-compressed
// input is detected by its magic number and decompressed.
func DecodeIDX(r io.Reader, name string) (dims []int, payload []byte, err error) {
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %s: gzip: %v", ErrFormat, name, err)
		}
		defer zr.Close()
		br = bufio.NewReader(zr)
	}
	var head [4]byte
	if _, err := io.ReadFull(br, head[:]); err != nil {
		return nil, nil, fmt.Errorf("%w: %s: truncated IDX header: %v", ErrFormat, name, err)
	}
	if head[0] != 0 || head[1] != 0 {
		return nil, nil, fmt.Errorf("%w: %s: not an IDX file (magic %x)", ErrFormat, name, head)
	}
	if head[2] != 0x08 {
		return nil, nil, fmt.Errorf("%w: %s: IDX element type 0x%02x, want unsigned bytes (0x08)", ErrFormat, name, head[2])
	}
	nd := int(head[3])
	if nd < 1 || nd > 4 {
		return nil, nil, fmt.Errorf("%w: %s: IDX with %d dimensions, want 1 to 4", ErrFormat, name, nd)
	}
	dims = make([]int, nd)
	size := 1
	for i := range dims {
		var d uint32
		if err := binary.Read(br, binary.BigEndian, &d); err != nil {
			return nil, nil, fmt.Errorf("%w: %s: truncated IDX header: %v", ErrFormat, name, err)
		}
		dims[i] = int(d)
		if d == 0 || size > maxIDXBytes/int(d) {
			return nil, nil, fmt.Errorf("%w: %s: IDX dimensions %v: empty or larger than %d bytes", ErrFormat, name, dims[:i+1], maxIDXBytes)
		}
		size *= int(d)
	}
	// Read what is there, up to one byte more than announced: the allocation
	// follows the data, not the header.
	var buf bytes.Buffer
	got, err := buf.ReadFrom(io.LimitReader(br, int64(size)+1))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: reading IDX data: %v", ErrFormat, name, err)
	}
	switch {
	case got < int64(size):
		return nil, nil, fmt.Errorf("%w: %s: truncated: header %v announces %d bytes, file has %d", ErrFormat, name, dims, size, got)
	case got > int64(size):
		return nil, nil, fmt.Errorf("%w: %s: trailing data after the %d bytes that header %v announces", ErrFormat, name, size, dims)
	}
	return dims, buf.Bytes(), nil
}

// ReadIDX reads a pair of IDX files, images (N x H x W) and labels (N), as a
// Set with one channel and labels below 10.
func ReadIDX(imagesPath, labelsPath string) (*Set, error) {
	imDims, pixels, err := decodeIDXFile(imagesPath)
	if err != nil {
		return nil, err
	}
	if len(imDims) != 3 {
		return nil, fmt.Errorf("%w: %s: images have %d dimensions, want 3 (N x H x W)", ErrFormat, imagesPath, len(imDims))
	}
	lbDims, labels, err := decodeIDXFile(labelsPath)
	if err != nil {
		return nil, err
	}
	if len(lbDims) != 1 {
		return nil, fmt.Errorf("%w: %s: labels have %d dimensions, want 1", ErrFormat, labelsPath, len(lbDims))
	}
	if lbDims[0] != imDims[0] {
		return nil, fmt.Errorf("%w: %s has %d images but %s has %d labels", ErrFormat, imagesPath, imDims[0], labelsPath, lbDims[0])
	}
	return newSet(imagesPath, imDims[0], 1, imDims[1], imDims[2], pixels, labels, 10)
}

func decodeIDXFile(path string) ([]int, []byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	return DecodeIDX(f, path)
}
