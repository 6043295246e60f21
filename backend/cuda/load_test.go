//go:build cgo

package cuda

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/internal/cudak"
	"github.com/orthonet/orthonet/internal/cudak/standin"
)

// nvrtcOrSkip returns NVRTC as the backend finds it, or skips the test
// where the machine has none, unless ORTHONET_REQUIRE_NVRTC=1 (then it
// fails).
func nvrtcOrSkip(t *testing.T) *api {
	t.Helper()
	a, err := loadCompiler(dl{})
	if err != nil {
		if os.Getenv("ORTHONET_REQUIRE_NVRTC") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return a
}

// pretend sets the host model for one test and restores its default after.
func pretend(t *testing.T, edit func(*standin.Config)) {
	t.Helper()
	c := standin.DefaultConfig()
	edit(&c)
	if err := standin.Configure(c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := standin.Configure(standin.DefaultConfig()); err != nil {
			t.Error(err)
		}
	})
}

// startModel starts a backend on the host model, closed when the test ends.
func startModel(t *testing.T) (*Backend, error) {
	t.Helper()
	t.Setenv(StandInEnv, "1")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	be, err := New(Options{})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		if err := be.Close(); err != nil {
			t.Error(err)
		}
	})
	return be.(*Backend), nil
}

// pipFolder makes the folder of an NVIDIA wheel in a virtual environment
// and points VIRTUAL_ENV at it, as a pip install that is not in the
// loader's path.
func pipFolder(t *testing.T) string {
	t.Helper()
	venv := t.TempDir()
	dir := filepath.Join(venv, "lib", "python3.11", "site-packages", "nvidia", "cu12", "lib")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VIRTUAL_ENV", venv)
	return dir
}

// TestStartupFailures checks the three ways the backend used to fail at
// start on common GPU machines, each on a host model pretending to be such
// a machine, and what the backend loads instead.
func TestStartupFailures(t *testing.T) {
	cases := []struct {
		name string
		edit func(t *testing.T, c *standin.Config)
		want string // in the backend's name
	}{
		{"driver older than NVRTC", func(t *testing.T, c *standin.Config) {
			c.Driver, c.NVRTC = 12020, standin.Version{Major: 12, Minor: 6} // a 535 driver, CUDA 12.6 toolkit
		}, "kernels CUBIN for sm_90"},
		{"NVRTC's builtins not in the loader's path", func(t *testing.T, c *standin.Config) {
			c.Folder, c.BuiltinsInPath = pipFolder(t), false
		}, "libnvrtc-builtins.so.12.8"},
		{"GPU newer than NVRTC", func(t *testing.T, c *standin.Config) {
			c.Driver, c.NVRTC, c.Major, c.Minor = 12080, standin.Version{Major: 12, Minor: 6}, 12, 0
		}, "kernels PTX for compute_90, compiled by the driver for sm_120"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pretend(t, func(c *standin.Config) { tc.edit(t, c) })
			b, err := startModel(t)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.Name(), tc.want) {
				t.Errorf("backend %q, want %q in it", b.Name(), tc.want)
			}
			if err := b.CopyOut(make([]float32, 1), mustAlloc(t, b), 0); err != nil {
				t.Error(err)
			}
		})
	}
}

func mustAlloc(t *testing.T, b *Backend) *buffer {
	t.Helper()
	buf, err := b.Alloc(backend.Float32, 4)
	if err != nil {
		t.Fatal(err)
	}
	return buf.(*buffer)
}

