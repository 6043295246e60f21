//go:build !openblas

package doccheck

// buildTags are the tags the go command builds the blocks' imports with:
// this test binary's, so that the build cache serves them.
const buildTags = ""
