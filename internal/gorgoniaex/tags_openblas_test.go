//go:build openblas && cgo

package gorgoniaex

// buildTags are the tags the examples are built with: this test's.
const buildTags = "openblas"
