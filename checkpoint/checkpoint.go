// Package checkpoint saves and loads training state in safetensors files:
// tensors (weights, momentum buffers, Adam moments) in the safetensors
// layout that Python's safetensors and a few lines of json + struct read,
// everything else (step counts, random states, a run's configuration) as
// strings in the header's __metadata__.
//
// A file is an 8-byte little-endian header length, a JSON header and the
// tensors' little-endian bytes, packed in the order of their names. The
// metadata always holds
//
//	format          orthonet.checkpoint
//	format_version  1
//	checksum        sha256:<hex>, the SHA-256 of the whole file with these
//	                64 hex digits read as zeros
//
// Write replaces a file atomically: a reader sees the old file or the new
// one, never a mix, even if the process is killed or the machine loses power
// in between. Read verifies the checksum and the layout before it returns
// anything, so a damaged file is an error, never a partial load.
//
// A Run keeps one training run's checkpoints in a folder: it saves step
// checkpoints, finds the newest, marks the best and prunes old ones, and
// records in a manifest what it wrote so that it never replaces or removes
// a file it did not write.
package checkpoint

import (
	"bufio"
	"bytes"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Format and Version identify the files this package writes.
const (
	Format  = "orthonet.checkpoint"
	Version = 1
)

// Reserved metadata keys.
const (
	keyFormat   = "format"
	keyVersion  = "format_version"
	keyChecksum = "checksum"
	metaKey     = "__metadata__"
)

// maxHeader bounds the JSON header, as the safetensors reference reader does.
const maxHeader = 100 << 20

// ErrCorrupt reports a file that is not a well-formed checkpoint: truncated,
// damaged or not a safetensors file.
var ErrCorrupt = errors.New("checkpoint: damaged file")

// Tensor is a named array: Data is []float32, []float64 or []int64 with as
// many entries as the product of Shape.
type Tensor struct {
	Shape []int
	Data  any
}

// File is a checkpoint's content.
type File struct {
	// Tensors by name.
	Tensors map[string]Tensor
	// Meta holds strings by key; format, format_version and checksum are
	// reserved.
	Meta map[string]string
}

// New returns an empty File.
func New() *File { return &File{Tensors: map[string]Tensor{}, Meta: map[string]string{}} }

// SetJSON stores v as JSON under the metadata key.
func (f *File) SetJSON(key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("checkpoint: encoding %s: %w", key, err)
	}
	f.Meta[key] = string(b)
	return nil
}

// JSON decodes the JSON under the metadata key into v; unknown fields are
// an error.
func (f *File) JSON(key string, v any) error {
	s, ok := f.Meta[key]
	if !ok {
		return fmt.Errorf("checkpoint: no %q in the metadata", key)
	}
	d := json.NewDecoder(strings.NewReader(s))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("checkpoint: metadata %q: %w", key, err)
	}
	return nil
}

type entry struct {
	Dtype       string   `json:"dtype"`
	Shape       []int64  `json:"shape"`
	DataOffsets [2]int64 `json:"data_offsets"`
}

func dtypeOf(data any) (string, int, error) {
	switch d := data.(type) {
	case []float32:
		return "F32", len(d), nil
	case []float64:
		return "F64", len(d), nil
	case []int64:
		return "I64", len(d), nil
	}
	return "", 0, fmt.Errorf("data of type %T, want []float32, []float64 or []int64", data)
}

func elemSize(dtype string) int64 {
	switch dtype {
	case "F32":
		return 4
	case "F64", "I64":
		return 8
	}
	return 0
}

// Encode writes f to w in the checkpoint format.
func Encode(w io.Writer, f *File) error {
	names, header, err := tensorEntries(f)
	if err != nil {
		return err
	}
	if header[metaKey], err = headerMeta(f); err != nil {
		return err
	}
	hb, at, err := marshalHeader(header)
	if err != nil {
		return err
	}

	h := sha256.New()
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(hb)))
	h.Write(lenBuf[:])
	h.Write(hb)
	for _, name := range names {
		writeData(h, f.Tensors[name].Data)
	}
	hex.Encode(hb[at:at+64], h.Sum(nil))

	bw := bufio.NewWriterSize(w, 1<<16)
	bw.Write(lenBuf[:])
	bw.Write(hb)
	for _, name := range names {
		writeData(bw, f.Tensors[name].Data)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("checkpoint: writing: %w", err)
	}
	return nil
}

