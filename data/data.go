// Package data reads the image classification sets orthonet trains on:
// MNIST and Fashion-MNIST (IDX files, raw or gzip) and CIFAR-10 (binary
// batches). It resizes images, scales pixels to [-1, 1], and serves seeded,
// shuffled mini-batches. A Downloader fetches MNIST or CIFAR-10, giving up
// a mirror that stalls for the next, and checks each file's SHA-256 before
// it is used.
//
// Readers check every length against the data actually present, and the
// memory a set will take against DefaultMaxBytes, before they allocate, so a
// corrupt or hostile header yields an error naming the file and the fault,
// never a panic or a huge allocation; Resize checks its result likewise.
package data

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// DefaultMaxBytes is the most memory, in bytes, that the float32 pixels of
// one Set may take: the readers refuse a file that would decode to more, and
// Resize refuses a result larger than its budget, which defaults to this.
// It is 2 GiB, 2.9 times what all 60,000 CIFAR-10 images take at 3 x 32 x 32
// (60000*3*32*32*4 = 737 MB) and 8.7 times MNIST's 60,000 training images
// at 32 x 32 (246 MB).
const DefaultMaxBytes int64 = 2 << 30

// PixelBytes returns the bytes that the float32 pixels of n images of
// c x h x w take, or math.MaxInt64 if that does not fit in an int64.
// Negative sizes count as math.MaxInt64 too.
func PixelBytes(n, c, h, w int) int64 {
	b := int64(4)
	for _, f := range []int{n, c, h, w} {
		if f < 0 {
			return math.MaxInt64
		}
		if f != 0 && b > math.MaxInt64/int64(f) {
			return math.MaxInt64
		}
		b *= int64(f)
	}
	return b
}

// Set is a labelled image set held in memory.
type Set struct {
	// Name says where the set came from, for messages.
	Name string
	// Files lists the files the set was read from, for messages.
	Files []string
	// N images of C channels, H rows and W columns.
	N, C, H, W int
	// X holds the pixels, image after image, each channel-major (C, H, W),
	// scaled to [-1, 1].
	X []float32
	// Y holds the N labels, each below Classes.
	Y []uint8
	// Classes is the number of label values.
	Classes int
	// ClassNames, when not nil, names the Classes label values, by label:
	// ReadImageFolder sets it to the class folders' names. The readers of
	// IDX files and CIFAR-10 batches leave it nil (see ClassNames).
	ClassNames []string
	// Skipped lists the files a reader passed over because they were
	// faulty, when asked to (FolderOptions.Skip), each as the message of
	// the error that refusing it would have returned, which names the file
	// and the fault; len(Skipped) is their count. It is nil when nothing
	// was skipped.
	Skipped []string
}

// Dim returns C*H*W, the length of one image.
func (s *Set) Dim() int { return s.C * s.H * s.W }

// Image returns image i, aliasing s.X.
func (s *Set) Image(i int) []float32 { d := s.Dim(); return s.X[i*d : (i+1)*d] }

// Limit returns the first n examples of s (all of them if n <= 0 or n >= N).
// The result shares storage with s.
func (s *Set) Limit(n int) *Set {
	if n <= 0 || n >= s.N {
		return s
	}
	t := *s
	t.N = n
	t.X = s.X[:n*s.Dim()]
	t.Y = s.Y[:n]
	return &t
}

// ErrFormat reports a file that is not in the expected format.
var ErrFormat = errors.New("data: bad file format")

// source names the files s was read from, or its Name if none.
func (s *Set) source() string {
	if len(s.Files) == 0 {
		return s.Name
	}
	return strings.Join(s.Files, ", ")
}

// newSet scales the bytes of n images of c x h x w to [-1, 1]. pixels is in
// the file's layout: channel-major per image for both IDX (c = 1) and CIFAR.
// labelsFile names the file the labels came from, for errors.
func newSet(name string, files []string, n, c, h, w int, pixels, labels []byte, labelsFile string, classes int) (*Set, error) {
	for i, l := range labels {
		if int(l) >= classes {
			return nil, fmt.Errorf("%w: %s: label %d of example %d is not below %d", ErrFormat, labelsFile, l, i, classes)
		}
	}
	return &Set{Name: name, Files: files, N: n, C: c, H: h, W: w, X: scalePixels(pixels), Y: labels, Classes: classes}, nil
}

// scalePixels scales 8-bit pixels to [-1, 1]: p / 127.5 - 1, for every set
// and image file read.
func scalePixels(pixels []byte) []float32 {
	x := make([]float32, len(pixels))
	for i, p := range pixels {
		x[i] = float32(p)/127.5 - 1
	}
	return x
}
