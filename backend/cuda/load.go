//go:build cgo

package cuda

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include "driver.h"

static void *on_dlopen(const char *path) { return dlopen(path, RTLD_NOW | RTLD_GLOBAL); }
static const char *on_dlerror(void) { return dlerror(); }
static void *on_dlsym(void *h, const char *name) { return dlsym(h, name); }
// on_dlpath returns the path a library was loaded from.
static const char *on_dlpath(void *h) {
  struct link_map *m = NULL;
  if (dlinfo(h, RTLD_DI_LINKMAP, &m) != 0 || m == NULL) return NULL;
  return m->l_name;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/orthonet/orthonet/internal/cudak/standin"
)

// library is an opened shared library (or one of the host model's).
type library struct {
	path  string         // as opened: a soname or a path
	dl    unsafe.Pointer // dlopen's handle
	model standin.Lib    // the host model's, when dl is nil
}

// opener opens shared libraries and resolves their functions: the
// system's dynamic loader, or the host model.
type opener interface {
	open(path string) (*library, error)
	sym(l *library, name string) unsafe.Pointer
	// folder returns the folder l was loaded from, or "" when unknown.
	folder(l *library) string
}

// dl opens libraries with dlopen.
type dl struct{}

func (dl) open(path string) (*library, error) {
	p := C.CString(path)
	defer C.free(unsafe.Pointer(p))
	h := C.on_dlopen(p)
	if h == nil {
		return nil, errors.New(C.GoString(C.on_dlerror()))
	}
	return &library{path: path, dl: h}, nil
}

func (dl) sym(l *library, name string) unsafe.Pointer {
	n := C.CString(name)
	defer C.free(unsafe.Pointer(n))
	return C.on_dlsym(l.dl, n)
}

func (dl) folder(l *library) string {
	if p := C.on_dlpath(l.dl); p != nil {
		if s := C.GoString(p); strings.Contains(s, "/") {
			return filepath.Dir(s)
		}
	}
	return ""
}

// model opens the host model's libraries.
type model struct{}

func (model) open(path string) (*library, error) {
	m, err := standin.Open(path)
	if err != nil {
		return nil, err
	}
	return &library{path: path, model: m}, nil
}

func (model) sym(l *library, name string) unsafe.Pointer { return standin.Sym(l.model, name) }

func (model) folder(l *library) string {
	if strings.Contains(l.path, "/") {
		return filepath.Dir(l.path)
	}
	return ""
}

// systemOpener returns the host model where StandInEnv asks for it, else
// the dynamic loader.
func systemOpener() opener {
	if os.Getenv(StandInEnv) == "1" {
		return model{}
	}
	return dl{}
}