// TestStartupFailuresWithoutTheFixes checks that the model does fail as
// the machines do where the backend does not work around them: a driver
// older than NVRTC refuses NVRTC's PTX, and NVRTC without its builtins
// library fails to compile.
func TestStartupFailuresWithoutTheFixes(t *testing.T) {
	t.Run("PTX on an older driver", func(t *testing.T) {
		pretend(t, func(c *standin.Config) { c.Driver, c.NVRTC = 12020, standin.Version{Major: 12, Minor: 6} })
		b, err := startModel(t)
		if err != nil {
			t.Fatal(err)
		}
		ptx, err := compile(b.a, 90, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.load(ptx); err == nil || !strings.Contains(err.Error(), "CUDA_ERROR_UNSUPPORTED_PTX_VERSION") {
			t.Errorf("loading NVRTC 12.6's PTX on a CUDA 12.2 driver: %v, want CUDA_ERROR_UNSUPPORTED_PTX_VERSION", err)
		}
	})
	t.Run("NVRTC without its builtins", func(t *testing.T) {
		var dir string
		pretend(t, func(c *standin.Config) { dir = pipFolder(t); c.Folder, c.BuiltinsInPath = dir, false })
		a := newAPI()
		l, err := model{}.open(filepath.Join(dir, "libnvrtc.so.12"))
		if err != nil {
			t.Fatal(err)
		}
		if err := a.resolve(model{}, 1, l); err != nil {
			t.Fatal(err)
		}
		a.nvrtc = [2]int{12, 8}
		if _, err := compile(a, 90, true); err == nil || !strings.Contains(err.Error(), "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE") {
			t.Errorf("compiling without the builtins: %v, want NVRTC_ERROR_BUILTIN_OPERATION_FAILURE", err)
		}
	})
}

// TestMissingPieces checks that a machine without the driver, a device or
// a library fails to start with an error naming what is missing.
func TestMissingPieces(t *testing.T) {
	cases := []struct {
		name string
		edit func(*standin.Config)
		want []string
	}{
		{"no driver", func(c *standin.Config) { c.Driver = 0 }, []string{"libcuda.so.1"}},
		{"no device", func(c *standin.Config) { c.Devices = 0 }, []string{"CUDA_ERROR_NO_DEVICE", "driver CUDA 12.8"}},
		{"no NVRTC", func(c *standin.Config) { c.NVRTC = standin.Version{} }, []string{"libnvrtc.so.12 not found", "searched the loader's path", "/usr/local/cuda/lib64"}},
		{"no cuBLAS", func(c *standin.Config) { c.CUBLAS = 0 }, []string{"libcublas.so.12 not found"}},
		{"no cuSOLVER", func(c *standin.Config) { c.CUSOLVER = 0 }, []string{"libcusolver.so.11 not found"}},
		{"old driver", func(c *standin.Config) { c.Driver = 11080 }, []string{"CUDA 12: the driver runs CUDA 11.8"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pretend(t, tc.edit)
			_, err := startModel(t)
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("start: %v, want %q in it", err, w)
				}
			}
		})
	}
	// This machine's own loader: where it has no driver, the error names it.
	if _, err := loadDriver(newFinder(dl{})); err != nil && !strings.Contains(err.Error(), "libcuda.so.1") {
		t.Errorf("the system's loader without a driver: %v, want libcuda.so.1 named", err)
	}
}

// TestSearchPath checks where the backend looks for the libraries: the
// toolkit of CUDA_HOME first, the NVIDIA wheels of a virtual environment.
func TestSearchPath(t *testing.T) {
	home := t.TempDir()
	t.Setenv("CUDA_HOME", home)
	t.Setenv("CUDA_PATH", "")
	dir := pipFolder(t)
	wheel2 := filepath.Join(filepath.Dir(filepath.Dir(dir)), "cublas", "lib")
	if err := os.MkdirAll(wheel2, 0o755); err != nil {
		t.Fatal(err)
	}
	got := searchPath()
	if len(got) < 4 || got[0] != filepath.Join(home, "lib64") || got[1] != filepath.Join(home, "lib") {
		t.Fatalf("search path %v, want %s/lib64 and lib first", got, home)
	}
	for _, d := range []string{dir, wheel2, "/usr/local/cuda/lib64"} {
		if !slices.Contains(got, d) {
			t.Errorf("search path %v lacks %s", got, d)
		}
	}
}

