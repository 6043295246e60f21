package data

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// maxIDXBytes bounds the payload an IDX header may announce: 1 GiB, well
// above MNIST's 47 MB, far below what a corrupt header could claim.
const maxIDXBytes = 1 << 30

// idxMagic is the magic number of an IDX file of unsigned bytes with nd
// dimensions.
func idxMagic(nd int) uint32 { return 0x0800 | uint32(nd) }

// idxStream is an IDX file whose header has been read and whose payload
// has not.
type idxStream struct {
	name  string
	br    *bufio.Reader
	dims  []int
	size  int64 // payload bytes the header announces
	avail int64 // payload bytes the file holds, or -1 if unknown (gzip)
}

// openIDX reads the header of the IDX file in r, gzip-compressed or not.
// fileSize is the size of the file on disk, or -1 if unknown. wantDims > 0
// asks for that many dimensions, described by what in errors. The payload
// may announce at most maxIDXBytes.
func openIDX(r io.Reader, name string, fileSize int64, wantDims int, what string) (*idxStream, error) {
	if l, ok := r.(interface{ Len() int }); ok && fileSize < 0 {
		fileSize = int64(l.Len()) // bytes.Reader and the like
	}
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: gzip: %v", ErrFormat, name, err)
		}
		br = bufio.NewReader(zr)
		fileSize = -1
	}
	nd, err := readIDXMagic(br, name, wantDims, what)
	if err != nil {
		return nil, err
	}
	dims, size, err := readIDXDims(br, name, nd)
	if err != nil {
		return nil, err
	}
	avail := int64(-1)
	if fileSize >= 0 {
		avail = fileSize - int64(4+4*nd) // the magic number and the dimensions
	}
	return &idxStream{name: name, br: br, dims: dims, size: size, avail: avail}, nil
}

// readIDXMagic reads an IDX header's magic number from br and returns the
// dimensions it announces: 1 to 4, or wantDims where that is > 0, of
// unsigned bytes.
func readIDXMagic(br *bufio.Reader, name string, wantDims int, what string) (int, error) {
	want := "0x000008NN, NN = 01 to 04 dimensions"
	if wantDims > 0 {
		want = fmt.Sprintf("0x%08x for %s", idxMagic(wantDims), what)
	}
	var head [4]byte
	if _, err := io.ReadFull(br, head[:]); err != nil {
		return 0, fmt.Errorf("%w: %s: truncated IDX header: %v", ErrFormat, name, err)
	}
	magic := binary.BigEndian.Uint32(head[:])
	nd := int(head[3])
	switch {
	case head[0] != 0 || head[1] != 0:
		return 0, fmt.Errorf("%w: %s: not an IDX file: magic number 0x%08x, want %s", ErrFormat, name, magic, want)
	case head[2] != 0x08:
		return 0, fmt.Errorf("%w: %s: IDX element type 0x%02x (magic number 0x%08x), want unsigned bytes (0x08, magic number %s)", ErrFormat, name, head[2], magic, want)
	case wantDims > 0 && nd != wantDims:
		return 0, fmt.Errorf("%w: %s: magic number 0x%08x announces %d dimensions, want %s", ErrFormat, name, magic, nd, want)
	case nd < 1 || nd > 4:
		return 0, fmt.Errorf("%w: %s: magic number 0x%08x announces %d dimensions, want %s", ErrFormat, name, magic, nd, want)
	}
	return nd, nil
}

// readIDXDims reads an IDX header's nd dimensions from br and returns them
// and the payload's size in bytes: no dimension 0, at most maxIDXBytes.
func readIDXDims(br *bufio.Reader, name string, nd int) ([]int, int64, error) {
	raw := make([]byte, 4*nd)
	if _, err := io.ReadFull(br, raw); err != nil {
		return nil, 0, fmt.Errorf("%w: %s: truncated IDX header: %v", ErrFormat, name, err)
	}
	dims := make([]int, nd)
	size := int64(1) // saturates at math.MaxInt64
	for i := range dims {
		d := binary.BigEndian.Uint32(raw[4*i:])
		dims[i] = int(d)
		switch {
		case d == 0:
			size = 0
		case size > math.MaxInt64/int64(d):
			size = math.MaxInt64
		default:
			size *= int64(d)
		}
	}
	for i, d := range dims {
		if d == 0 {
			return nil, 0, fmt.Errorf("%w: %s: IDX dimensions %v: dimension %d is 0 (an empty file)", ErrFormat, name, dims, i)
		}
	}
	if size > maxIDXBytes {
		return nil, 0, fmt.Errorf("%w: %s: IDX dimensions %v announce %d bytes, larger than the %d this reader takes", ErrFormat, name, dims, size, maxIDXBytes)
	}
	return dims, size, nil
}

// payload reads exactly the bytes the header announces and checks that
// nothing follows them.
func (s *idxStream) payload() ([]byte, error) {
	if s.avail >= 0 && s.avail < s.size {
		return nil, fmt.Errorf("%w: %s: truncated: header %v announces %d bytes, file has %d", ErrFormat, s.name, s.dims, s.size, s.avail)
	}
	b, got, err := readN(s.br, s.size, s.avail >= 0)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return nil, fmt.Errorf("%w: %s: truncated: header %v announces %d bytes, file has %d", ErrFormat, s.name, s.dims, s.size, got)
	case err != nil:
		return nil, fmt.Errorf("%w: %s: reading IDX data: %v", ErrFormat, s.name, err)
	}
	var one [1]byte
	switch n, err := io.ReadFull(s.br, one[:]); {
	case n > 0:
		return nil, fmt.Errorf("%w: %s: trailing data after the %d bytes that header %v announces", ErrFormat, s.name, s.size, s.dims)
	case !errors.Is(err, io.EOF):
		return nil, fmt.Errorf("%w: %s: reading IDX data: %v", ErrFormat, s.name, err)
	}
	return b, nil
}

