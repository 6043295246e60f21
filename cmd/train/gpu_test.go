//go:build gpu

package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orthonet/orthonet/checkpoint"
)

// gpuMemory returns the GPU memory this process holds, in MiB, as
// nvidia-smi reports it (the whole GPU's use where it lists no processes).
func gpuMemory() (float64, error) {
	out, err := exec.Command("nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits").Output()
	if err != nil {
		return 0, err
	}
	pid := strconv.Itoa(os.Getpid())
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(line, ",")
		if len(f) == 2 && strings.TrimSpace(f[0]) == pid {
			return strconv.ParseFloat(strings.TrimSpace(f[1]), 64)
		}
	}
	out, err = exec.Command("nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits").Output()
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(strings.TrimSpace(strings.Split(string(out), "\n")[0]), 64)
}

// TestGPUMemoryFlat trains 1,200 steps on the GPU while sampling the GPU
// memory in use: the most used in the last quarter of the run must not
// exceed the most used in its second quarter (after warm-up) by more than
// 16 MiB, which a leak of one batch's activations per step would.
func TestGPUMemoryFlat(t *testing.T) {
	dir := t.TempDir()
	fixture(t, 2000, "train", dir, 1)
	fixture(t, 200, "t10k", dir, 2)
	c, err := parseFlags([]string{"-dataset", "mnist", "-data", dir, "-out", t.TempDir(), "-hidden", "256", "-depth", "3",
		"-r", "64", "-batch", "10", "-epochs", "6", "-save-every", "0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		samples []float64
		done    = make(chan struct{})
		stopped = make(chan struct{})
	)
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if m, err := gpuMemory(); err == nil {
				mu.Lock()
				samples = append(samples, m)
				mu.Unlock()
			}
		}
	}()
	err = run(context.Background(), c, io.Discard)
	close(done)
	<-stopped
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) < 8 {
		t.Fatalf("%d memory samples, too few to judge", len(samples))
	}
	q := len(samples) / 4
	peak := func(s []float64) float64 {
		m := 0.0
		for _, v := range s {
			m = max(m, v)
		}
		return m
	}
	early, late := peak(samples[q:2*q]), peak(samples[3*q:])
	t.Logf("%d samples over 1,200 steps: peak %.0f MiB in the second quarter, %.0f MiB in the last", len(samples), early, late)
	if late > early+16 {
		t.Errorf("GPU memory grew from %.0f to %.0f MiB over the run", early, late)
	}
}

// TestKillResumeGPU is TestKillResume on the GPU (the cuda build's default
// device): 12 kills, later after each start, since a process there first
// starts the device and compiles or loads the kernels.
func TestKillResumeGPU(t *testing.T) {
	killResume(t, 12, 1500*time.Millisecond, 4*time.Second, 100)
}

// TestGPUCheckpointInPython trains a few steps on the GPU and reads the
// checkpoint with scripts/load_checkpoint.py and with
// safetensors.torch.load_file, which must find every tensor the Go reader
// finds.
func TestGPUCheckpointInPython(t *testing.T) {
	if err := exec.Command("python3", "-c", "import safetensors.torch, torch").Run(); err != nil {
		if os.Getenv("ORTHONET_REQUIRE_GPU") != "" {
			t.Fatalf("python3 with torch and safetensors: %v", err)
		}
		t.Skip("no python3 with torch and safetensors")
	}
	dir, out := t.TempDir(), t.TempDir()
	fixture(t, 200, "train", dir, 1)
	fixture(t, 50, "t10k", dir, 2)
	c, err := parseFlags([]string{"-dataset", "mnist", "-data", dir, "-out", out, "-hidden", "64", "-depth", "2", "-r", "16",
		"-batch", "10", "-epochs", "1", "-device", "cuda"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), c, io.Discard); err != nil {
		t.Fatal(err)
	}
	path, err := resolveResume("latest", out)
	if err != nil {
		t.Fatal(err)
	}
	f, err := checkpoint.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("python3", "../../scripts/load_checkpoint.py", path).CombinedOutput(); err != nil {
		t.Fatalf("load_checkpoint.py: %v\n%s", err, out)
	}
	py := "import safetensors.torch, sys; print(len(safetensors.torch.load_file(sys.argv[1])))"
	got, err := exec.Command("python3", "-c", py, path).Output()
	if err != nil {
		t.Fatalf("safetensors.torch.load_file: %v", err)
	}
	if n, _ := strconv.Atoi(strings.TrimSpace(string(got))); n != len(f.Tensors) {
		t.Errorf("safetensors.torch.load_file read %s tensors, the Go reader %d", strings.TrimSpace(string(got)), len(f.Tensors))
	}
}
