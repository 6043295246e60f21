package doccheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxReadmeLines is the README's budget: a page, with the rest in docs/.
const maxReadmeLines = 250

// TestReadmeIsAPage checks that README.md stays a page: at most
// maxReadmeLines lines, the two set-up commands, and a link to every page of
// docs/ (so that none is an orphan).
func TestReadmeIsAPage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if n := strings.Count(text, "\n"); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, at most %d: move the detail into docs/", n, maxReadmeLines)
	}
	for _, cmd := range []string{"make train", "make test"} {
		if !strings.Contains(text, cmd) {
			t.Errorf("README.md does not say %q", cmd)
		}
	}
	linked := map[string]bool{}
	for _, l := range links(text) {
		p, _, _ := strings.Cut(l.target, "#")
		linked[strings.TrimPrefix(p, "./")] = true
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		if rel := "docs/" + filepath.Base(p); !linked[rel] {
			t.Errorf("README.md does not link %s", rel)
		}
	}
}