// tensorEntries returns the names of f's tensors, sorted (the order of the
// data), and the header with their entries, checking each tensor's name,
// data type and shape.
func tensorEntries(f *File) ([]string, map[string]any, error) {
	names := make([]string, 0, len(f.Tensors))
	for name := range f.Tensors {
		if name == metaKey || name == "" {
			return nil, nil, fmt.Errorf("checkpoint: tensor name %q is reserved", name)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	header := map[string]any{}
	var off int64
	for _, name := range names {
		t := f.Tensors[name]
		dt, n, err := dtypeOf(t.Data)
		if err != nil {
			return nil, nil, fmt.Errorf("checkpoint: tensor %q: %w", name, err)
		}
		shape := make([]int64, len(t.Shape))
		size := 1
		for i, d := range t.Shape {
			if d < 0 {
				return nil, nil, fmt.Errorf("checkpoint: tensor %q: negative dimension in shape %v", name, t.Shape)
			}
			shape[i] = int64(d)
			size *= d
		}
		if size != n {
			return nil, nil, fmt.Errorf("checkpoint: tensor %q: shape %v holds %d entries, data has %d", name, t.Shape, size, n)
		}
		end := off + int64(n)*elemSize(dt)
		header[name] = entry{Dtype: dt, Shape: shape, DataOffsets: [2]int64{off, end}}
		off = end
	}
	return names, header, nil
}

// headerMeta returns the header's metadata: f's, with the format, the
// version and a checksum of zeros (filled in once the data is hashed).
func headerMeta(f *File) (map[string]string, error) {
	meta := map[string]string{}
	for k, v := range f.Meta {
		if k == keyFormat || k == keyVersion || k == keyChecksum {
			return nil, fmt.Errorf("checkpoint: metadata key %q is reserved", k)
		}
		meta[k] = v
	}
	meta[keyFormat] = Format
	meta[keyVersion] = strconv.Itoa(Version)
	meta[keyChecksum] = "sha256:" + strings.Repeat("0", 64)
	return meta, nil
}

// marshalHeader returns the JSON header, padded to a multiple of 8 bytes,
// and the offset of its checksum's hex digits.
func marshalHeader(header map[string]any) ([]byte, int, error) {
	hb, err := json.Marshal(header)
	if err != nil {
		return nil, 0, fmt.Errorf("checkpoint: encoding the header: %w", err)
	}
	for len(hb)%8 != 0 { // the safetensors writer aligns the data to 8 bytes
		hb = append(hb, ' ')
	}
	at, err := checksumAt(hb)
	if err != nil {
		return nil, 0, err
	}
	return hb, at, nil
}

// checksumAt returns the offset of the 64 hex digits of the checksum in a
// header: the one place the key appears followed by a string value (a quote
// inside a JSON string is escaped, so a value cannot imitate it).
func checksumAt(hb []byte) (int, error) {
	pat := []byte(`"` + keyChecksum + `":"sha256:`)
	i := bytes.Index(hb, pat)
	if i < 0 || bytes.Count(hb, pat) != 1 {
		return 0, fmt.Errorf("%w: the header has no single checksum", ErrCorrupt)
	}
	at := i + len(pat)
	if at+64 >= len(hb) || hb[at+64] != '"' {
		return 0, fmt.Errorf("%w: the checksum is not 64 hex digits", ErrCorrupt)
	}
	return at, nil
}

// writeData writes little-endian values; errors surface at Flush or in the
// caller's final check.
func writeData(w io.Writer, data any) {
	switch d := data.(type) {
	case []float32:
		writeValues(w, d, 4, func(b []byte, v float32) { binary.LittleEndian.PutUint32(b, math.Float32bits(v)) })
	case []float64:
		writeValues(w, d, 8, func(b []byte, v float64) { binary.LittleEndian.PutUint64(b, math.Float64bits(v)) })
	case []int64:
		writeValues(w, d, 8, func(b []byte, v int64) { binary.LittleEndian.PutUint64(b, uint64(v)) })
	}
}

// writeValues writes vs through a buffer of 4 KiB, each value put into its
// size bytes by put.
func writeValues[T any](w io.Writer, vs []T, size int, put func([]byte, T)) {
	var buf [4096]byte
	n := 0
	for _, v := range vs {
		if n+size > len(buf) {
			w.Write(buf[:n])
			n = 0
		}
		put(buf[n:], v)
		n += size
	}
	w.Write(buf[:n])
}

// Decode parses a checkpoint held in b, verifying its checksum and layout.
// Every error wraps ErrCorrupt except a format or version this build does
// not read.
func Decode(b []byte) (*File, error) {
	return decode(bytes.NewReader(b), int64(len(b)))
}

// Read loads and verifies the checkpoint at path. It checks the header and
// the sizes it declares against the file's size before it reads any tensor,
// so a damaged or foreign file fails without being read whole.
func Read(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: reading %s: %w", path, err)
	}
	defer fd.Close()
	fi, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("checkpoint: reading %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("checkpoint: reading %s: not a regular file", path)
	}
	f, err := decode(fd, fi.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// span is where one tensor lies in the data section.
type span struct {
	name       string
	begin, end int64
	dtype      string
	shape      []int
}

// header is a parsed header whose layout fits a data section of known size.
type header struct {
	meta  map[string]string
	spans []span // by offset, covering the data section exactly
	sumAt int    // offset of the checksum's 64 hex digits in the header
}

// readHeader reads the 8-byte length and the JSON header from r, a file of
// size bytes, checking the length against size; it reads no tensor data.
func readHeader(r io.Reader, size int64) (lenBuf [8]byte, hb []byte, dataLen int64, err error) {
	if size < 8 {
		return lenBuf, nil, 0, fmt.Errorf("%w: %d bytes, too short for the 8-byte header length (truncated?)", ErrCorrupt, size)
	}
	if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
		return lenBuf, nil, 0, readErr(err)
	}
	hlen := binary.LittleEndian.Uint64(lenBuf[:])
	if hlen > maxHeader || hlen > uint64(size-8) {
		return lenBuf, nil, 0, fmt.Errorf("%w: header length %d but the file has %d bytes (truncated, or not a safetensors file)", ErrCorrupt, hlen, size)
	}
	hb = make([]byte, hlen)
	if _, err := io.ReadFull(r, hb); err != nil {
		return lenBuf, nil, 0, readErr(err)
	}
	return lenBuf, hb, size - 8 - int64(hlen), nil
}

// readErr reports a read that ended early (the file shrank while it was
// read) or failed.
func readErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: the file ended early (truncated?)", ErrCorrupt)
	}
	return fmt.Errorf("checkpoint: reading: %w", err)
}

