package main

// The argument structs of kernels.cu's kernels, on both sides of a launch,
// from the tables of args_table.go, one per family file of package
// backend: in Go (backend/kernel_args.go) a struct per argument
// struct, its fields in order, which a kernel's Device method passes to
// Planner.Launch, and in internal/cudak/kernels.cu each struct's line,
// rewritten where it stands. The planner fills a struct as 64-bit words in
// the order of its fields, so the two sides must list the same fields in
// one order: written from one entry, they do.

import (
	"bytes"
	"fmt"
	"go/format"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// family is the argument structs of one family file of package backend.
type family struct {
	File    string // the family's file, from the module's root
	Structs []args
}

// args is one argument struct: its name in kernels.cu and its fields as C
// declarations (see families).
type args struct {
	Name   string
	Fields string
}

// decl is one declaration of an argument struct: a type and its names.
type decl struct {
	C, Go  string   // the names' type in C and in Go
	Names  []string // in C
	Length string   // an array's length, or ""
}

// goTypes are the Go types of the scalar C types a table may use; a
// pointer is an Operand, or with its name marked @ a uint64 (a device
// address), or marked ? either (any).
var goTypes = map[string]string{"i64": "int", "bool": "bool", "double": "float64", "u64": "uint64"}

// cTypes are the pointer types a table may use, besides the scalars.
var cTypes = map[string]bool{"T *": true, "const T *": true, "double *": true, "const double *": true,
	"int *": true, "const int *": true, "u64 *": true}

// marker ends a struct's line in kernels.cu: what the generator rewrites.
const marker = " // from backend/gen/args_table.go"

// parts returns the structs of fams that are parts of others (a name not
// ending in Args: a geometry), which a table may use as a field's type.
func parts(fams []family) map[string]bool {
	ps := map[string]bool{}
	for _, f := range fams {
		for _, a := range f.Structs {
			if !strings.HasSuffix(a.Name, "Args") {
				ps[a.Name] = true
			}
		}
	}
	return ps
}

// parse returns a struct's declarations, refusing a type not in goTypes,
// cTypes or parts, a name that is not an identifier, a pointer declaration
// of more than one name, and a name twice.
func parse(a args, parts map[string]bool) ([]decl, error) {
	var ds []decl
	seen := map[string]bool{}
	for _, part := range strings.Split(a.Fields, ";") {
		part = strings.TrimSpace(part)
		var typ, rest string
		if i := strings.LastIndex(part, "*"); i >= 0 {
			typ, rest = part[:i+1], part[i+1:] // "const T *src"
		} else if f := strings.Fields(part); len(f) > 0 {
			typ, rest = f[0], strings.TrimSpace(part[len(f[0]):]) // "i64 op, n"
		}
		names := strings.Split(rest, ",")
		d, err := declOf(a.Name, typ, names, parts)
		if err != nil {
			return nil, err
		}
		for _, n := range d.Names {
			if seen[n] {
				return nil, fmt.Errorf("%s: field %s twice", a.Name, n)
			}
			seen[n] = true
		}
		ds = append(ds, d)
	}
	return ds, nil
}

// declOf returns the declaration of names of type typ (a C type of the
// table, or a struct of parts), the names as the table gives them: marked
// @ or ?, or with an array's length ("shape[8]", the same for every name).
func declOf(name, typ string, names []string, parts map[string]bool) (decl, error) {
	typ = strings.Join(strings.Fields(strings.ReplaceAll(typ, "*", " *")), " ")
	d := decl{C: typ, Go: goTypes[typ]}
	if parts[typ] {
		d.Go = goName(typ)
	}
	mark, length := "", ""
	for i, n := range names {
		n = strings.TrimSpace(n)
		if len(n) > 0 && (n[0] == '@' || n[0] == '?') {
			n, mark = n[1:], n[:1]
		}
		m := identifier.FindStringSubmatch(n)
		if m == nil || i > 0 && m[2] != length {
			return decl{}, fmt.Errorf("%s: field name %q is not an identifier, or an array's length not its declaration's", name, n)
		}
		length = m[2]
		d.Names = append(d.Names, m[1])
	}
	if length != "" {
		if d.Go == "" || mark != "" {
			return decl{}, fmt.Errorf("%s: an array of %q, want of a scalar type", name, typ)
		}
		d.Length, d.Go = length, "["+length+"]"+d.Go
	}
	switch {
	case d.Go != "" && mark == "":
		if typ == "bool" {
			d.C = "i64"
		}
	case cTypes[typ] && len(d.Names) == 1:
		d.Go = map[string]string{"": "Operand", "@": "uint64", "?": "any"}[mark]
	case cTypes[typ]:
		return decl{}, fmt.Errorf("%s: a pointer declaration of more than one name (%s)", name, strings.Join(d.Names, ", "))
	default:
		return decl{}, fmt.Errorf("%s: type %q (or an address mark on a scalar) not one of the table's", name, typ)
	}
	return d, nil
}

// goName returns the Go name of an argument struct: its C name with its
// leading capitals in lower case (SGDArgs: sgdArgs).
func goName(c string) string {
	r := []rune(c)
	i := 0
	for i < len(r) && unicode.IsUpper(r[i]) && (i+1 == len(r) || i == 0 || unicode.IsUpper(r[i+1])) {
		r[i] = unicode.ToLower(r[i])
		i++
	}
	return string(r)
}

// goField returns the Go name of a field: its C name capitalized.
func goField(n string) string { return strings.ToUpper(n[:1]) + n[1:] }

// argsGoFile returns backend/kernel_args.go.
func argsGoFile(fams []family) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(header("args_table.go"))
	seen := map[string]bool{}
	for _, f := range fams {
		fmt.Fprintf(&b, "\n// The argument structs of %s's kernels.\n", f.File)
		for _, a := range f.Structs {
			if seen[a.Name] {
				return nil, fmt.Errorf("%s: struct %s twice", f.File, a.Name)
			}
			seen[a.Name] = true
			ds, err := parse(a, parts(fams))
			if err != nil {
				return nil, err
			}
			writeGo(&b, a.Name, ds)
		}
	}
	src, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("the generated Go does not parse: %w", err)
	}
	return src, nil
}