// TestKernelCache checks that compiled kernels are cached under the user's
// cache folder and read back from there, and that another driver or target
// compiles to another file.
func TestKernelCache(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", dir)
	a, err := loadCompiler(model{})
	if err != nil {
		t.Fatal(err)
	}
	files := func() []string {
		f, _ := filepath.Glob(filepath.Join(dir, "orthonet", "kernels", "*"))
		return f
	}
	img, err := cachedImage(a, 90, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(files()) != 1 {
		t.Fatalf("%d cached files after one compile, want 1", len(files()))
	}
	marked := append(slices.Clone(img), "cached"...)
	if err := os.WriteFile(files()[0], marked, 0o644); err != nil {
		t.Fatal(err)
	}
	if again, err := cachedImage(a, 90, true); err != nil || !bytes.Equal(again, marked) {
		t.Fatalf("second call did not read the cache (err %v)", err)
	}
	if _, err := cachedImage(a, 90, false); err != nil {
		t.Fatal(err)
	}
	a.driver++
	if _, err := cachedImage(a, 90, true); err != nil {
		t.Fatal(err)
	}
	if len(files()) != 3 {
		t.Errorf("%d cached files after CUBIN, PTX and another driver, want 3", len(files()))
	}
}

// TestCompile checks that compile gives a CUBIN for a real architecture
// and PTX for a virtual one (through the host model's NVRTC).
func TestCompile(t *testing.T) {
	a, err := loadCompiler(model{})
	if err != nil {
		t.Fatal(err)
	}
	cubin, err := compile(a, 90, true)
	if err != nil || !bytes.HasPrefix(cubin, []byte("\x7fELF")) {
		t.Errorf("CUBIN for sm_90: %q, %v", cubin, err)
	}
	ptx, err := compile(a, 90, false)
	if err != nil || !bytes.Contains(ptx, []byte(".target sm_90")) || bytes.HasSuffix(ptx, []byte{0}) {
		t.Errorf("PTX for compute_90: %q, %v", ptx, err)
	}
	if _, err := compile(a, 91, true); err == nil || !strings.Contains(err.Error(), "NVRTC_ERROR_INVALID_OPTION") {
		t.Errorf("an architecture NVRTC does not know: %v", err)
	}
}

// TestKernelsCompileWithNVRTC compiles every kernel with the real NVRTC,
// found as the backend finds it (make test installs Debian's NVRTC), to
// CUBIN for sm_75, sm_80, sm_86 and sm_90 and to PTX, and checks that each
// has every kernel the source defines. Without NVRTC on the machine it
// skips, unless ORTHONET_REQUIRE_NVRTC=1.
func TestKernelsCompileWithNVRTC(t *testing.T) {
	a := nvrtcOrSkip(t)
	t.Log(strings.Join(a.where, ", "))
	names := regexp.MustCompile(`(?m)^KERNEL(?:_SYNC)?\((\w+),`).FindAllStringSubmatch(cudak.Source, -1)
	if len(names) < 40 {
		t.Fatalf("found %d KERNEL definitions in the source", len(names))
	}
	for _, c := range []struct {
		arch  int
		cubin bool
	}{{75, true}, {80, true}, {86, true}, {90, true}, {75, false}} {
		t.Run(strings.TrimSpace(strings.Repeat("cubin ", boolInt(c.cubin))+string(rune('0'+c.arch/10))+string(rune('0'+c.arch%10))), func(t *testing.T) {
			t.Parallel()
			img, err := compile(a, c.arch, c.cubin)
			if err != nil {
				t.Fatal(err)
			}
			if c.cubin && !bytes.HasPrefix(img, []byte("\x7fELF")) {
				t.Fatalf("sm_%d: the CUBIN is not an ELF file", c.arch)
			}
			for _, n := range names {
				want := []byte(n[1])
				if !c.cubin {
					want = []byte(".entry " + n[1] + "(")
				}
				if !bytes.Contains(img, want) {
					t.Errorf("arch %d (cubin %v): no kernel %s", c.arch, c.cubin, n[1])
				}
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