// parseHeader checks a header against a data section of dataLen bytes.
func parseHeader(hb []byte, dataLen int64) (*header, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hb, &raw); err != nil {
		return nil, fmt.Errorf("%w: the header is not valid JSON: %v", ErrCorrupt, err)
	}
	meta, err := parseMeta(raw)
	if err != nil {
		return nil, err
	}
	var spans []span
	for name, m := range raw {
		if name == metaKey {
			continue
		}
		s, err := parseSpan(name, m, dataLen)
		if err != nil {
			return nil, err
		}
		spans = append(spans, s)
	}
	if err := checkLayout(spans, dataLen); err != nil {
		return nil, err
	}
	at, err := checksumAt(hb)
	if err != nil {
		return nil, err
	}
	if string(hb[at-len("sha256:"):at+64]) != meta[keyChecksum] {
		return nil, fmt.Errorf("%w: the checksum in the metadata is malformed", ErrCorrupt)
	}
	return &header{meta: meta, spans: spans, sumAt: at}, nil
}

// parseMeta returns the header's metadata, checking that it names this
// format and a version this build reads.
func parseMeta(raw map[string]json.RawMessage) (map[string]string, error) {
	var meta map[string]string
	if m, ok := raw[metaKey]; !ok {
		return nil, fmt.Errorf("%w: no __metadata__ in the header: not an orthonet checkpoint", ErrCorrupt)
	} else if err := json.Unmarshal(m, &meta); err != nil {
		return nil, fmt.Errorf("%w: __metadata__ is not a map of strings: %v", ErrCorrupt, err)
	}
	if meta[keyFormat] != Format {
		return nil, fmt.Errorf("checkpoint: format %q, want %q: not an orthonet checkpoint", meta[keyFormat], Format)
	}
	if v := meta[keyVersion]; v != strconv.Itoa(Version) {
		return nil, fmt.Errorf("checkpoint: format version %q; this build reads version %d", v, Version)
	}
	return meta, nil
}

