// Package data reads the image classification sets orthonet trains on:
// MNIST and Fashion-MNIST (IDX files, raw or gzip) and CIFAR-10 (binary
// batches). It resizes images, scales pixels to [-1, 1], and serves seeded,
// shuffled mini-batches. Download fetches MNIST or CIFAR-10 and checks each
// file's SHA-256 before it is used.
//
// Readers check every length against the data actually present before they
// allocate, so a corrupt or hostile header yields an error naming the file
// and the fault, never a panic or a huge allocation.
package data

import (
	"errors"
	"fmt"
)

// Set is a labelled image set held in memory.
type Set struct {
	// Name says where the set came from, for messages.
	Name string
	// N images of C channels, H rows and W columns.
	N, C, H, W int
	// X holds the pixels, image after image, each channel-major (C, H, W),
	// scaled to [-1, 1].
	X []float32
	// Y holds the N labels, each below Classes.
	Y []uint8
	// Classes is the number of label values.
	Classes int
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

// newSet scales the bytes of n images of c x h x w to [-1, 1]. pixels is in
// the file's layout: channel-major per image for both IDX (c = 1) and CIFAR.
func newSet(name string, n, c, h, w int, pixels, labels []byte, classes int) (*Set, error) {
	for i, l := range labels {
		if int(l) >= classes {
			return nil, fmt.Errorf("%w: %s: label %d of example %d is not below %d", ErrFormat, name, l, i, classes)
		}
	}
	s := &Set{Name: name, N: n, C: c, H: h, W: w, X: make([]float32, len(pixels)), Y: labels, Classes: classes}
	for i, p := range pixels {
		s.X[i] = float32(p)/127.5 - 1
	}
	return s, nil
}
