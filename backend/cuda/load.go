//go:build cgo

package cuda

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include "driver.h"

// on_dlopen opens path; where that fails it copies dlerror's reason into
// err in the same call: dlerror's state is per thread, and a goroutine may
// move to another OS thread between two cgo calls.
static void *on_dlopen(const char *path, char *err, size_t cap) {
  void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (h == NULL) {
    const char *e = dlerror();
    snprintf(err, cap, "%s", e != NULL ? e : "dlopen failed and gave no reason");
  }
  return h;
}
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
	"runtime"
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
	var reason [1024]C.char
	h := C.on_dlopen(p, &reason[0], C.size_t(len(reason)))
	if h == nil {
		return nil, errors.New(C.GoString(&reason[0]))
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

// systemOpener returns the host model where StandInEnv is 1, else the
// dynamic loader; any other value than "", 0 or 1 is an error naming it.
func systemOpener() (opener, error) {
	switch v := os.Getenv(StandInEnv); v {
	case "1":
		return model{}, nil
	case "", "0":
		return dl{}, nil
	default:
		return nil, standInError{v}
	}
}

// standInError is the error of StandInEnv's value v.
type standInError struct{ v string }

func (e standInError) Error() string {
	return fmt.Sprintf("cuda: %s=%q: want 1 (the host model of the device), or 0 or unset (the NVIDIA libraries)", StandInEnv, e.v)
}

func (e standInError) Is(target error) bool { return target == ErrStandIn }

// driverFolders are where libcuda.so.1 is looked for after the loader's
// own path: the folder where container runtimes mount the driver, and the
// system's library folders (a driver whose folder the loader's cache lacks).
func driverFolders() []string {
	dirs := []string{"/usr/local/nvidia/lib64", "/usr/local/nvidia/lib"}
	if m := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]; m != "" {
		dirs = append(dirs, "/usr/lib/"+m, "/lib/"+m)
	}
	return append(dirs, "/usr/lib64", "/lib64", "/usr/lib", "/lib", "/usr/lib/wsl/lib")
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
// gets the dependency opened first, from the library's own folder, then
// from the search path's.
type finder struct {
	o      opener
	dirs   []string // the search path
	driver []string // libcuda.so.1's candidates, in order
}

func newFinder(o opener) *finder {
	f := &finder{o: o, dirs: searchPath(), driver: []string{driverName}}
	for _, d := range driverFolders() {
		f.driver = append(f.driver, filepath.Join(d, driverName))
	}
	return f
}

// driverName is the soname of the NVIDIA driver's library.
const driverName = "libcuda.so.1"

// missing reports whether err is dlopen's error for a path that is not
// there at all (rather than there but unloadable).
func missing(path string, err error) bool {
	return strings.HasPrefix(err.Error(), path+": cannot open shared object file: No such file")
}

// find opens the first of names that it finds.
func (f *finder) find(names ...string) (*library, error) {
	var errs []string
	for _, n := range names {
		for _, p := range append([]string{n}, f.paths(n)...) {
			l, err := f.openWithDeps(p, 8)
			if err == nil {
				return l, nil
			}
			if !missing(p, err) {
				errs = append(errs, err.Error()) // it is there but does not load
			}
		}
	}
	where := "the loader's path"
	if len(f.dirs) > 0 {
		where += ", " + strings.Join(f.dirs, ", ")
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s found but does not load: %s (searched %s)", strings.Join(names, " or "), strings.Join(errs, "; "), where)
	}
	return nil, fmt.Errorf("%s not found (searched %s)", strings.Join(names, " or "), where)
}

func (f *finder) paths(name string) []string {
	out := make([]string, len(f.dirs))
	for i, d := range f.dirs {
		out[i] = filepath.Join(d, name)
	}
	return out
}

// openWithDeps opens p; where the loader names a missing dependency
// ("libX.so.N: cannot open shared object file"), it opens that from p's
// own folder first (where a package keeps the versions that go together:
// an older libnvJitLink elsewhere on the search path lacks the symbols a
// newer cuSOLVER needs), then from the search path, and tries again, at
// most depth times.
func (f *finder) openWithDeps(p string, depth int) (*library, error) {
	l, err := f.o.open(p)
	if err == nil || depth == 0 {
		return l, err
	}
	dep, _, ok := strings.Cut(err.Error(), ": cannot open shared object file")
	if !ok || strings.Contains(dep, "/") || dep == filepath.Base(p) {
		return nil, err
	}
	var cands []string
	if strings.Contains(p, "/") {
		cands = append(cands, filepath.Join(filepath.Dir(p), dep))
	}
	for _, q := range f.paths(dep) {
		if !slices.Contains(cands, q) {
			cands = append(cands, q)
		}
	}
	for _, q := range cands {
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

// olderNames maps a name of cuapi.h's list to the name that libraries
// before it exported for the same function (same parameters and meaning),
// tried where the first is missing: CUDA 13's headers declare
// cuEventElapsedTime_v2 alone, older drivers export cuEventElapsedTime alone.
var olderNames = map[string]string{"cuEventElapsedTime_v2": "cuEventElapsedTime"}

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
		if old, ok := olderNames[name]; ok && f == nil {
			f = o.sym(l, old)
		}
		if f == nil {
			return fmt.Errorf("%s has no function %s (too old a version?)", l.path, name)
		}
		C.on_api_set(a.t, C.int(i), f)
	}
	return nil
}

// fn returns the address the table holds for the function of that name in
// cuapi.h's list, or nil.
func (a *api) fn(name string) unsafe.Pointer {
	for i := range int(C.on_api_count()) {
		var li C.int
		if C.GoString(C.on_api_name(C.int(i), &li)) == name {
			return C.on_api_get(a.t, C.int(i))
		}
	}
	return nil
}

// loadedFrom names l's file for messages: its path where the loader
// found it by soname and can say in which folder, else as opened.
func loadedFrom(o opener, l *library) string {
	if strings.Contains(l.path, "/") {
		return l.path
	}
	if d := o.folder(l); d != "" {
		return filepath.Join(d, l.path)
	}
	return l.path
}

func newAPI() *api {
	return &api{t: new(C.on_api)}
}

// loadDriver opens the NVIDIA driver's library, libcuda.so.1: through the
// loader's own path, then from the driver folders.
func loadDriver(f *finder) (*api, error) {
	a := newAPI()
	_, a.model = f.o.(model)
	var l *library
	var broken []string // found but unloadable: the path and dlerror's reason
	for _, p := range f.driver {
		var err error
		if l, err = f.o.open(p); err == nil {
			break
		}
		msg := err.Error()
		if missing(p, err) {
			continue
		}
		if !strings.Contains(msg, p) {
			msg = p + ": " + msg
		}
		if !slices.Contains(broken, msg) {
			broken = append(broken, msg)
		}
	}
	if l == nil && len(broken) > 0 {
		return nil, fmt.Errorf("cuda: the NVIDIA driver's library (%s) was found but does not load: %s", driverName, strings.Join(broken, "; "))
	}
	if l == nil {
		return nil, fmt.Errorf("cuda: the NVIDIA driver (%s) is not installed: not in the loader's path nor in %s", driverName, strings.Join(f.folders(f.driver), ", "))
	}
	if err := a.resolve(f.o, C.ON_LIB_CUDA, l); err != nil {
		return nil, fmt.Errorf("cuda: the NVIDIA driver: %w", err)
	}
	var v C.int
	if err := a.result("reading the driver's version", C.on_driver_version(a.t, &v)); err != nil {
		return nil, err
	}
	a.driver = int(v)
	a.where = append(a.where, fmt.Sprintf("driver CUDA %s (%s)", cudaVersion(a.driver), loadedFrom(f.o, l)))
	return a, nil
}

// folders returns the folders of the paths among paths (not the sonames).
func (f *finder) folders(paths []string) []string {
	var out []string
	for _, p := range paths {
		if strings.Contains(p, "/") {
			out = append(out, filepath.Dir(p))
		}
	}
	return out
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
	a.where = append(a.where, fmt.Sprintf("NVRTC %d.%d (%s, builtins %s)", maj, min, loadedFrom(f.o, l), builtins))
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
	a.where = append(a.where, "cuBLAS "+loadedFrom(f.o, l), "cuSOLVER "+loadedFrom(f.o, s))
	return nil
}

// wheelHint names the pip packages of NVIDIA's libraries for CUDA 13 and
// 12, for the error of a machine that lacks them.
const wheelHint = "for example pip install nvidia-cuda-nvrtc nvidia-cublas nvidia-cusolver nvidia-nvjitlink for CUDA 13, " +
	"or nvidia-cuda-nvrtc-cu12 nvidia-cublas-cu12 nvidia-cusolver-cu12 nvidia-nvjitlink-cu12 for CUDA 12"

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
		where := len(a.where)
		err := a.loadNVRTC(f, m)
		if err == nil {
			err = a.loadBLAS(f, m)
		}
		if err == nil {
			a.cuda = m
			return a, nil
		}
		a.where = a.where[:where] // what CUDA m loaded before it failed is not used
		errs = append(errs, err.Error())
	}
	return nil, fmt.Errorf("cuda: no CUDA 12 or 13 libraries to go with the driver (CUDA %s): %s; install them (%s) or set CUDA_HOME",
		cudaVersion(a.driver), strings.Join(errs, "; "), wheelHint)
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