// parseSpan returns where tensor name's entry m puts it, checking its data
// type, its shape and its bytes against a data section of dataLen bytes.
func parseSpan(name string, m json.RawMessage, dataLen int64) (span, error) {
	var e entry
	d := json.NewDecoder(bytes.NewReader(m))
	d.DisallowUnknownFields()
	if err := d.Decode(&e); err != nil {
		return span{}, fmt.Errorf("%w: tensor %q: %v", ErrCorrupt, name, err)
	}
	size := elemSize(e.Dtype)
	if size == 0 {
		return span{}, fmt.Errorf("%w: tensor %q has dtype %q, want F32, F64 or I64", ErrCorrupt, name, e.Dtype)
	}
	count := int64(1)
	shape := make([]int, len(e.Shape))
	for i, dim := range e.Shape {
		if dim < 0 || (dim > 0 && count > dataLen/dim) {
			return span{}, fmt.Errorf("%w: tensor %q: shape %v is negative or larger than the file", ErrCorrupt, name, e.Shape)
		}
		count *= dim
		shape[i] = int(dim)
	}
	begin, end := e.DataOffsets[0], e.DataOffsets[1]
	if begin < 0 || end < begin || end-begin != count*size {
		return span{}, fmt.Errorf("%w: tensor %q: bytes %d to %d for %d %s values", ErrCorrupt, name, begin, end, count, e.Dtype)
	}
	if end > dataLen {
		return span{}, fmt.Errorf("%w: tensor %q ends at byte %d of the data but the file holds %d (truncated?)", ErrCorrupt, name, end, dataLen)
	}
	return span{name, begin, end, e.Dtype, shape}, nil
}

// checkLayout sorts spans by offset and checks that they cover the data
// section of dataLen bytes exactly, without overlap or gap.
func checkLayout(spans []span, dataLen int64) error {
	sort.Slice(spans, func(i, j int) bool {
		return spans[i].begin < spans[j].begin || spans[i].begin == spans[j].begin && spans[i].end < spans[j].end
	})
	var at64 int64
	for _, s := range spans {
		if s.begin != at64 {
			return fmt.Errorf("%w: tensor %q starts at byte %d of the data, want %d (overlap or gap)", ErrCorrupt, s.name, s.begin, at64)
		}
		at64 = s.end
	}
	if at64 != dataLen {
		return fmt.Errorf("%w: %d bytes of data after the last tensor", ErrCorrupt, dataLen-at64)
	}
	return nil
}

// decode reads a checkpoint of size bytes from r: the header first, checked
// against size, then the tensors, streamed through the checksum. Nothing is
// returned unless the checksum matches.
func decode(r io.Reader, size int64) (*File, error) {
	lenBuf, hb, dataLen, err := readHeader(r, size)
	if err != nil {
		return nil, err
	}
	hd, err := parseHeader(hb, dataLen)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	h.Write(lenBuf[:])
	h.Write(hb[:hd.sumAt])
	h.Write([]byte(strings.Repeat("0", 64)))
	h.Write(hb[hd.sumAt+64:])
	br := bufio.NewReaderSize(io.TeeReader(io.LimitReader(r, dataLen), h), 1<<16)
	tensors := make(map[string]Tensor, len(hd.spans))
	for _, s := range hd.spans {
		data, err := readData(br, s.dtype, s.end-s.begin)
		if err != nil {
			return nil, readErr(err)
		}
		tensors[s.name] = Tensor{Shape: s.shape, Data: data}
	}
	var one [1]byte
	if n, _ := io.ReadFull(r, one[:]); n != 0 {
		return nil, fmt.Errorf("%w: the file grew while it was read", ErrCorrupt)
	}
	want := hd.meta[keyChecksum]
	if got := hex.EncodeToString(h.Sum(nil)); "sha256:"+got != want {
		return nil, fmt.Errorf("%w: checksum mismatch (file sha256:%s, content sha256:%s): the file was changed or damaged", ErrCorrupt, want[len("sha256:"):], got)
	}
	f := &File{Tensors: tensors, Meta: map[string]string{}}
	for k, v := range hd.meta {
		if k != keyFormat && k != keyVersion && k != keyChecksum {
			f.Meta[k] = v
		}
	}
	return f, nil
}

