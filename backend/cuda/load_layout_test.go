//go:build cgo

package cuda

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/orthonet/orthonet/internal/cudak/standin"
)

// TestDependencyFromOwnFolder checks that a library's missing dependency
// is opened from the library's own folder before the search path: a
// cuSOLVER wheel whose libnvJitLink has an older copy in
// /usr/local/cuda/lib64 (earlier on the search path) loads with its own.
func TestDependencyFromOwnFolder(t *testing.T) {
	t.Setenv("CUDA_HOME", "")
	t.Setenv("CUDA_PATH", "")
	var dir string
	pretend(t, func(c *standin.Config) {
		dir = pipFolder(t)
		c.Folder, c.BuiltinsInPath, c.StaleJitLink = dir, false, "/usr/local/cuda/lib64"
	})
	b, err := startModel(t)
	if err != nil {
		t.Fatal(err)
	}
	if want := "cuSOLVER " + filepath.Join(dir, "libcusolver.so.11"); !strings.Contains(b.Name(), want) {
		t.Errorf("backend %q, want %q in it", b.Name(), want)
	}
}

// TestDriverFolders checks that libcuda.so.1 is also found outside the
// loader's path, in the folder container runtimes mount it in and in the
// system's library folders, that the backend says where it found it, and
// that where there is none the error names the folders searched.
func TestDriverFolders(t *testing.T) {
	system := "/usr/lib64"
	if runtime.GOARCH == "amd64" {
		system = "/usr/lib/x86_64-linux-gnu"
	}
	for _, c := range []struct {
		folder string
		want   string // in the backend's name, or the error
		fails  bool
	}{
		{"/usr/local/nvidia/lib64", "driver CUDA 12.8 (/usr/local/nvidia/lib64/libcuda.so.1)", false},
		{system, "driver CUDA 12.8 (" + system + "/libcuda.so.1)", false},
		{"/lib64", "driver CUDA 12.8 (/lib64/libcuda.so.1)", false},
		{"/opt/elsewhere", "the NVIDIA driver (libcuda.so.1) is not installed: not in the loader's path nor in /usr/local/nvidia/lib64, ", true},
	} {
		t.Run(c.folder, func(t *testing.T) {
			pretend(t, func(m *standin.Config) { m.DriverFolder = c.folder })
			b, err := startModel(t)
			switch {
			case c.fails && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("start: %v, want an error with %q", err, c.want)
			case !c.fails && err != nil:
				t.Error(err)
			case !c.fails && !strings.Contains(b.Name(), c.want):
				t.Errorf("backend %q, want %q in it", b.Name(), c.want)
			}
		})
	}
}

// TestOlderNames checks that cuEventElapsedTime_v2 (all CUDA 13's headers
// declare) is taken where the driver exports it, and its older name where
// the driver exports only that, so that a driver with either name starts.
func TestOlderNames(t *testing.T) {
	const v2, old = "cuEventElapsedTime_v2", "cuEventElapsedTime"
	for _, c := range []struct {
		name  string
		lacks []string
		want  string // the name whose function the table holds; "": start fails
	}{
		{"both", nil, v2},
		{"only _v2", []string{old}, v2},
		{"only the older name", []string{v2}, old},
		{"neither", []string{v2, old}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			pretend(t, func(m *standin.Config) { m.Lacks = c.lacks })
			b, err := startModel(t)
			if c.want == "" {
				if err == nil || !strings.Contains(err.Error(), "has no function "+v2) {
					t.Errorf("start: %v, want an error naming %s", err, v2)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := b.a.fn(v2); got == nil || got != standin.Sym(standin.LibCUDA, c.want) {
				t.Errorf("the table holds %p for %s, want %s's %p", got, v2, c.want, standin.Sym(standin.LibCUDA, c.want))
			}
		})
	}
}

// renamed is the host model with some libraries served under other names
// as well: libnvrtc.so.13 as the model's NVRTC, say, which makes a machine
// with one library of CUDA 13 beside a whole CUDA 12.
type renamed struct {
	model
	as map[string]string // a name asked for: the name the model opens
}

func (r renamed) open(p string) (*library, error) {
	n, ok := r.as[p]
	if !ok {
		return r.model.open(p)
	}
	l, err := r.model.open(n)
	if err == nil {
		l.path = p
	}
	return l, err
}

// TestWhereResetOnFallback checks that what a CUDA 13 attempt loaded
// before it failed (its NVRTC, where cuBLAS 13 is missing) is not named
// among the libraries of the CUDA 12 that is used.
func TestWhereResetOnFallback(t *testing.T) {
	pretend(t, func(c *standin.Config) { c.Driver = 13000 })
	a, err := load(renamed{as: map[string]string{"libnvrtc.so.13": "libnvrtc.so.12"}})
	if err != nil {
		t.Fatal(err)
	}
	if a.cuda != 12 {
		t.Errorf("CUDA %d loaded, want 12", a.cuda)
	}
	var nvrtc []string
	for _, w := range a.where {
		if strings.HasPrefix(w, "NVRTC") {
			nvrtc = append(nvrtc, w)
		}
	}
	if len(nvrtc) != 1 || !strings.Contains(nvrtc[0], "libnvrtc.so.12") {
		t.Errorf("loaded from %q, want one NVRTC, libnvrtc.so.12", a.where)
	}
}

// TestHintNamesBothWheels checks that the error of a machine without the
// libraries names the pip packages of CUDA 13 and of CUDA 12.
func TestHintNamesBothWheels(t *testing.T) {
	pretend(t, func(c *standin.Config) { c.Driver, c.CUBLAS = 13000, 0 })
	_, err := startModel(t)
	for _, w := range []string{
		"nvidia-cuda-nvrtc nvidia-cublas nvidia-cusolver nvidia-nvjitlink for CUDA 13",
		"nvidia-cuda-nvrtc-cu12 nvidia-cublas-cu12 nvidia-cusolver-cu12 nvidia-nvjitlink-cu12 for CUDA 12",
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("start without cuBLAS: %v, want %q in it", err, w)
		}
	}
}

