package doccheck

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/internal/foldertest"
)

var (
	mdLink  = regexp.MustCompile(`!?\[(?:[^\]]|\n)*?\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	refDef  = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*(\S+)`)
	htmlRef = regexp.MustCompile(`<(?:a|img)\s[^>]*(?:href|src)="([^"]+)"`)
)

// link is a link target found in a Markdown file.
type link struct {
	line   int
	target string
}

// links returns the targets of a Markdown text's inline links and images,
// reference definitions and HTML links, outside code blocks and spans.
func links(text string) []link {
	_, prose := parseMarkdown(text)
	prose = blankCode(prose)
	var out []link
	for _, re := range []*regexp.Regexp{mdLink, refDef, htmlRef} {
		for _, m := range re.FindAllStringSubmatchIndex(prose, -1) {
			out = append(out, link{line: 1 + strings.Count(prose[:m[0]], "\n"), target: prose[m[2]:m[3]]})
		}
	}
	return out
}

// checker resolves the relative links of the files under a root folder.
type checker struct {
	root    string
	tracked map[string]bool // files git would commit, and their folders; nil: every file on disk counts
	anchors map[string]map[string]bool
}

// newChecker makes a checker of the files under root. When root is in a
// git work tree, a link must reach a file that git tracks or would add (a
// link to an ignored file, such as a build output, is dead on GitHub).
func newChecker(root string) (*checker, error) {
	c := &checker{root: root, anchors: map[string]map[string]bool{}}
	out, err := exec.Command("git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard", "--full-name").Output()
	if err != nil {
		return c, nil
	}
	top, err := exec.Command("git", "-C", root, "rev-parse", "--show-prefix").Output()
	if err != nil {
		return nil, fmt.Errorf("git rev-parse: %w", err)
	}
	prefix := strings.TrimSpace(string(top))
	c.tracked = map[string]bool{".": true}
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f, ok := strings.CutPrefix(f, prefix)
		if !ok {
			continue
		}
		if _, err := os.Lstat(filepath.Join(root, f)); err != nil {
			continue // deleted in the work tree, not yet in the index
		}
		for ; f != "." && !c.tracked[f]; f = path.Dir(f) {
			c.tracked[f] = true
		}
	}
	return c, nil
}

// check returns what is wrong with a link of file (a path relative to the
// root, with '/'), or "" when it resolves.
func (c *checker) check(file, target string) string {
	if target == "" {
		return "empty link"
	}
	if u, err := url.Parse(target); err == nil && u.Scheme != "" {
		return "" // http, https, mailto: not checked here
	}
	p, anchor, _ := strings.Cut(target, "#")
	p, err := url.PathUnescape(p)
	if err != nil {
		return fmt.Sprintf("bad escape in %q", target)
	}
	dest := file
	if p != "" {
		if strings.HasPrefix(p, "/") {
			dest = path.Clean(strings.TrimPrefix(p, "/"))
		} else {
			dest = path.Join(path.Dir(file), p)
		}
		if dest == ".." || strings.HasPrefix(dest, "../") {
			return fmt.Sprintf("%s leaves the repository", p)
		}
		info, err := os.Stat(filepath.Join(c.root, filepath.FromSlash(dest)))
		if err != nil {
			return fmt.Sprintf("%s does not exist", dest)
		}
		if c.tracked != nil && !c.tracked[dest] {
			return fmt.Sprintf("%s is not in git (ignored?): dead on GitHub", dest)
		}
		if info.IsDir() {
			dest = path.Join(dest, "README.md") // what GitHub shows for a folder
		}
	}
	if anchor == "" {
		return ""
	}
	if !strings.HasSuffix(dest, ".md") {
		return fmt.Sprintf("#%s in %s, which is not Markdown", anchor, dest)
	}
	a, ok := c.anchors[dest]
	if !ok {
		b, err := os.ReadFile(filepath.Join(c.root, filepath.FromSlash(dest)))
		if err != nil {
			return fmt.Sprintf("#%s: %v", anchor, err)
		}
		a = anchors(string(b))
		c.anchors[dest] = a
	}
	if !a[anchor] {
		return fmt.Sprintf("no heading of %s has the anchor #%s", dest, anchor)
	}
	return ""
}

// deadLinks returns file:line: problem for every link of the files (paths
// relative to c's root) that does not resolve.
func (c *checker) deadLinks(files []string) ([]string, int, error) {
	var dead []string
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(c.root, filepath.FromSlash(f)))
		if err != nil {
			return nil, 0, err
		}
		for _, l := range links(string(b)) {
			n++
			if why := c.check(f, l.target); why != "" {
				dead = append(dead, fmt.Sprintf("%s:%d: (%s) %s", f, l.line, l.target, why))
			}
		}
	}
	return dead, n, nil
}

// TestLinks fails on a relative link or #anchor of README.md, CHANGELOG.md
// or docs/*.md that does not resolve (anchors by GitHub's rules for
// headings).
func TestLinks(t *testing.T) {
	c, err := newChecker(root)
	if err != nil {
		t.Fatal(err)
	}
	dead, n, err := c.deadLinks(docFiles(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dead {
		t.Error(d)
	}
	t.Logf("%d links checked", n)
}

// TestLinkCheckerFindsDeadLinks runs the checker on a small tree of
// documents with a good and a dead link of every kind.
func TestLinkCheckerFindsDeadLinks(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"README.md": "# Top\n\n[ok](docs/a.md) [ok](docs/a.md#part-two) [ok](#top) ![ok](docs/img.png) [ok](docs/)\n" +
			"[dead file](docs/b.md) [dead anchor](docs/a.md#part-three)\n" +
			"`[in code](nowhere.md)` [web](https://example.com/x.md)\n\n```md\n[in a block](nowhere.md)\n```\n" +
			"[wrapped\ntext](docs/a.md#nope) <a href=\"docs/c.md\">x</a>\n[ref]: docs/d.md\n[out](../x.md)\n",
		"docs/a.md":    "# Part one\n\n## Part `two`\n\n[up](../README.md#top) [self](#part-one) [bad self](#part-one-1)\n",
		"docs/img.png": "",
	}
	foldertest.Write(t, dir, files)
	c := &checker{root: dir, anchors: map[string]map[string]bool{}} // not a git tree: files on disk count
	dead, n, err := c.deadLinks([]string{"README.md", "docs/a.md"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"README.md:4: (docs/b.md) docs/b.md does not exist",
		"README.md:4: (docs/a.md#part-three) no heading of docs/a.md has the anchor #part-three",
		"README.md:10: (docs/a.md#nope) no heading of docs/a.md has the anchor #nope",
		"README.md:13: (../x.md) ../x.md leaves the repository",
		"README.md:12: (docs/d.md) docs/d.md does not exist",
		"README.md:11: (docs/c.md) docs/c.md does not exist",
		"docs/a.md:5: (#part-one-1) no heading of docs/a.md has the anchor #part-one-1",
	}
	if strings.Join(dead, "\n") != strings.Join(want, "\n") {
		t.Errorf("dead links:\n%s\nwant:\n%s", strings.Join(dead, "\n"), strings.Join(want, "\n"))
	}
	if n != 15 {
		t.Errorf("%d links found, want 15 (none in code)", n)
	}
}

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
