//go:build cgo

package cuda

import (
	"regexp"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/internal/cudak"
)

// TestX32KernelsDivideIn32Bits compiles the kernels to PTX with the real
// NVRTC (as TestKernelsCompileWithNVRTC finds it) and checks that each
// kernel's 32-bit instance (_x32) divides in 32 bits only, where its 64-bit
// instance divides in 64 bits: the instructions the planner's choice saves.
// Without NVRTC on the machine it skips, unless ORTHONET_REQUIRE_NVRTC=1.
func TestX32KernelsDivideIn32Bits(t *testing.T) {
	a := nvrtcOrSkip(t)
	img, err := compile(a, 75, false)
	if err != nil {
		t.Fatal(err)
	}
	ptx := string(img)
	// body returns the PTX of the kernel named name.
	body := func(name string) string {
		i := strings.Index(ptx, ".entry "+name+"(")
		if i < 0 {
			t.Fatalf("no kernel %s in the PTX", name)
		}
		rest := ptx[i+1:]
		if j := strings.Index(rest, ".entry "); j >= 0 {
			rest = rest[:j]
		}
		return rest
	}
	wide := regexp.MustCompile(`\b(div|rem)\.[su]64\b`)
	narrow := regexp.MustCompile(`\b(div|rem)\.[su]32\b`)
	names := regexp.MustCompile(`(?m)^KERNEL(?:_SYNC)?\((\w+)_x32_f32,`).FindAllStringSubmatch(cudak.Source, -1)
	if len(names) < 9 {
		t.Fatalf("found %d kernels with a 32-bit instance", len(names))
	}
	for _, n := range names {
		for _, sfx := range []string{"_f32", "_f64"} {
			x32, x64 := body(n[1]+"_x32"+sfx), body(n[1]+sfx)
			if m := wide.FindString(x32); m != "" || !narrow.MatchString(x32) {
				t.Errorf("%s_x32%s: divides with %q (want 32-bit division only)", n[1], sfx, m)
			}
			if !wide.MatchString(x64) {
				t.Errorf("%s%s: no 64-bit division", n[1], sfx)
			}
		}
	}
}
