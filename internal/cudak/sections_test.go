package cudak

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestSectionsFollowGoFiles checks that kernels.cu and package backend are
// laid out alike: every kernel stands in a section whose header names the
// backend files that launch it, and a section defines its kernels in the
// order those files first name them (a kernel's type, Check, Host and
// Device in one block there), so that a reader finds a kernel's Go and
// CUDA definitions in one order.
func TestSectionsFollowGoFiles(t *testing.T) {
	header := regexp.MustCompile(`^// ---- .*\((backend/\w+\.go(?:, backend/\w+\.go)*)\)`)
	kernel := regexp.MustCompile(`^KERNEL(?:_SYNC)?\((on_\w+?)(?:_x32)?_(?:f32|f64|i32),`)
	launched := regexp.MustCompile(`"(on_\w+)"`)
	var files []string // of the current section
	sections := map[string][]string{}
	var order []string
	for i, line := range strings.Split(Source, "\n") {
		if strings.HasPrefix(line, "// ---- ") {
			m := header.FindStringSubmatch(line)
			if m == nil {
				files = nil
				continue
			}
			files = strings.Split(m[1], ", ")
			order = append(order, m[1])
			continue
		}
		m := kernel.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if files == nil {
			t.Errorf("kernels.cu:%d: kernel %s in a section that names no backend file", i+1, m[1])
			continue
		}
		key := strings.Join(files, ", ")
		if !slices.Contains(sections[key], m[1]) {
			sections[key] = append(sections[key], m[1])
		}
	}
	if len(sections) == 0 {
		t.Fatal("kernels.cu has no section that names a backend file")
	}
	for _, key := range order {
		cu := sections[key]
		// A kernel along an axis comes as name and name_rows (a block per
		// row), which the Go names once (backend.alongAxis).
		var want []string
		for _, k := range cu {
			if base, ok := strings.CutSuffix(k, "_rows"); ok && slices.Contains(cu, base) {
				continue
			}
			want = append(want, k)
		}
		var got []string
		for _, f := range strings.Split(key, ", ") {
			src, err := os.ReadFile("../../" + f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range launched.FindAllStringSubmatch(string(src), -1) {
				if slices.Contains(want, m[1]) && !slices.Contains(got, m[1]) {
					got = append(got, m[1])
				}
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("kernels.cu's section of %s defines %v; the Go launches %v", key, want, got)
		}
	}
}