// readData reads n bytes of little-endian values of dtype from r.
func readData(r io.Reader, dtype string, n int64) (any, error) {
	var buf [1 << 12]byte
	size := elemSize(dtype)
	count := n / size
	var out any
	switch dtype {
	case "F32":
		out = make([]float32, count)
	case "F64":
		out = make([]float64, count)
	default:
		out = make([]int64, count)
	}
	for i := int64(0); i < count; {
		k := min(int64(len(buf))/size, count-i)
		b := buf[:k*size]
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		switch d := out.(type) {
		case []float32:
			for j := range k {
				d[i+j] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:]))
			}
		case []float64:
			for j := range k {
				d[i+j] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*j:]))
			}
		case []int64:
			for j := range k {
				d[i+j] = int64(binary.LittleEndian.Uint64(b[8*j:]))
			}
		}
		i += k
	}
	return out, nil
}

// Write stores f at path atomically: it writes a temporary file in the same
// folder, syncs it, renames it over path and syncs the folder. A symbolic
// link at path is replaced, never written through.
func Write(path string, f *File) error {
	dir, base := filepath.Split(path)
	return writeAtomic(dir, base, 0o600, func(w io.Writer) error { return Encode(w, f) })
}

// writeAtomic makes dir/base hold what write writes, atomically: a
// temporary file written by writeTemp is renamed over dir/base.
func writeAtomic(dir, base string, perm os.FileMode, write func(io.Writer) error) error {
	if dir == "" {
		dir = "."
	}
	tmp, err := writeTemp(dir, base, perm, write)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, base)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("checkpoint: %w", err)
	}
	return SyncDir(dir)
}

// CreateNew writes path through write atomically, as Write does, with the
// permissions perm (less the umask), and never replaces a file: where path
// exists, even a file that appears while write runs, it returns an error
// and leaves that file as it is.
func CreateNew(path string, perm os.FileMode, write func(io.Writer) error) error {
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("checkpoint: %s exists: not replaced", path)
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := writeTemp(dir, base, perm, write)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	// A hard link fails where path exists: nothing is replaced, even by a
	// file that appeared meanwhile. Where links are not supported, a rename.
	if err := os.Link(tmp, path); err != nil {
		if _, serr := os.Lstat(path); serr == nil {
			return fmt.Errorf("checkpoint: %s exists: not replaced", path)
		}
		if err := os.Rename(tmp, path); err != nil {
			return fmt.Errorf("checkpoint: writing %s: %w", path, err)
		}
	}
	return SyncDir(dir)
}

// writeTemp fills a new temporary file dir/.base.tmp-<16 hex digits>
// (created exclusively, so never through a link) through write, syncs and
// closes it and returns its path; on an error it leaves no file.
func writeTemp(dir, base string, perm os.FileMode, write func(io.Writer) error) (string, error) {
	path := filepath.Join(dir, base)
	var tmp *os.File
	for tmp == nil {
		var err error
		tmp, err = os.OpenFile(filepath.Join(dir, tempName(base)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("checkpoint: writing %s: %w", path, err)
		}
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := write(tmp); err != nil {
		return "", fmt.Errorf("checkpoint: writing %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return "", fmt.Errorf("checkpoint: syncing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("checkpoint: writing %s: %w", tmp.Name(), err)
	}
	ok = true
	return tmp.Name(), nil
}

// tempSuffix precedes the random part of a temporary file's name.
const tempSuffix = ".tmp-"

// tempName returns a fresh temporary name for base: "." + base + ".tmp-"
// and 16 random lowercase hex digits.
func tempName(base string) string {
	var b [8]byte
	_, _ = crand.Read(b[:]) // never fails
	return "." + base + tempSuffix + hex.EncodeToString(b[:])
}

// tempBase returns the name a temporary file of Write stands in for, and
// whether name is such a file: exactly "." + base + ".tmp-" and 16
// lowercase hex digits.
func tempBase(name string) (string, bool) {
	const n = 16
	i := len(name) - n - len(tempSuffix)
	if i < 2 || name[0] != '.' || name[i:i+len(tempSuffix)] != tempSuffix {
		return "", false
	}
	for _, c := range name[i+len(tempSuffix):] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", false
		}
	}
	return name[1:i], true
}

// SyncDir flushes a folder's entries (a rename or a removal) to disk.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("checkpoint: syncing folder %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("checkpoint: syncing folder %s: %w", dir, err)
	}
	return nil
}

// IsTemp reports whether name is a temporary file of Write's making (which
// a process killed before the rename leaves behind): "." + the file's name
// + ".tmp-" + 16 lowercase hex digits, nothing else.
func IsTemp(name string) bool {
	_, ok := tempBase(name)
	return ok
}
