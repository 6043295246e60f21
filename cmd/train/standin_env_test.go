//go:build cgo

package main

import (
	"bytes"
	"strings"
	"testing"

	cudabackend "github.com/orthonet/orthonet/backend/cuda"
)

// TestStandInValueRefused checks that a value of ORTHONET_CUDA_STANDIN
// other than 0 or 1 stops -device cuda and -device auto alike with a
// setting error (exit 2) naming the variable and the value, where auto
// used to train on the CPU without a word about it.
func TestStandInValueRefused(t *testing.T) {
	for _, device := range []string{"cuda", "auto"} {
		t.Run(device, func(t *testing.T) {
			t.Setenv(cudabackend.StandInEnv, "yes")
			c := config{device: device, engine: "program"}
			var log bytes.Buffer
			err := selectDevice(&c, &log)
			want := `-device ` + device + `: ORTHONET_CUDA_STANDIN="yes"`
			if err == nil || !strings.Contains(err.Error(), want) || exitCode(err) != 2 {
				t.Fatalf("error %v (exit %d), want exit 2 with %q; said %q", err, exitCode(err), want, log.String())
			}
		})
	}
}