// searchPath is where libraries are looked for besides the loader's own
// path, in order: the CUDA toolkit named by CUDA_HOME or CUDA_PATH, the
// usual toolkit folder, a conda environment, and the folders of NVIDIA's
// Python wheels (nvidia/*/lib under every site-packages folder found from
// VIRTUAL_ENV, CONDA_PREFIX, PYTHONPATH, the Pythons on PATH, the user's
// and the system's).
func searchPath() []string {
	var dirs []string
	for _, v := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if d := os.Getenv(v); d != "" {
			dirs = append(dirs, filepath.Join(d, "lib64"), filepath.Join(d, "lib"))
		}
	}
	dirs = append(dirs, "/usr/local/cuda/lib64")
	if d := os.Getenv("CONDA_PREFIX"); d != "" {
		dirs = append(dirs, filepath.Join(d, "lib"))
	}
	var sites []string
	for _, v := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if d := os.Getenv(v); d != "" {
			sites = append(sites, filepath.Join(d, "lib", "python3*", "site-packages"))
		}
	}
	sites = append(sites, filepath.SplitList(os.Getenv("PYTHONPATH"))...)
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if d != "" {
			sites = append(sites, filepath.Join(d, "..", "lib", "python3*", "site-packages"))
		}
	}
	if h, err := os.UserHomeDir(); err == nil {
		sites = append(sites, filepath.Join(h, ".local", "lib", "python3*", "site-packages"))
	}
	sites = append(sites, "/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages",
		"/usr/lib/python3/dist-packages", "/opt/conda/lib/python3*/site-packages")
	for _, s := range sites {
		if s == "" {
			continue
		}
		found, _ := filepath.Glob(filepath.Join(s, "nvidia", "*", "lib"))
		dirs = append(dirs, found...)
	}
	var out []string
	seen := map[string]bool{}
	for _, d := range dirs {
		d = filepath.Clean(d)
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// finder opens libraries by soname, first through the loader's own path,
// then in the search path's folders; a library whose dependency is missing
// gets the dependency opened from the same folders first.
type finder struct {
	o    opener
	dirs []string
}

func newFinder(o opener) *finder { return &finder{o: o, dirs: searchPath()} }

// find opens the first of names that it finds.
func (f *finder) find(names ...string) (*library, error) {
	var errs []string
	for _, n := range names {
		for _, p := range append([]string{n}, f.paths(n)...) {
			l, err := f.openWithDeps(p, 8)
			if err == nil {
				return l, nil
			}
			if !strings.Contains(err.Error(), "No such file") || !strings.Contains(err.Error(), filepath.Base(p)) {
				errs = append(errs, err.Error()) // it is there but does not load
			}
		}
	}
	where := "the loader's path"
	if len(f.dirs) > 0 {
		where += ", " + strings.Join(f.dirs, ", ")
	}
	msg := fmt.Sprintf("%s not found (searched %s)", strings.Join(names, " or "), where)
	if len(errs) > 0 {
		msg += "; " + strings.Join(errs, "; ")
	}
	return nil, errors.New(msg)
}

func (f *finder) paths(name string) []string {
	out := make([]string, len(f.dirs))
	for i, d := range f.dirs {
		out[i] = filepath.Join(d, name)
	}
	return out
}

// openWithDeps opens p; where the loader names a missing dependency
// ("libX.so.N: cannot open shared object file"), it opens that from the
// search path and tries again, at most depth times.
func (f *finder) openWithDeps(p string, depth int) (*library, error) {
	l, err := f.o.open(p)
	if err == nil || depth == 0 {
		return l, err
	}
	dep, _, ok := strings.Cut(err.Error(), ": cannot open shared object file")
	if !ok || strings.Contains(dep, "/") || dep == filepath.Base(p) {
		return nil, err
	}
	for _, q := range f.paths(dep) {
		if _, derr := f.openWithDeps(q, depth-1); derr == nil {
			return f.openWithDeps(p, depth-1)
		}
	}
	return nil, err
}

// api is the function table, resolved from the loaded libraries.
type api struct {
	t      *C.on_api // in Go memory (the C calls read it, never keep it), freed with the api
	libs   [C.ON_LIBS]*library
	driver int      // cuDriverGetVersion
	nvrtc  [2]int   // NVRTC's major and minor version
	cuda   int      // the CUDA major version of the libraries
	model  bool     // the host model stands in for the NVIDIA libraries
	where  []string // what was loaded from where, for messages
}

// resolve fills the table's functions of library lib from l.
func (a *api) resolve(o opener, lib int, l *library) error {
	a.libs[lib] = l
	for i := range int(C.on_api_count()) {
		var li C.int
		name := C.GoString(C.on_api_name(C.int(i), &li))
		if int(li) != lib {
			continue
		}
		f := o.sym(l, name)
		if f == nil {
			return fmt.Errorf("%s has no function %s (too old a version?)", l.path, name)
		}
		C.on_api_set(a.t, C.int(i), f)
	}
	return nil
}

func newAPI() *api {
	return &api{t: new(C.on_api)}
}

// loadDriver opens the NVIDIA driver's library, libcuda.so.1.
func loadDriver(f *finder) (*api, error) {
	a := newAPI()
	_, a.model = f.o.(model)
	l, err := f.o.open("libcuda.so.1")
	if err != nil {
		return nil, fmt.Errorf("cuda: the NVIDIA driver (libcuda.so.1) is not installed or not in the loader's path: %v", err)
	}
	if err := a.resolve(f.o, C.ON_LIB_CUDA, l); err != nil {
		return nil, fmt.Errorf("cuda: the NVIDIA driver: %w", err)
	}
	var v C.int
	if err := a.result("reading the driver's version", C.on_driver_version(a.t, &v)); err != nil {
		return nil, err
	}
	a.driver = int(v)
	a.where = append(a.where, fmt.Sprintf("driver CUDA %s", cudaVersion(a.driver)))
	return a, nil
}

// cudaVersion writes a driver version (12020) as CUDA writes it (12.2).
func cudaVersion(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }

// cudaMajors are the CUDA versions whose libraries the backend loads,
// newest first.
var cudaMajors = []int{13, 12}

// nvrtcNames returns NVRTC's sonames for CUDA major m.
func nvrtcNames(m int) []string {
	if m == 11 {
		return []string{"libnvrtc.so.11.2"}
	}
	return []string{"libnvrtc.so." + strconv.Itoa(m)}
}

// cusolverName returns cuSOLVER's soname in CUDA major m (its own version
// is one behind: libcusolver.so.11 in CUDA 12).
func cusolverName(m int) string { return "libcusolver.so." + strconv.Itoa(m-1) }

// loadNVRTC opens NVRTC of CUDA major m and the builtins library it needs,
// from NVRTC's own folder first (NVRTC opens it by soname alone, which
// fails where the toolkit is not in the loader's path).
func (a *api) loadNVRTC(f *finder, m int) error {
	l, err := f.find(nvrtcNames(m)...)
	if err != nil {
		return fmt.Errorf("NVRTC %d: %w", m, err)
	}
	if err := a.resolve(f.o, C.ON_LIB_NVRTC, l); err != nil {
		return fmt.Errorf("NVRTC %d: %w", m, err)
	}
	var maj, min C.int
	if r := C.on_nvrtc_version(a.t, &maj, &min); r != 0 {
		return fmt.Errorf("NVRTC %d: nvrtcVersion failed (%d)", m, int(r))
	}
	a.nvrtc = [2]int{int(maj), int(min)}
	builtins := fmt.Sprintf("libnvrtc-builtins.so.%d.%d", maj, min)
	if dir := f.o.folder(l); dir != "" {
		if _, err := f.o.open(filepath.Join(dir, builtins)); err == nil {
			builtins = filepath.Join(dir, builtins)
		}
	}
	a.where = append(a.where, fmt.Sprintf("NVRTC %d.%d (%s, builtins %s)", maj, min, l.path, builtins))
	return nil
}

// loadBLAS opens cuBLAS and cuSOLVER of CUDA major m.
func (a *api) loadBLAS(f *finder, m int) error {
	l, err := f.find("libcublas.so." + strconv.Itoa(m))
	if err != nil {
		return fmt.Errorf("cuBLAS %d: %w", m, err)
	}
	if err := a.resolve(f.o, C.ON_LIB_CUBLAS, l); err != nil {
		return fmt.Errorf("cuBLAS %d: %w", m, err)
	}
	s, err := f.find(cusolverName(m))
	if err != nil {
		return fmt.Errorf("cuSOLVER (CUDA %d): %w", m, err)
	}
	if err := a.resolve(f.o, C.ON_LIB_CUSOLVER, s); err != nil {
		return fmt.Errorf("cuSOLVER (CUDA %d): %w", m, err)
	}
	a.where = append(a.where, "cuBLAS "+l.path, "cuSOLVER "+s.path)
	return nil
}

// load opens the driver, then NVRTC, cuBLAS and cuSOLVER of the newest
// CUDA major version that the driver runs and that is installed whole.
func load(o opener) (*api, error) {
	f := newFinder(o)
	a, err := loadDriver(f)
	if err != nil {
		return nil, err
	}
	var errs []string
	for _, m := range cudaMajors {
		if m > a.driver/1000 {
			errs = append(errs, fmt.Sprintf("CUDA %d: the driver runs CUDA %s", m, cudaVersion(a.driver)))
			continue
		}
		err := a.loadNVRTC(f, m)
		if err == nil {
			err = a.loadBLAS(f, m)
		}
		if err == nil {
			a.cuda = m
			return a, nil
		}
		errs = append(errs, err.Error())
	}
	return nil, fmt.Errorf("cuda: no CUDA 12 or 13 libraries to go with the driver (CUDA %s): %s; install them (for example pip install nvidia-cuda-nvrtc-cu12 nvidia-cublas-cu12 nvidia-cusolver-cu12) or set CUDA_HOME",
		cudaVersion(a.driver), strings.Join(errs, "; "))
}

// loadCompiler opens NVRTC alone (any of CUDA 13, 12 or 11), for compiling
// without a device.
func loadCompiler(o opener) (*api, error) {
	f := newFinder(o)
	a := newAPI()
	_, a.model = o.(model)
	var errs []string
	for _, m := range append(slices.Clone(cudaMajors), 11) {
		err := a.loadNVRTC(f, m)
		if err == nil {
			return a, nil
		}
		errs = append(errs, err.Error())
	}
	return nil, fmt.Errorf("cuda: %s", strings.Join(errs, "; "))
}

// result turns a call's return code into an error naming what failed.
func (a *api) result(what string, r C.int) error {
	if r == 0 {
		return nil
	}
	name := C.GoString(C.on_error_name(a.t, r))
	switch {
	case r >= 300000:
		return fmt.Errorf("cuda: %s: NVRTC: %s (%d)", what, name, int(r)-300000)
	case r >= 200000:
		return fmt.Errorf("cuda: %s: cuSOLVER status %d", what, int(r)-200000)
	case r >= 100000:
		return fmt.Errorf("cuda: %s: cuBLAS status %d", what, int(r)-100000)
	}
	return fmt.Errorf("cuda: %s: %s (%d)", what, name, int(r))
}
