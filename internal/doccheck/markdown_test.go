package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the module's root, relative to this package's folder (where go
// test runs a package's tests).
const root = "../.."

// docFiles returns the documentation files the tests check, relative to the
// module root: README.md, CHANGELOG.md, docs/*.md and docs/extending/*.md.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "CHANGELOG.md"}
	var more []string
	for _, pattern := range []string{filepath.Join(root, "docs", "*.md"), filepath.Join(root, "docs", "extending", "*.md")} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		more = append(more, m...)
	}
	for _, f := range more {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, filepath.ToSlash(rel))
	}
	var have []string
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(root, f)); err == nil {
			have = append(have, f)
		} else if f == "README.md" {
			t.Fatal(err)
		}
	}
	return have
}

// block is a fenced code block of a Markdown file.
type block struct {
	lang string // the word after the opening fence
	line int    // the line of the block's first line of code, from 1
	code string
}

var fence = regexp.MustCompile("^ {0,3}(```+|~~~+)\\s*([A-Za-z0-9_+-]*)")

// parseMarkdown returns the fenced code blocks of text, and text with every
// fenced block's lines blanked (newlines kept, so offsets keep their lines).
func parseMarkdown(text string) (blocks []block, prose string) {
	lines := strings.SplitAfter(text, "\n")
	var out strings.Builder
	var cur *block
	var closer string
	for i, l := range lines {
		if cur == nil {
			if m := fence.FindStringSubmatch(l); m != nil {
				cur = &block{lang: m[2], line: i + 2}
				closer = m[1]
				out.WriteString("\n")
				continue
			}
			out.WriteString(l)
			continue
		}
		if t := strings.TrimSpace(l); strings.HasPrefix(t, closer) && strings.Trim(t, closer[:1]) == "" {
			blocks = append(blocks, *cur)
			cur = nil
		} else {
			cur.code += l
		}
		if strings.HasSuffix(l, "\n") {
			out.WriteString("\n")
		}
	}
	if cur != nil { // an unclosed fence runs to the end, as GitHub renders it
		blocks = append(blocks, *cur)
	}
	return blocks, out.String()
}

var codeSpan = regexp.MustCompile("(`+)[^`]*?(`+)")

// blankCode replaces the inline code spans of prose with spaces (newlines
// kept), so that a link shown as code is not taken for a link.
func blankCode(prose string) string {
	return codeSpan.ReplaceAllStringFunc(prose, func(s string) string {
		return strings.Map(func(r rune) rune {
			if r == '\n' {
				return r
			}
			return ' '
		}, s)
	})
}

var (
	heading    = regexp.MustCompile(`(?m)^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$`)
	inlineLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag    = regexp.MustCompile(`<[^>]+>`)
	htmlAnchor = regexp.MustCompile(`<a\s[^>]*(?:id|name)="([^"]+)"`)
)

// anchors returns the #anchors GitHub makes for the headings of a Markdown
// text (and its explicit <a id> or <a name> anchors).
func anchors(text string) map[string]bool {
	_, prose := parseMarkdown(text)
	seen := map[string]int{}
	out := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(prose, -1) {
		s := slug(m[2])
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	for _, m := range htmlAnchor.FindAllStringSubmatch(prose, -1) {
		out[m[1]] = true
	}
	return out
}

// slug is GitHub's anchor for a heading's Markdown text: the rendered text
// in lower case, without any character but letters, marks, digits, '_',
// '-' and spaces, each space a '-'.
func slug(md string) string {
	text := inlineLink.ReplaceAllStringFunc(md, func(s string) string {
		if strings.HasPrefix(s, "!") {
			return ""
		}
		return inlineLink.FindStringSubmatch(s)[1]
	})
	text = htmlTag.ReplaceAllString(text, "")
	text = strings.NewReplacer("`", "", "**", "", "*", "").Replace(text)
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestSlug checks slug against anchors GitHub made for headings of this
// repository's documents and of the Markdown guide's examples.
func TestSlug(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"Data-parallel (MPI)", "data-parallel-mpi"},
		{"BLAS: OpenBLAS or pure Go", "blas-openblas-or-pure-go"},
		{"`train eval`", "train-eval"},
		{"Compiled programs: the executor", "compiled-programs-the-executor"},
		{"The paper's problems", "the-papers-problems"},
		{"Inside a Gorgonia model, and on a device", "inside-a-gorgonia-model-and-on-a-device"},
		{"RSDM-P, r = 300", "rsdm-p-r--300"},
		{"A **bold** [link](x.md) and `code_name`", "a-bold-link-and-code_name"},
		{"‖WᵀW − I‖ drift", "wᵀw--i-drift"},
		{"Ünïcödé 2", "ünïcödé-2"},
	} {
		if got := slug(c.heading); got != c.want {
			t.Errorf("slug(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
	got := anchors("# A\n## A\n```\n# not a heading\n```\n### A\n<a id=\"x\"></a>\n")
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"a", "a-1", "a-2", "x"}; !slices.Equal(keys, want) {
		t.Errorf("anchors = %v, want %v (duplicates numbered, code blocks skipped)", keys, want)
	}
}
