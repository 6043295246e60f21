//go:build cgo

package main

import (
	"testing"

	cudabackend "github.com/orthonet/orthonet/backend/cuda"
)

// TestEvalOnHostModel evaluates a run's checkpoint with -device cuda on the
// host model of the device: the CUDA backend's evaluation gives the run's
// test accuracy, give or take an image near a tie.
func TestEvalOnHostModel(t *testing.T) {
	_, out, want := tinyRun(t, "ffn")
	t.Setenv(cudabackend.StandInEnv, "1")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	checkEval(t, out, want, "-device", "cuda")
}