// readN reads exactly n bytes from r and returns them, or how many it got
// and why it stopped. If known is set, r is known to hold n bytes and the
// result is allocated at once. Otherwise memory follows the data: the
// buffer starts at 1 MiB and doubles while it holds at most n/4 bytes, then
// takes its final size n. So a short input costs at most five times what it
// holds (or 1 MiB), and the peak stays below 1.5 n.
func readN(r io.Reader, n int64, known bool) ([]byte, int64, error) {
	c := int64(1 << 20)
	if known || n <= c {
		c = n
	}
	b := make([]byte, c)
	got, err := io.ReadFull(r, b)
	for int64(got) == c && c < n && err == nil {
		next := 2 * c
		if next > n/2 {
			next = n
		}
		nb := make([]byte, next)
		copy(nb, b)
		b, c = nb, next
		var m int
		m, err = io.ReadFull(r, b[got:])
		got += m
	}
	return b, int64(got), err
}

// DecodeIDX reads an IDX file of unsigned bytes (type code 0x08) from r and
// returns its dimensions and data. name is used in errors. gzip-compressed
// input is detected by its magic number and decompressed. The data may be
// at most 1 GiB.
func DecodeIDX(r io.Reader, name string) (dims []int, payload []byte, err error) {
	s, err := openIDX(r, name, -1, 0, "")
	if err != nil {
		return nil, nil, err
	}
	if payload, err = s.payload(); err != nil {
		return nil, nil, err
	}
	return s.dims, payload, nil
}

// ReadIDX reads a pair of IDX files, images (N x H x W, magic number
// 0x00000803) and labels (N, magic number 0x00000801), as a Set with one
// channel and labels below 10. It refuses images whose float32 pixels would
// take more than DefaultMaxBytes, before reading them.
func ReadIDX(imagesPath, labelsPath string) (*Set, error) {
	return ReadIDXFirst(imagesPath, labelsPath, 0)
}

// ReadIDXFirst reads the first n images and labels of a pair of IDX files
// (all of them for n <= 0), as ReadIDX does, reading and allocating only
// what those n need (see LoadFirst).
func ReadIDXFirst(imagesPath, labelsPath string, n int) (*Set, error) {
	im, imf, err := openIDXFile(imagesPath, 3, "images, N x H x W")
	if err != nil {
		return nil, err
	}
	defer imf.Close()
	lb, lbf, err := openIDXFile(labelsPath, 1, "labels, N")
	if err != nil {
		return nil, err
	}
	defer lbf.Close()
	all, h, w := im.dims[0], im.dims[1], im.dims[2]
	if lb.dims[0] != all {
		return nil, fmt.Errorf("%w: %s has %d images but %s has %d labels", ErrFormat, imagesPath, all, labelsPath, lb.dims[0])
	}
	if n <= 0 || n >= all {
		n = all
	}
	if b := PixelBytes(n, 1, h, w); b > DefaultMaxBytes {
		return nil, fmt.Errorf("%w: %s: %d images of %dx%d take %d bytes as float32, more than the %d of data.DefaultMaxBytes", ErrFormat, imagesPath, n, h, w, b, DefaultMaxBytes)
	}
	read := func(s *idxStream, bytes int64) ([]byte, error) {
		if n == all {
			return s.payload()
		}
		return s.prefix(bytes)
	}
	pixels, err := read(im, int64(n)*int64(h)*int64(w))
	if err != nil {
		return nil, err
	}
	labels, err := read(lb, int64(n))
	if err != nil {
		return nil, err
	}
	return newSet(imagesPath, []string{imagesPath, labelsPath}, n, 1, h, w, pixels, labels, labelsPath, 10)
}

// prefix reads the first n bytes of the payload, n at most what the header
// announces, and nothing after them.
func (s *idxStream) prefix(n int64) ([]byte, error) {
	if s.avail >= 0 && s.avail < n {
		return nil, fmt.Errorf("%w: %s: truncated: its first %d bytes are needed, the file has %d", ErrFormat, s.name, n, s.avail)
	}
	b, got, err := readN(s.br, n, s.avail >= 0)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return nil, fmt.Errorf("%w: %s: truncated: its first %d bytes are needed, the file has %d", ErrFormat, s.name, n, got)
	case err != nil:
		return nil, fmt.Errorf("%w: %s: reading IDX data: %v", ErrFormat, s.name, err)
	}
	return b, nil
}

// openIDXFile opens the IDX file at path and reads its header, as openIDX
// does with wantDims and what; the caller closes the file it returns.
func openIDXFile(path string, wantDims int, what string) (*idxStream, *os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("data: %w", err)
	}
	s, err := openIDX(f, path, regularSize(f), wantDims, what)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return s, f, nil
}

// regularSize returns the size of f if it is a regular file, else -1.
func regularSize(f *os.File) int64 {
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return -1
	}
	return fi.Size()
}
