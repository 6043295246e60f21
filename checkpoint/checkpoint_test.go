package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func sample() *File {
	f := New()
	f.Tensors["model.w"] = Tensor{Shape: []int{2, 3}, Data: []float32{1, -2, 3.5, float32(math.Inf(1)), 0, -0}}
	f.Tensors["model.b"] = Tensor{Shape: []int{3}, Data: []float64{math.Pi, -1e-300, 7}}
	f.Tensors["steps"] = Tensor{Shape: []int{}, Data: []int64{-5}}
	f.Tensors["empty"] = Tensor{Shape: []int{0, 4}, Data: []float32{}}
	f.Meta["note"] = `a "quoted" value with "checksum":"sha256:` + strings.Repeat("0", 64) + `"`
	return f
}

func encode(t testing.TB, f *File) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Encode(&buf, f); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	f := sample()
	b := encode(t, f)
	g, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.Meta, g.Meta) {
		t.Errorf("metadata %v, want %v", g.Meta, f.Meta)
	}
	if len(g.Tensors) != len(f.Tensors) {
		t.Fatalf("%d tensors, want %d", len(g.Tensors), len(f.Tensors))
	}
	for name, want := range f.Tensors {
		got := g.Tensors[name]
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	if !bytes.Equal(encode(t, g), b) {
		t.Error("encoding the decoded file gave other bytes")
	}
}

// TestSafetensorsLayout reads an encoded file by the safetensors rules alone
// (not through Decode): an 8-byte little-endian header length, a JSON
// header padded to 8 bytes, string metadata, and tensors packed back to
// back over the whole data section, little-endian.
func TestSafetensorsLayout(t *testing.T) {
	b := encode(t, sample())
	n := binary.LittleEndian.Uint64(b)
	if n%8 != 0 {
		t.Errorf("header length %d is not a multiple of 8", n)
	}
	var header map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &header); err != nil {
		t.Fatal(err)
	}
	var meta map[string]string
	if err := json.Unmarshal(header["__metadata__"], &meta); err != nil {
		t.Fatalf("metadata is not a map of strings: %v", err)
	}
	if meta["format"] != Format || meta["format_version"] != "1" || !strings.HasPrefix(meta["checksum"], "sha256:") {
		t.Errorf("metadata %v lacks the format keys", meta)
	}
	var w struct {
		Dtype   string `json:"dtype"`
		Shape   []int  `json:"shape"`
		Offsets [2]int `json:"data_offsets"`
	}
	if err := json.Unmarshal(header["model.b"], &w); err != nil {
		t.Fatal(err)
	}
	data := b[8+n:]
	if w.Dtype != "F64" || !reflect.DeepEqual(w.Shape, []int{3}) || w.Offsets[1]-w.Offsets[0] != 24 {
		t.Fatalf("model.b entry %+v", w)
	}
	if v := math.Float64frombits(binary.LittleEndian.Uint64(data[w.Offsets[0]:])); v != math.Pi {
		t.Errorf("model.b[0] = %v, want pi", v)
	}
	total := 0
	for name, raw := range header {
		if name == "__metadata__" {
			continue
		}
		var e struct {
			Offsets [2]int `json:"data_offsets"`
		}
		_ = json.Unmarshal(raw, &e)
		total += e.Offsets[1] - e.Offsets[0]
	}
	if total != len(data) {
		t.Errorf("tensors cover %d of %d data bytes", total, len(data))
	}
}

// TestDamage checks that every truncation and every single flipped bit is
// an error wrapping ErrCorrupt, never a panic or a silent partial load.
func TestDamage(t *testing.T) {
	b := encode(t, sample())
	for n := 0; n < len(b); n++ {
		if _, err := Decode(b[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d of %d bytes: error %v, want ErrCorrupt", n, len(b), err)
		}
	}
	if _, err := Decode(append(append([]byte(nil), b...), 0)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("one byte appended: error %v", err)
	}
	for i := 0; i < 8*len(b); i++ {
		c := append([]byte(nil), b...)
		c[i/8] ^= 1 << (i % 8)
		_, err := Decode(c)
		if err == nil {
			t.Fatalf("bit %d of byte %d flipped: decoded without error", i%8, i/8)
		}
	}
}

func TestWrongFormat(t *testing.T) {
	b := encode(t, sample())
	v2 := bytes.Replace(b, []byte(`"format_version":"1"`), []byte(`"format_version":"2"`), 1)
	if _, err := Decode(v2); err == nil || !strings.Contains(err.Error(), `format version "2"; this build reads version 1`) {
		t.Errorf("version 2: %v", err)
	}
	other := bytes.Replace(b, []byte(`"format":"orthonet.checkpoint"`), []byte(`"format":"orthonet.somethingx"`), 1)
	if _, err := Decode(other); err == nil || !strings.Contains(err.Error(), "not an orthonet checkpoint") {
		t.Errorf("other format: %v", err)
	}
	// A valid safetensors file of another program: no orthonet metadata.
	h := []byte(`{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`)
	plain := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	plain = append(append(plain, h...), 0, 0, 128, 63)
	if _, err := Decode(plain); err == nil || !strings.Contains(err.Error(), "not an orthonet checkpoint") {
		t.Errorf("foreign safetensors file: %v", err)
	}
	if _, err := Read(filepath.Join(t.TempDir(), "missing.safetensors")); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "missing.safetensors") {
		t.Errorf("missing file: %v", err)
	}
}

func TestEncodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func(f *File)
		want string
	}{
		{"shape", func(f *File) { f.Tensors["x"] = Tensor{Shape: []int{2, 2}, Data: []float32{1}} }, "holds 4 entries, data has 1"},
		{"type", func(f *File) { f.Tensors["x"] = Tensor{Shape: []int{1}, Data: []int{1}} }, "want []float32"},
		{"reserved", func(f *File) { f.Meta["checksum"] = "x" }, "reserved"},
		{"name", func(f *File) { f.Tensors["__metadata__"] = Tensor{Shape: []int{}, Data: []int64{1}} }, "reserved"},
	} {
		f := New()
		tc.f(f)
		if err := Encode(&bytes.Buffer{}, f); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.safetensors")
	f := sample()
	if err := Write(path, f); err != nil {
		t.Fatal(err)
	}
	f.Meta["note"] = "second"
	if err := Write(path, f); err != nil {
		t.Fatal(err)
	}
	g, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if g.Meta["note"] != "second" {
		t.Errorf("note %q after the second write", g.Meta["note"])
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("folder holds %d entries after two writes, want 1", len(ents))
	}
	// An encoding error leaves the old file and no temporary behind.
	f.Tensors["bad"] = Tensor{Shape: []int{3}, Data: []float32{1}}
	if err := Write(path, f); err == nil {
		t.Fatal("bad tensor written")
	}
	if g, err := Read(path); err != nil || g.Meta["note"] != "second" {
		t.Errorf("failed write damaged the old file: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("failed write left %d entries", len(ents))
	}
	if err := Write(filepath.Join(dir, "no", "such", "x.safetensors"), f); err == nil {
		t.Error("write into a missing folder succeeded")
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(encode(f, sample()))
	small := New()
	small.Tensors["a"] = Tensor{Shape: []int{1}, Data: []float64{2}}
	f.Add(encode(f, small))
	f.Add([]byte{8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '})
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := Decode(b)
		if err != nil {
			return
		}
		// What decodes must re-encode to a file that decodes to the same.
		h, err := Decode(encode(t, g))
		if err != nil {
			t.Fatalf("re-encoded file does not decode: %v", err)
		}
		if !reflect.DeepEqual(g, h) {
			t.Fatal("re-encoding changed the content")
		}
	})
}

// TestFuzzMutations runs a seeded random-mutation sweep as a quick stand-in
// for the fuzzer in make test: byte overwrites, insertions and deletions.
func TestFuzzMutations(t *testing.T) {
	b := encode(t, sample())
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 3000; i++ {
		c := append([]byte(nil), b...)
		switch i % 3 {
		case 0:
			c[rng.IntN(len(c))] = byte(rng.IntN(256))
		case 1:
			k := rng.IntN(len(c))
			c = append(c[:k], append([]byte{byte(rng.IntN(256))}, c[k:]...)...)
		case 2:
			k := rng.IntN(len(c))
			c = append(c[:k], c[k+1:]...)
		}
		if bytes.Equal(c, b) {
			continue
		}
		if _, err := Decode(c); err == nil {
			t.Fatalf("mutation %d decoded without error", i)
		}
	}
}

// TestCreateNew writes a new file, and refuses a path that holds a file or
// a link, or comes to hold one while the file is written, leaving it (and
// a link's target) as it was, and a write that fails: no temporary file is
// left behind in any case.
func TestCreateNew(t *testing.T) {
	report := func(_ string, w io.Writer) error { _, err := io.WriteString(w, "report"); return err }
	for _, c := range []struct {
		name    string
		setup   func(t *testing.T, path string) // what stands at path before
		write   func(path string, w io.Writer) error
		wantErr string // "" for success
		want    string // path's content afterwards ("" for no file)
	}{
		{"new", nil, report, "", "report"},
		{"file there", func(t *testing.T, path string) { mustWrite(t, path, "the user's") }, report, "exists: not replaced", "the user's"},
		{"link there", func(t *testing.T, path string) {
			if err := os.Symlink(filepath.Join(filepath.Dir(path), "target"), path); err != nil {
				t.Skip("no symbolic links here:", err)
			}
		}, report, "exists: not replaced", ""},
		{"file appears meanwhile", nil, func(path string, w io.Writer) error {
			mustWrite(t, path, "the user's")
			return report(path, w)
		}, "exists: not replaced", "the user's"},
		{"write fails", nil, func(_ string, w io.Writer) error {
			_, _ = io.WriteString(w, "half")
			return errors.New("disk on fire")
		}, "disk on fire", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "report.csv")
			if c.setup != nil {
				c.setup(t, path)
			}
			err := CreateNew(path, 0o644, func(w io.Writer) error { return c.write(path, w) })
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatal(err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("error %v, want one with %q", err, c.wantErr)
			}
			got, rerr := os.ReadFile(path)
			if c.want == "" && rerr == nil || c.want != "" && string(got) != c.want {
				t.Errorf("path holds %q (%v), want %q", got, rerr, c.want)
			}
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if strings.Contains(e.Name(), tempSuffix) {
					t.Errorf("temporary file %s left behind", e.Name())
				}
			}
			if _, err := os.Lstat(filepath.Join(dir, "target")); err == nil {
				t.Error("a link's target was written")
			}
		})
	}
}

func mustWrite(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