// fakeDrivers returns a folder with an empty libcuda.so.1, one with a text
// file of that name, and one with an ELF library that is not the driver
// (this process's libc, which lacks cuInit).
func fakeDrivers(t *testing.T) (empty, text, elf string) {
	t.Helper()
	libc := ""
	for _, p := range []string{"/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6", "/lib64/libc.so.6", "/usr/lib64/libc.so.6"} {
		if _, err := os.Stat(p); err == nil {
			libc = p
			break
		}
	}
	mk := func(data []byte) string {
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, driverName), data, 0o644); err != nil {
			t.Fatal(err)
		}
		return d
	}
	empty = mk(nil)
	text = mk([]byte(strings.Repeat("this is no shared library, only text\n", 4)))
	if libc != "" {
		b, err := os.ReadFile(libc)
		if err != nil {
			t.Fatal(err)
		}
		elf = mk(b)
	}
	return empty, text, elf
}

// TestDriverFoundButUnloadable checks that a libcuda.so.1 that is there
// but does not load (empty, text, a library without the driver's
// functions) is reported as such, with its path and the loader's reason,
// and not as a driver that is not installed.
func TestDriverFoundButUnloadable(t *testing.T) {
	empty, text, elf := fakeDrivers(t)
	absent := filepath.Join(t.TempDir(), driverName)
	for _, c := range []struct {
		name, dir, reason string
	}{
		{"empty", empty, "file too short"},
		{"text", text, "invalid ELF header"},
		{"a library without cuInit", elf, "has no function cuInit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.dir == "" {
				t.Skip("no libc.so.6 found to copy")
			}
			p := filepath.Join(c.dir, driverName)
			f := &finder{o: dl{}, driver: []string{absent, p}}
			_, err := loadDriver(f)
			if err == nil {
				t.Fatal("loaded a fake driver")
			}
			msg := err.Error()
			if !strings.Contains(msg, p) || !strings.Contains(msg, c.reason) || strings.Contains(msg, "not installed") {
				t.Errorf("error %q, want one naming %s and %q, not \"not installed\"", msg, p, c.reason)
			}
		})
	}
}

// TestDriverStartRace starts the driver's loading 200 times at once
// against a folder whose libcuda.so.1 is a text file, 20 times over:
// every start must fail with the same reason, which names the file and the
// loader's own words. dlerror's state is per thread, so a reason read in a
// second cgo call (the goroutine moved to another thread in between) came
// back empty or another start's.
func TestDriverStartRace(t *testing.T) {
	_, text, _ := fakeDrivers(t)
	p := filepath.Join(text, driverName)
	f := &finder{o: dl{}, driver: []string{filepath.Join(t.TempDir(), driverName), p}}
	for round := range 20 {
		errs := make([]string, 200)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() {
				if _, err := loadDriver(f); err != nil {
					errs[i] = err.Error()
				}
			})
		}
		wg.Wait()
		if !strings.Contains(errs[0], p+": invalid ELF header") {
			t.Fatalf("round %d: reason %q, want %s's invalid ELF header named", round, errs[0], p)
		}
		for i, e := range errs {
			if e != errs[0] {
				t.Fatalf("round %d: start %d failed with %q, start 0 with %q", round, i, e, errs[0])
			}
		}
	}
}

// TestStandInValues checks ORTHONET_CUDA_STANDIN: 1 is the host model, 0
// or unset the NVIDIA libraries, and anything else an error naming the
// variable and its value, from New and Probe alike.
func TestStandInValues(t *testing.T) {
	for _, c := range []struct {
		value string
		model bool
		fails bool
	}{
		{"", false, false}, {"0", false, false}, {"1", true, false},
		{"2", false, true}, {"yes", false, true}, {"true", false, true}, {" 1", false, true}, {"01", false, true},
	} {
		t.Run(c.value, func(t *testing.T) {
			t.Setenv(StandInEnv, c.value)
			o, err := systemOpener()
			if c.fails {
				want := StandInEnv + "=" + `"` + c.value + `"`
				for name, err := range map[string]error{"systemOpener": err, "New": newErr(), "Probe": probeErr()} {
					if err == nil || !errors.Is(err, ErrStandIn) || !strings.Contains(err.Error(), want) {
						t.Errorf("%s with %s: %v, want ErrStandIn naming %s", name, want, err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, isModel := o.(model); isModel != c.model {
				t.Errorf("%s=%q: the host model %v, want %v", StandInEnv, c.value, isModel, c.model)
			}
		})
	}
}

func newErr() error {
	b, err := New(Options{})
	if err == nil {
		return errors.Join(errors.New("New started"), b.Close())
	}
	return err
}

func probeErr() error {
	_, err := Probe()
	return err
}

// TestDriverCandidates checks the order in which libcuda.so.1 is looked
// for: the loader's path first, then /usr/local/nvidia/lib64, then the
// system's library folders.
func TestDriverCandidates(t *testing.T) {
	got := newFinder(model{}).driver
	want := []string{driverName, "/usr/local/nvidia/lib64/" + driverName}
	if len(got) < 5 || !slices.Equal(got[:2], want) {
		t.Fatalf("candidates %v, want %v first", got, want)
	}
	for _, d := range []string{"/usr/lib64", "/lib64"} {
		if !slices.Contains(got, filepath.Join(d, driverName)) {
			t.Errorf("candidates %v lack %s", got, d)
		}
	}
}
