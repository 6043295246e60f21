// Package doccheck holds the tests of orthonet's documentation (README.md,
// CHANGELOG.md and docs/*.md): every Go block type-checks against the
// module, every relative link and #anchor resolves, and the README stays a
// page. It has no code of its own; see its tests for the conventions a Go
// block follows (a fragment names what it assumes in a "// given:" line).
package doccheck
