// Package funclen holds the test that keeps orthonet's functions short:
// every function and method of the module's non-test, non-generated Go
// files (whatever their build tags) takes at most 60 lines, from its func to
// its closing brace, but for the exceptions its test names, each with why.
// It has no code of its own.
package funclen
