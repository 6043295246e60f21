//go:build gpu

package cuda

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPTXCache checks that the compiled kernels are cached under the
// user's cache folder and read back from there, and that another
// architecture compiles to another file.
func TestPTXCache(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", dir)
	a, err := cachedPTX(8, 0)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "orthonet", "ptx", "*.ptx"))
	if len(files) != 1 {
		t.Fatalf("%d cached files after one compile, want 1", len(files))
	}
	// A cached file is what the next start reads: mark it and read it back.
	if err := os.WriteFile(files[0], []byte(a+"// cached\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := cachedPTX(8, 0)
	if err != nil || b != a+"// cached\n" {
		t.Fatalf("second call did not read the cache (err %v)", err)
	}
	if _, err := cachedPTX(9, 0); err != nil {
		t.Fatal(err)
	}
	files, _ = filepath.Glob(filepath.Join(dir, "orthonet", "ptx", "*.ptx"))
	if len(files) != 2 {
		t.Errorf("%d cached files after two architectures, want 2", len(files))
	}
}
