package doccheck

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docPath is a file named in backquotes in prose: a source, script or
// page of the module, with or without its folder.
var docPath = regexp.MustCompile("`([A-Za-z0-9_./-]+\\.(?:go|md|cu|cc|h|c|sh|py))`")

// placeholder is a name's part that stands for a value: NAME, YYYYMMDD.
var placeholder = regexp.MustCompile(`[A-Z]{3,}`)

// outside are the files the docs name that are not the module's, and
// whose they are.
var outside = map[string]string{
	"mpi.h":      "Open MPI's header",
	"api_gen.go": "gorgonia's source",
}

// TestDocPathsExist checks that every file the docs name in backquotes
// exists: a path with a folder from the module's root or the page's
// folder, a bare name somewhere in the module. A paragraph that starts
// "Followed on" is a dated record and CHANGELOG.md a history, which name
// files as they were; a name with a placeholder (NAME, YYYYMMDD, ...) is
// a pattern.
func TestDocPathsExist(t *testing.T) {
	names := moduleFiles(t)
	for _, f := range docFiles(t) {
		if f == "CHANGELOG.md" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range strings.Split(string(b), "\n\n") {
			if strings.HasPrefix(strings.TrimSpace(p), "Followed on") {
				continue
			}
			for _, m := range docPath.FindAllStringSubmatch(p, -1) {
				if name := m[1]; !docPathExists(names, f, name) {
					t.Errorf("%s names `%s`, which is not a file of the module (paragraph %q)", f, name, firstLine(p))
				}
			}
		}
	}
}

// docPathExists reports whether name, named in the page file, is a file
// of the module (names holds their paths and base names), a placeholder,
// or one of outside.
func docPathExists(names map[string]bool, file, name string) bool {
	switch {
	case outside[name] != "", strings.HasPrefix(name, "/"), strings.Contains(name, "..."), placeholder.MatchString(name):
		return true
	case !strings.Contains(name, "/"):
		return names[name]
	}
	return names[name] || names[path.Join(path.Dir(file), name)]
}

// moduleFiles returns the module's files (knownFiles) by path from the
// root and by base name.
func moduleFiles(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, f := range knownFiles(t) {
		names[f], names[path.Base(f)] = true, true
	}
	return names
}

// knownFiles returns the files git knows in the module (tracked, and
// untracked but not ignored) that the work tree holds, by path from the
// root; without git, it skips t.
func knownFiles(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("git ls-files in %s: %v (the module's files are those git knows)", root, err)
	}
	var files []string
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if _, err := os.Stat(filepath.Join(root, f)); err == nil { // not deleted in the work tree
			files = append(files, f)
		}
	}
	return files
}

// firstLine returns p's first line, for a message.
func firstLine(p string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(p), "\n")
	return l
}
