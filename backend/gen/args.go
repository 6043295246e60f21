package main

// The argument structs of kernels.cu's kernels, on both sides of a launch,
// from the tables of args_table.go, one per family file of package
// backend: in Go (backend/kernel_args.go) a struct per argument
// struct, its fields in order, which a kernel's Device method passes to
// Planner.Launch, and in internal/cudak/kernels.cu each struct's line,
// rewritten where it stands. The planner fills a struct as 64-bit words in
// the order of its fields, so the two sides must list the same fields in
// one order: written from one entry, they do. The lengths an entry names
// are written on both sides too: a Go constant in kernel_args.go and the
// #define line of kernels.cu's macro.

import (
	"bytes"
	"fmt"
	"go/format"
	"go/token"
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

// length is a length of the tables' arrays, named on both sides.
type length struct {
	C   string // its macro in kernels.cu
	Go  string // its constant in package backend
	N   int
	Doc string // what it bounds, the constant's comment
}

// decl is one declaration of an argument struct: a type and its names.
type decl struct {
	C, Go  string   // the names' type in C and in Go
	Names  []string // in C
	Length string   // an array's length in C (a number or a macro), or ""
}

// goTypes are the Go types of the scalar C types a table may use; a
// pointer is an Operand, or with its name marked @ a uint64 (a device
// address), or marked ? either (any).
var goTypes = map[string]string{"i64": "int", "bool": "bool", "double": "float64", "u64": "uint64"}

// cTypes are the pointer types a table may use, besides the scalars.
var cTypes = map[string]bool{"T *": true, "const T *": true, "double *": true, "const double *": true,
	"int *": true, "const int *": true, "u64 *": true}

// marker ends a struct's or a length's line in kernels.cu: what the
// generator rewrites.
const marker = " // from backend/gen/args_table.go"

// scope is what a table's declarations may name besides the types of
// goTypes and cTypes.
type scope struct {
	parts   map[string]bool   // the structs that are parts of others
	lengths map[string]length // the named lengths, by macro
}

// scopeOf returns the scope of fams: its structs that are parts of others
// (a name not ending in Args: a geometry), which a table may use as a
// field's type, and the lengths lens, which it may use as an array's. It
// refuses a length that is not a macro's name in capitals, an exported Go
// name and a positive number, and a macro or constant twice.
func scopeOf(fams []family, lens []length) (scope, error) {
	sc := scope{parts: map[string]bool{}, lengths: map[string]length{}}
	for _, f := range fams {
		for _, a := range f.Structs {
			if !strings.HasSuffix(a.Name, "Args") {
				sc.parts[a.Name] = true
			}
		}
	}
	seen := map[string]bool{}
	for _, l := range lens {
		if !macroName.MatchString(l.C) || !token.IsIdentifier(l.Go) || !token.IsExported(l.Go) || l.N < 1 {
			return scope{}, fmt.Errorf("length %s (%s = %d): want a macro's name in capitals, an exported Go name and a positive number", l.C, l.Go, l.N)
		}
		for _, n := range []string{l.C, l.Go} {
			if seen[n] {
				return scope{}, fmt.Errorf("length %s twice", n)
			}
			seen[n] = true
		}
		sc.lengths[l.C] = l
	}
	return sc, nil
}

// macroName matches a named length's macro.
var macroName = regexp.MustCompile(`^[A-Z][A-Z_0-9]*$`)

// parse returns a struct's declarations, refusing a type not in goTypes,
// cTypes or the scope's parts, a name that is not an identifier, a length
// not a number or one of the scope's, a pointer declaration of more than
// one name, and a name twice.
func parse(a args, sc scope) ([]decl, error) {
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
		d, err := declOf(a.Name, typ, names, sc)
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
// table, or a struct of the scope's parts), the names as the table gives
// them: marked @ or ?, or with an array's length ("shape[8]",
// "in[CHAIN_INPUTS]", the same for every name).
func declOf(name, typ string, names []string, sc scope) (decl, error) {
	typ = strings.Join(strings.Fields(strings.ReplaceAll(typ, "*", " *")), " ")
	d := decl{C: typ, Go: goTypes[typ]}
	if sc.parts[typ] {
		d.Go = goName(typ)
	}
	mark, size := "", ""
	for i, n := range names {
		n = strings.TrimSpace(n)
		if len(n) > 0 && (n[0] == '@' || n[0] == '?') {
			n, mark = n[1:], n[:1]
		}
		m := identifier.FindStringSubmatch(n)
		if m == nil || i > 0 && m[2] != size {
			return decl{}, fmt.Errorf("%s: field name %q is not an identifier, or an array's length not its declaration's", name, n)
		}
		size = m[2]
		d.Names = append(d.Names, m[1])
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
	if size != "" {
		goSize := size
		if l, ok := sc.lengths[size]; ok {
			goSize = l.Go
		} else if macroName.MatchString(size) {
			return decl{}, fmt.Errorf("%s: array length %s not one of the table's lengths", name, size)
		}
		d.Length, d.Go = size, "["+goSize+"]"+d.Go
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

// argsGoFile returns backend/kernel_args.go: the constants of lens and
// the Go structs of fams.
func argsGoFile(fams []family, lens []length) ([]byte, error) {
	sc, err := scopeOf(fams, lens)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(header("args_table.go"))
	if len(lens) > 0 {
		b.WriteString("// The lengths of the argument structs' arrays, each the value of\n// kernels.cu's macro that its comment names.\nconst (\n")
		for _, l := range lens {
			fmt.Fprintf(&b, "\t%s = %d // %s: %s\n", l.Go, l.N, l.C, l.Doc)
		}
		b.WriteString(")\n")
	}
	seen := map[string]bool{}
	for _, f := range fams {
		fmt.Fprintf(&b, "\n// The argument structs of %s's kernels.\n", f.File)
		for _, a := range f.Structs {
			if seen[a.Name] {
				return nil, fmt.Errorf("%s: struct %s twice", f.File, a.Name)
			}
			seen[a.Name] = true
			ds, err := parse(a, sc)
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
var identifier = regexp.MustCompile(`^([A-Za-z_][A-Za-z_0-9]*)(?:\[([1-9][0-9]*|[A-Z][A-Z_0-9]*)\])?$`)

// structLine matches a line that defines a struct in one line, or a
// macro.
var structLine = regexp.MustCompile(`^(?:(?:template <typename T> )?struct (\w+) \{.*\};|#define (\w+) ).*$`)

// spliceArgs returns the CUDA source src with every table struct's line
// and every length's #define line rewritten from the tables; a struct or
// length of the tables that src does not define in one line, or defines
// twice, and a line marked as written from the tables whose struct or
// length they lack, are errors.
func spliceArgs(src string, fams []family, lens []length) (string, error) {
	sc, err := scopeOf(fams, lens)
	if err != nil {
		return "", err
	}
	want := map[string]string{} // each line, by its struct's or macro's name
	var order [][2]string       // each name and its table, in order
	for _, l := range lens {
		want[l.C] = fmt.Sprintf("#define %s %d", l.C, l.N) + marker
		order = append(order, [2]string{l.C, "lengths"})
	}
	for _, f := range fams {
		for _, a := range f.Structs {
			ds, err := parse(a, sc)
			if err != nil {
				return "", err
			}
			want[a.Name] = cLine(a, ds)
			order = append(order, [2]string{a.Name, f.File})
		}
	}
	lines := strings.Split(src, "\n")
	found := map[string]int{}
	for i, l := range lines {
		m := structLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		name := m[1] + m[2]
		w, ok := want[name]
		if !ok {
			if strings.HasSuffix(l, marker) {
				return "", fmt.Errorf("line %d: %s marked as written from the tables, which lack it", i+1, name)
			}
			continue
		}
		found[name]++
		lines[i] = w
	}
	for _, n := range order {
		if found[n[0]] != 1 {
			return "", fmt.Errorf("%s (%s) defined in %d lines, want one", n[0], n[1], found[n[0]])
		}
	}
	return strings.Join(lines, "\n"), nil
}