// writeGo writes the Go struct of the argument struct name, which a
// Device method passes to Planner.Launch whole.
func writeGo(b *bytes.Buffer, name string, ds []decl) {
	g := goName(name)
	fmt.Fprintf(b, "\n// %s are the fields of kernels.cu's %s, in order.\ntype %s struct {\n", g, name, g)
	for _, d := range ds {
		names := make([]string, len(d.Names))
		for i, n := range d.Names {
			names[i] = goField(n)
		}
		fmt.Fprintf(b, "\t%s %s\n", strings.Join(names, ", "), d.Go)
	}
	b.WriteString("}\n")
}

// cLine returns the line of kernels.cu that defines the struct: an
// argument struct a template on the element type T of the kernels that
// take it (an int32 kernel takes Args<int>), whether a field uses T or
// not; a part of others (a geometry) plain.
func cLine(a args, ds []decl) string {
	var b strings.Builder
	for _, d := range ds {
		sep := " "
		if strings.HasSuffix(d.C, "*") {
			sep = ""
		}
		names := slices.Clone(d.Names)
		for i := range names {
			if d.Length != "" {
				names[i] += "[" + d.Length + "]"
			}
		}
		fmt.Fprintf(&b, " %s%s%s;", d.C, sep, strings.Join(names, ", "))
	}
	line := "struct " + a.Name + " {" + b.String() + " };" + marker
	if strings.HasSuffix(a.Name, "Args") {
		line = "template <typename T> " + line
	}
	return line
}

// identifier matches a field's name (in C; capitalized, in Go), with an
// array's length.
var identifier = regexp.MustCompile(`^([A-Za-z_][A-Za-z_0-9]*)(?:\[([1-9][0-9]*)\])?$`)

// structLine matches a line that defines a struct in one line.
var structLine = regexp.MustCompile(`^(?:template <typename T> )?struct (\w+) \{.*\};.*$`)

// spliceArgs returns the CUDA source src with every table struct's line
// rewritten from the table; a struct of the tables that src does not
// define in one line, or defines twice, and a line marked as written from
// the tables whose struct they lack, are errors.
func spliceArgs(src string, fams []family) (string, error) {
	want := map[string]string{}
	for _, f := range fams {
		for _, a := range f.Structs {
			ds, err := parse(a, parts(fams))
			if err != nil {
				return "", err
			}
			want[a.Name] = cLine(a, ds)
		}
	}
	lines := strings.Split(src, "\n")
	found := map[string]int{}
	for i, l := range lines {
		m := structLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		w, ok := want[m[1]]
		if !ok {
			if strings.HasSuffix(l, marker) {
				return "", fmt.Errorf("line %d: struct %s marked as written from the tables, which lack it", i+1, m[1])
			}
			continue
		}
		found[m[1]]++
		lines[i] = w
	}
	for _, f := range fams {
		for _, a := range f.Structs {
			if found[a.Name] != 1 {
				return "", fmt.Errorf("struct %s (%s) defined in %d lines, want one", a.Name, f.File, found[a.Name])
			}
		}
	}
	return strings.Join(lines, "\n"), nil
}
