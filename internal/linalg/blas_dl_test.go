//go:build cgo && !openblas

package linalg

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// childEnv marks a run of the test binary that only reports its choice of
// BLAS (TestBackendChild): the choice is made once per process.
const childEnv = "ORTHONET_TEST_BLAS_CHILD"

// TestBackendChild prints Backend in a child process, after UseBLAS with
// the child's argument when it has one.
func TestBackendChild(t *testing.T) {
	v, ok := os.LookupEnv(childEnv)
	if !ok {
		t.Skip("run by TestBLASChoice")
	}
	if v != "" {
		if err := UseBLAS(v); err != nil {
			os.Stdout.WriteString("error: " + err.Error() + "\n")
		}
	}
	os.Stdout.WriteString("backend: " + Backend() + "\n")
}

// backendOf runs the test binary with ORTHONET_BLAS=env (unset where env is
// "-") and UseBLAS(use) and returns what Backend said.
func backendOf(t *testing.T, env, use string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBackendChild$", "-test.v")
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, BLASEnv+"=") })
	cmd.Env = append(cmd.Env, childEnv+"="+use)
	if env != "-" {
		cmd.Env = append(cmd.Env, BLASEnv+"="+env)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if s, ok := strings.CutPrefix(line, "backend: "); ok {
			return s
		}
	}
	t.Fatalf("no backend line in\n%s", out)
	return ""
}

// TestBLASChoice checks that ORTHONET_BLAS and UseBLAS choose the library,
// UseBLAS overriding the variable, and that a library that does not load
// falls back to gonum with a reason that names it.
func TestBLASChoice(t *testing.T) {
	if _, child := os.LookupEnv(childEnv); child {
		t.Skip("child")
	}
	for _, c := range []struct {
		env, use string
		want     []string // substrings of Backend
	}{
		{"gonum", "", []string{"gonum (pure Go): ORTHONET_BLAS=gonum"}},
		{"-", "gonum", []string{"gonum (pure Go): linalg.UseBLAS=gonum"}},
		{"openblas", "gonum", []string{"gonum (pure Go): linalg.UseBLAS=gonum"}},
		{"/nonexistent/libcblas.so", "", []string{"gonum (pure Go): ORTHONET_BLAS=/nonexistent/libcblas.so did not load: ", "/nonexistent/libcblas.so: cannot open shared object file"}},
		{"libm.so.6", "", []string{"gonum (pure Go): ORTHONET_BLAS=libm.so.6 did not load: libm.so.6 lacks cblas_sgemm, cblas_dgemm"}},
		{"fast", "", []string{`gonum (pure Go): ORTHONET_BLAS="fast": want auto, openblas, gonum, or a shared library's path`}},
	} {
		if got := backendOf(t, c.env, c.use); !containsAll(got, c.want) {
			t.Errorf("ORTHONET_BLAS=%s, UseBLAS(%q): Backend() = %q, want it to contain %q", c.env, c.use, got, c.want)
		}
	}
	// The default and the named libraries, where installed.
	if _, err := openSet([]string{"libopenblas.so.0"}); err == nil {
		for _, env := range []string{"-", "auto", "openblas"} {
			if got, want := backendOf(t, env, ""), "OpenBLAS (libopenblas.so.0, loaded at run time)"; got != want {
				t.Errorf("ORTHONET_BLAS=%s: Backend() = %q, want %q", env, got, want)
			}
		}
	}
	if _, err := openSet([]string{"libblas.so.3", "liblapack.so.3"}); err == nil {
		if got := backendOf(t, "libblas.so.3,liblapack.so.3", ""); !strings.Contains(got, "(libblas.so.3 + liblapack.so.3, loaded at run time)") {
			t.Errorf("ORTHONET_BLAS=libblas.so.3,liblapack.so.3: Backend() = %q", got)
		}
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestUseBLASLate checks that UseBLAS after the choice is refused unless it
// names what is in force, and that a bad name is refused at once.
func TestUseBLASLate(t *testing.T) {
	if _, child := os.LookupEnv(childEnv); child {
		t.Skip("child")
	}
	_ = Backend()
	if err := UseBLAS("gonum"); err == nil || !strings.Contains(err.Error(), "after the BLAS was chosen") {
		t.Errorf("UseBLAS after the first product: %v", err)
	}
	if err := UseBLAS("fast"); err == nil || !strings.Contains(err.Error(), "want auto, openblas, gonum") {
		t.Errorf("UseBLAS(\"fast\"): %v", err)
	}
}
