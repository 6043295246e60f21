package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/optim"
)

// flagList is a choice of train's flags that the docs spell as a list,
// `-optim rsdm|rgd|radam`.
var flagList = regexp.MustCompile("`-(optim|other|sampling) ([a-z0-9-]+(?:\\|[a-z0-9-]+)+)`")

// TestFlagListsNameTheTables checks that each list of `-optim`, `-other`
// or `-sampling` values in the docs names every rule or sampler of the
// tables train reads (optim.Rules, optim.Samplers), in their order: a
// built-in rule or sampler added to a table fails here until the docs
// name it. The extending checklists, which quote such lists, are left out.
func TestFlagListsNameTheTables(t *testing.T) {
	var samplers []string
	for _, s := range optim.Samplers {
		samplers = append(samplers, s.String())
	}
	want := map[string]string{
		"optim":    strings.Join(optim.RuleNames(true), "|"),
		"other":    strings.Join(optim.RuleNames(false), "|"),
		"sampling": strings.Join(samplers, "|"),
	}
	seen := 0
	for _, f := range docFiles(t) {
		if strings.HasPrefix(f, "docs/extending/") || f == "CHANGELOG.md" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range flagList.FindAllStringSubmatch(line, -1) {
				seen++
				if m[2] != want[m[1]] {
					t.Errorf("%s:%d: -%s %s, want the table's -%s %s", f, i+1, m[1], m[2], m[1], want[m[1]])
				}
			}
		}
	}
	if seen == 0 {
		t.Error("no list of -optim, -other or -sampling values in the docs: the pattern no longer matches them")
	}
}
