package data

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// idx encodes an unsigned-byte IDX file with the given dimensions.
func idx(dims []int, payload []byte) []byte {
	var b bytes.Buffer
	b.Write([]byte{0, 0, 0x08, byte(len(dims))})
	for _, d := range dims {
		_ = binary.Write(&b, binary.BigEndian, uint32(d))
	}
	b.Write(payload)
	return b.Bytes()
}

func gz(b []byte) []byte {
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	_, _ = w.Write(b)
	_ = w.Close()
	return out.Bytes()
}

func write(t *testing.T, path string, b []byte) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// mnistFiles returns n 4x3 images whose pixel j of image i is (i*12+j)%256,
// and labels i%10.
func mnistFiles(n int) (images, labels []byte) {
	px := make([]byte, n*12)
	for i := range px {
		px[i] = byte(i % 256)
	}
	lb := make([]byte, n)
	for i := range lb {
		lb[i] = byte(i % 10)
	}
	return idx([]int{n, 4, 3}, px), idx([]int{n}, lb)
}

func TestReadIDX(t *testing.T) {
	im, lb := mnistFiles(25)
	huge := idx([]int{1 << 30, 28, 28}, make([]byte, 100))
	badCRC := gz(im)
	badCRC[len(badCRC)-6] ^= 0xff // the gzip trailer's CRC-32
	wrongDims := append([]byte(nil), im...)
	wrongDims[3] = 4 // 0x00000804: a fourth dimension taken from the pixels
	for _, tc := range []struct {
		name           string
		images, labels []byte
		want           string
		file           string // "images" or "labels": the file the error must name
	}{
		{"raw", im, lb, "", ""},
		{"gzip", gz(im), gz(lb), "", ""},
		{"count-mismatch", im, idx([]int{24}, make([]byte, 24)), "has 25 images but", "labels"},
		{"bad-magic", append([]byte{1, 2}, im[2:]...), lb, "not an IDX file: magic number 0x01020803, want 0x00000803 for images", "images"},
		{"float-type", append([]byte{0, 0, 0x0d}, im[3:]...), lb, "element type 0x0d", "images"},
		{"images-4d", wrongDims, lb, "magic number 0x00000804 announces 4 dimensions, want 0x00000803 for images, N x H x W", "images"},
		{"labels-as-images", lb, lb, "magic number 0x00000801 announces 1 dimensions, want 0x00000803", "images"},
		{"labels-2d", im, idx([]int{25, 1}, make([]byte, 25)), "magic number 0x00000802 announces 2 dimensions, want 0x00000801 for labels", "labels"},
		{"truncated", im[:len(im)-5], lb, "truncated: header [25 4 3] announces 300 bytes, file has 295", "images"},
		{"truncated-gzip", gz(im[:len(im)-5]), lb, "truncated: header [25 4 3] announces 300 bytes, file has 295", "images"},
		{"trailing", append(append([]byte(nil), im...), 7), lb, "trailing data", "images"},
		{"trailing-gzip", gz(append(append([]byte(nil), im...), 7)), lb, "trailing data", "images"},
		{"gzip-crc", badCRC, lb, "invalid checksum", "images"},
		{"short-header", im[:9], lb, "truncated IDX header", "images"},
		{"huge-header", huge, lb, "announce 841813590016 bytes, larger than the 1073741824", "images"},
		{"zero-dimension", idx([]int{25, 0, 3}, nil), lb, "IDX dimensions [25 0 3]: dimension 1 is 0", "images"},
		{"over-budget", idx([]int{1 << 20, 32, 32}, nil), idx([]int{1 << 20}, nil), "1048576 images of 32x32 take 4294967296 bytes as float32, more than the 2147483648 of data.DefaultMaxBytes", "images"},
		{"label-range", im, idx([]int{25}, bytes.Repeat([]byte{11}, 25)), "label 11 of example 0", "labels"},
		{"bad-gzip", append([]byte{0x1f, 0x8b}, 1, 2, 3), lb, "gzip", "images"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ip := write(t, filepath.Join(dir, "images"), tc.images)
			lp := write(t, filepath.Join(dir, "labels"), tc.labels)
			s, err := ReadIDX(ip, lp)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrFormat) {
					t.Fatalf("error %v, want ErrFormat containing %q", err, tc.want)
				}
				if named := filepath.Join(dir, tc.file); !strings.Contains(err.Error(), named) {
					t.Errorf("error %q does not name %s", err, named)
				}
				if strings.Contains(err.Error(), "empty or larger") {
					t.Errorf("error %q blames the dimensions", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.N != 25 || s.C != 1 || s.H != 4 || s.W != 3 || s.Dim() != 12 {
				t.Fatalf("shape %d x %d x %d x %d", s.N, s.C, s.H, s.W)
			}
			if len(s.Files) != 2 || s.Files[0] != ip || s.Files[1] != lp {
				t.Errorf("Files = %q, want the images and labels files", s.Files)
			}
			for i, v := range s.X {
				want := float32(i%256)/127.5 - 1
				if v != want {
					t.Fatalf("pixel %d = %g, want %g", i, v, want)
				}
			}
			if s.Y[13] != 3 {
				t.Errorf("label 13 = %d", s.Y[13])
			}
		})
	}
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestDecodeIDXMemory checks that DecodeIDX reads a payload of known length
// into one buffer of its size, not a doubled one, and that a gzip stream
// whose header announces far more than it holds costs about what it holds.
func TestDecodeIDXMemory(t *testing.T) {
	const n = 16 << 20
	raw := idx([]int{n / 1024, 32, 32}, make([]byte, n))
	var err error
	if got := allocated(func() { _, _, err = DecodeIDX(bytes.NewReader(raw), "raw") }); err != nil || got > n+1<<20 {
		t.Errorf("decoding %d bytes allocated %d (error %v), want at most %d", n, got, err, n+1<<20)
	}
	bomb := gz(idx([]int{1 << 18, 32, 32}, make([]byte, 2<<20))) // announces 256 MiB, holds 2 MiB
	var msg string
	got := allocated(func() {
		_, _, err = DecodeIDX(bytes.NewReader(bomb), "bomb")
		msg = fmt.Sprint(err)
	})
	if !strings.Contains(msg, "announces 268435456 bytes, file has 2097152") || got > 16<<20 {
		t.Errorf("a gzip stream holding 2 MiB of an announced 256 MiB allocated %d bytes, error %v", got, err)
	}
}

func TestScaling(t *testing.T) {
	dir := t.TempDir()
	ip := write(t, filepath.Join(dir, "i"), idx([]int{1, 1, 2}, []byte{0, 255}))
	lp := write(t, filepath.Join(dir, "l"), idx([]int{1}, []byte{0}))
	s, err := ReadIDX(ip, lp)
	if err != nil {
		t.Fatal(err)
	}
	if s.X[0] != -1 || s.X[1] != 1 {
		t.Errorf("pixels 0 and 255 scale to %g and %g, want -1 and 1", s.X[0], s.X[1])
	}
}

// cifarBatch returns n CIFAR-10 records: label i%10, pixel j = (i+j)%256.
func cifarBatch(n int) []byte {
	var b []byte
	for i := 0; i < n; i++ {
		b = append(b, byte(i%10))
		for j := 0; j < 3072; j++ {
			b = append(b, byte((i+j)%256))
		}
	}
	return b
}

func TestReadCIFAR10(t *testing.T) {
	dir := t.TempDir()
	good := write(t, filepath.Join(dir, "b1.bin"), cifarBatch(3))
	good2 := write(t, filepath.Join(dir, "b2.bin"), cifarBatch(2))
	s, err := ReadCIFAR10(good, good2)
	if err != nil {
		t.Fatal(err)
	}
	if s.N != 5 || s.C != 3 || s.H != 32 || s.W != 32 || s.Y[4] != 1 {
		t.Fatalf("got %d x %d x %d x %d, label[4] = %d", s.N, s.C, s.H, s.W, s.Y[4])
	}
	// Image 1, channel 2 (blue), pixel 0 is record byte 1 + 2*1024: (1+2048)%256.
	if got, want := s.Image(1)[2048], float32((1+2048)%256)/127.5-1; got != want {
		t.Errorf("blue pixel = %g, want %g", got, want)
	}
	bad := cifarBatch(2)
	bad[3073] = 10
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"truncated", cifarBatch(2)[:5000], "not a whole number of 3073-byte"},
		{"label", bad, "record 1 has label 10"},
		{"empty", nil, "empty CIFAR-10 batch"},
	} {
		p := write(t, filepath.Join(dir, tc.name), tc.b)
		if _, err := ReadCIFAR10(p); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %v, want %q naming the file", tc.name, err, tc.want)
		}
	}
	if _, err := ReadCIFAR10(filepath.Join(dir, "missing.bin")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: error %v", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	im, lb := mnistFiles(30)
	write(t, filepath.Join(dir, "m", "train-images-idx3-ubyte.gz"), gz(im))
	write(t, filepath.Join(dir, "m", "train-labels-idx1-ubyte"), lb)
	s, err := Load("mnist", filepath.Join(dir, "m"), true)
	if err != nil {
		t.Fatal(err)
	}
	if s.N != 30 || s.Name != "mnist" {
		t.Errorf("loaded %d examples named %q", s.N, s.Name)
	}
	if _, err := Load("mnist", filepath.Join(dir, "m"), false); err == nil || !strings.Contains(err.Error(), "t10k-images-idx3-ubyte") {
		t.Errorf("missing test set: error %v", err)
	}
	for i := 1; i <= 5; i++ {
		write(t, filepath.Join(dir, "c", "cifar-10-batches-bin", "data_batch_"+string(rune('0'+i))+".bin"), cifarBatch(2))
	}
	write(t, filepath.Join(dir, "c", "test_batch.bin"), cifarBatch(3))
	if s, err := Load("cifar10", filepath.Join(dir, "c"), true); err != nil || s.N != 10 {
		t.Errorf("cifar10 train: %v", err)
	}
	if s, err := Load("cifar10", filepath.Join(dir, "c"), false); err != nil || s.N != 3 {
		t.Errorf("cifar10 test: %v", err)
	}
	if _, err := Load("imagenet", dir, true); err == nil || !strings.Contains(err.Error(), `unknown dataset "imagenet"`) {
		t.Errorf("unknown dataset: error %v", err)
	}
	if DefaultDir("fashion-mnist") != FashionMNISTDir {
		t.Error("Fashion-MNIST's default folder is not Debian's")
	}
}

// TestLoadBothForms puts a file in both of its forms (raw and .gz, or in
// dir and in cifar-10-batches-bin): the same data loads, different data is
// refused naming both files, unless the .gz is the published download.
func TestLoadBothForms(t *testing.T) {
	im, lb := mnistFiles(6)
	stale, _ := mnistFiles(5)
	published := gz(im)
	saved := Sources["mnist"]
	Sources["mnist"] = Source{Files: []Remote{{"train-images-idx3-ubyte.gz", digest(published), int64(len(published))}}}
	defer func() { Sources["mnist"] = saved }()
	for _, tc := range []struct {
		name    string
		dataset string
		files   map[string][]byte
		want    string   // error; "" to load
		named   []string // files the error must name
		n       int      // examples loaded
	}{
		{"same-idx", "mnist", map[string][]byte{"train-images-idx3-ubyte": im, "train-images-idx3-ubyte.gz": gz(im), "train-labels-idx1-ubyte": lb}, "", nil, 6},
		{"stale-raw", "fashion-mnist", map[string][]byte{"train-images-idx3-ubyte": stale, "train-images-idx3-ubyte.gz": gz(im), "train-labels-idx1-ubyte": lb},
			"hold different data", []string{"train-images-idx3-ubyte", "train-images-idx3-ubyte.gz"}, 0},
		{"longer-raw", "mnist", map[string][]byte{"train-images-idx3-ubyte": append(append([]byte(nil), im...), 1), "train-images-idx3-ubyte.gz": gz(im[:len(im)-1]), "train-labels-idx1-ubyte": lb},
			"hold different data", []string{"train-images-idx3-ubyte", "train-images-idx3-ubyte.gz"}, 0},
		{"published-gz", "mnist", map[string][]byte{"train-images-idx3-ubyte": stale, "train-images-idx3-ubyte.gz": published, "train-labels-idx1-ubyte": lb}, "", nil, 6},
		{"same-cifar", "cifar10", cifarFiles(cifarBatch(2), cifarBatch(2)), "", nil, 10},
		{"stale-cifar", "cifar10", cifarFiles(cifarBatch(2), cifarBatch(3)),
			"hold different data", []string{"data_batch_1.bin", filepath.Join("cifar-10-batches-bin", "data_batch_1.bin")}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, b := range tc.files {
				write(t, filepath.Join(dir, name), b)
			}
			s, err := Load(tc.dataset, dir, true)
			if tc.want == "" {
				if err != nil || s.N != tc.n {
					t.Fatalf("loaded %v, error %v; want %d examples", s, err, tc.n)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			for _, f := range tc.named {
				if !strings.Contains(err.Error(), filepath.Join(dir, f)+" ") {
					t.Errorf("error %q does not name %s", err, f)
				}
			}
		})
	}
}

// cifarFiles returns CIFAR-10's training batches as files: batch 1 both in
// the folder (top) and in cifar-10-batches-bin (sub), the others in
// cifar-10-batches-bin.
func cifarFiles(top, sub []byte) map[string][]byte {
	m := map[string][]byte{"data_batch_1.bin": top, filepath.Join("cifar-10-batches-bin", "data_batch_1.bin"): sub}
	for i := 2; i <= 5; i++ {
		m[filepath.Join("cifar-10-batches-bin", "data_batch_"+strconv.Itoa(i)+".bin")] = cifarBatch(2)
	}
	return m
}

func TestLoadSplit(t *testing.T) {
	dir := t.TempDir()
	im, lb := mnistFiles(7)
	write(t, filepath.Join(dir, "train-images-idx3-ubyte"), im)
	write(t, filepath.Join(dir, "train-labels-idx1-ubyte.gz"), gz(lb))
	if _, _, err := LoadSplit("mnist", dir); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "t10k-images-idx3-ubyte") {
		t.Errorf("missing test set: error %v, want fs.ErrNotExist naming the file", err)
	}
	// A corrupt file is not a missing one.
	write(t, filepath.Join(dir, "t10k-images-idx3-ubyte"), im[:20])
	write(t, filepath.Join(dir, "t10k-labels-idx1-ubyte"), lb)
	if _, _, err := LoadSplit("mnist", dir); err == nil || errors.Is(err, fs.ErrNotExist) || !errors.Is(err, ErrFormat) {
		t.Errorf("truncated test images: error %v, want ErrFormat, not fs.ErrNotExist", err)
	}
	// Test images of another size than the training images: refused.
	testIm := idx([]int{7, 5, 3}, make([]byte, 7*15))
	write(t, filepath.Join(dir, "t10k-images-idx3-ubyte"), testIm)
	_, _, err := LoadSplit("mnist", dir)
	for _, want := range []string{"1x4x3", "1x5x3", filepath.Join(dir, "train-images-idx3-ubyte,"), filepath.Join(dir, "t10k-images-idx3-ubyte,")} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("train 4x3, test 5x3: error %v, want it to name %s", err, want)
		}
	}
	// The same size loads.
	write(t, filepath.Join(dir, "t10k-images-idx3-ubyte"), im)
	train, test, err := LoadSplit("mnist", dir)
	if err != nil || train.N != 7 || test.N != 7 || train.Name != "mnist" {
		t.Errorf("LoadSplit: %v", err)
	}
}

func plane(h, w int, f func(i, j int) float32) *Set {
	s := &Set{N: 1, C: 1, H: h, W: w, X: make([]float32, h*w), Y: []uint8{0}, Classes: 1}
	for i := 0; i < h; i++ {
		for j := 0; j < w; j++ {
			s.X[i*w+j] = f(i, j)
		}
	}
	return s
}

// resize is Resize with the default budget, failing t on an error.
func resize(t *testing.T, s *Set, h, w int) *Set {
	t.Helper()
	r, err := s.Resize(h, w, 0)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestResize(t *testing.T) {
	// A constant stays constant, up and down.
	c := plane(28, 28, func(i, j int) float32 { return 0.25 })
	for _, sz := range [][2]int{{32, 32}, {20, 20}, {7, 40}} {
		r := resize(t, c, sz[0], sz[1])
		for _, v := range r.X {
			if math.Abs(float64(v)-0.25) > 1e-6 {
				t.Fatalf("constant image resized to %v has %g", sz, v)
			}
		}
	}
	// Upsampling reproduces a linear ramp away from the edges: x_out(j) is
	// the ramp at input coordinate (j + 0.5) * 28/32 - 0.5.
	ramp := plane(28, 28, func(i, j int) float32 { return float32(j) / 27 })
	up := resize(t, ramp, 32, 32)
	for j := 2; j < 30; j++ {
		want := ((float64(j)+0.5)*28/32 - 0.5) / 27
		if got := float64(up.X[5*32+j]); math.Abs(got-want) > 1e-6 {
			t.Errorf("ramp column %d = %g, want %g", j, got, want)
		}
	}
	// Shrinking averages: a one-pixel checkerboard shrunk 32 -> 20 (the
	// paper's CIFAR size) keeps little of its +-1 amplitude, and shrinking by
	// 2 preserves the mean of an arbitrary image.
	checker := plane(32, 32, func(i, j int) float32 { return float32(1 - 2*((i+j)%2)) })
	var peak float64
	for _, v := range resize(t, checker, 20, 20).X {
		peak = max(peak, math.Abs(float64(v)))
	}
	if peak > 0.35 {
		t.Errorf("checkerboard shrunk to 20x20 keeps amplitude %.2f: not averaged", peak)
	}
	img := plane(32, 32, func(i, j int) float32 { return float32((i*7+j*13)%11) / 11 })
	mean := func(s *Set) (m float64) {
		for _, v := range s.X {
			m += float64(v)
		}
		return m / float64(len(s.X))
	}
	if a, b := mean(img), mean(resize(t, img, 16, 16)); math.Abs(a-b) > 0.01 {
		t.Errorf("mean %g became %g after shrinking by 2", a, b)
	}
	if resize(t, img, 32, 32) != img {
		t.Error("resizing to the same size copied the set")
	}
}

// TestResizeBudget checks that ResizeBytes bounds what Resize allocates,
// that Resize refuses past its budget naming the files and the figure, and
// that the default budget admits the full data sets at the paper's sizes.
func TestResizeBudget(t *testing.T) {
	for _, tc := range []struct{ n, c, h, w, toH, toW int }{
		{50, 1, 28, 28, 32, 32},
		{20, 3, 32, 32, 20, 20},
		{1, 1, 1, 4096, 32, 32}, // many taps per output column
		{3, 2, 5, 7, 64, 3},
	} {
		s := &Set{N: tc.n, C: tc.c, H: tc.h, W: tc.w, X: make([]float32, tc.n*tc.c*tc.h*tc.w), Y: make([]uint8, tc.n), Classes: 1}
		want := s.ResizeBytes(tc.toH, tc.toW)
		if want < PixelBytes(tc.n, tc.c, tc.toH, tc.toW) {
			t.Errorf("%v: ResizeBytes %d is less than the pixels alone", tc, want)
		}
		var err error
		if got := allocated(func() { _, err = s.Resize(tc.toH, tc.toW, want+512) }); err != nil || got > uint64(want)+512 {
			t.Errorf("%v: Resize allocated %d bytes (error %v), ResizeBytes says %d", tc, got, err, want)
		}
		if _, err := s.Resize(tc.toH, tc.toW, want-1); err == nil || !strings.Contains(err.Error(), strconv.FormatInt(want, 10)) {
			t.Errorf("%v: a budget one byte short: error %v, want one naming %d", tc, err, want)
		}
	}

	// The reported case: 2^22 images of 1x1 in a 4 KB .gz file read fine,
	// but resizing them to 32x32 would take 16 GiB.
	dir := t.TempDir()
	const n = 1 << 22
	ip := write(t, filepath.Join(dir, "train-images-idx3-ubyte.gz"), gz(idx([]int{n, 1, 1}, make([]byte, n))))
	write(t, filepath.Join(dir, "train-labels-idx1-ubyte.gz"), gz(idx([]int{n}, make([]byte, n))))
	s, err := Load("mnist", dir, true)
	if err != nil {
		t.Fatal(err)
	}
	need := s.ResizeBytes(32, 32)
	if need < 16<<30 {
		t.Fatalf("ResizeBytes(32, 32) = %d, want at least 16 GiB", need)
	}
	if _, err := s.Resize(32, 32, 0); err == nil || !strings.Contains(err.Error(), ip) || !strings.Contains(err.Error(), strconv.FormatInt(need, 10)) {
		t.Errorf("resizing 2^22 images to 32x32: error %v, want one naming %s and %d bytes", err, ip, need)
	}
	if _, err := s.Resize(0, 32, 0); err == nil {
		t.Error("resizing to 0x32 accepted")
	}
	if _, err := (&Set{Name: "short", N: 2, C: 1, H: 2, W: 2, X: make([]float32, 7)}).Resize(4, 4, 0); err == nil || !strings.Contains(err.Error(), "7 values for 2 images of 1x2x2") {
		t.Errorf("a set with 7 values for 8 pixels: error %v", err)
	}

	// The full data sets fit the default budget at the paper's sizes.
	for _, tc := range []struct{ n, c, h, w, side int }{
		{60000, 1, 28, 28, 32}, // MNIST, Fashion-MNIST
		{60000, 3, 32, 32, 20}, // CIFAR-10 for the FFN
	} {
		s := &Set{N: tc.n, C: tc.c, H: tc.h, W: tc.w}
		if b := s.ResizeBytes(tc.side, tc.side); b > DefaultMaxBytes {
			t.Errorf("%v: resizing takes %d bytes, over DefaultMaxBytes", tc, b)
		}
		if b := PixelBytes(tc.n, tc.c, tc.h, tc.w); b > DefaultMaxBytes {
			t.Errorf("%v: reading takes %d bytes, over DefaultMaxBytes", tc, b)
		}
	}
	if b := PixelBytes(60000, 3, 32, 32); b != 737280000 || 2*b > DefaultMaxBytes {
		t.Errorf("CIFAR-10 at 3x32x32 takes %d bytes, not comfortably within DefaultMaxBytes", b)
	}
	if PixelBytes(1<<40, 1<<20, 1<<20, 1) != math.MaxInt64 || PixelBytes(-1, 1, 1, 1) != math.MaxInt64 {
		t.Error("PixelBytes does not saturate")
	}
}

func TestLoader(t *testing.T) {
	im, lb := mnistFiles(23)
	dir := t.TempDir()
	s, err := ReadIDX(write(t, filepath.Join(dir, "i"), im), write(t, filepath.Join(dir, "l"), lb))
	if err != nil {
		t.Fatal(err)
	}
	order := func(seed uint64, epoch int) []float32 {
		l, err := NewLoader(s, 5, seed)
		if err != nil {
			t.Fatal(err)
		}
		l.SetEpoch(epoch)
		x := make([]float32, 5*s.Dim())
		y := make([]int, 5)
		var firsts []float32
		seen := map[float32]bool{}
		batches := 0
		for {
			n, err := l.Next(x, y)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			batches++
			for k := 0; k < n; k++ {
				first := x[k*s.Dim()] // pixel 0 of image i is (12 i) % 256: unique here
				if seen[first] {
					t.Fatalf("an example came twice in one epoch")
				}
				seen[first] = true
				firsts = append(firsts, first)
			}
		}
		if len(seen) != 23 || batches != l.BatchesPerEpoch() {
			t.Fatalf("epoch served %d examples in %d batches, want 23 in %d", len(seen), batches, l.BatchesPerEpoch())
		}
		return firsts
	}
	a, b, c, d := order(1, 0), order(1, 0), order(1, 1), order(2, 0)
	same := func(x, y []float32) bool {
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	if !same(a, b) {
		t.Error("same seed and epoch, different order")
	}
	if same(a, c) || same(a, d) {
		t.Error("another epoch or seed gave the same order")
	}
	// Seek to example 10 of epoch 1 serves the rest of that epoch's order.
	l, _ := NewLoader(s, 5, 1)
	if err := l.Seek(1, 10); err != nil || l.Pos() != 10 || l.Epoch() != 1 {
		t.Fatalf("Seek(1, 10): %v, at %d of epoch %d", err, l.Pos(), l.Epoch())
	}
	x := make([]float32, 5*s.Dim())
	for k := 10; k < 23; k += 5 {
		n, _ := l.Next(x, make([]int, 5))
		for i := 0; i < n; i++ {
			if x[i*s.Dim()] != c[k+i] {
				t.Fatalf("after Seek, example %d of epoch 1 differs", k+i)
			}
		}
	}
	if err := l.Seek(0, 24); err == nil {
		t.Error("Seek past the end accepted")
	}
	if _, err := l.Next(make([]float32, 10), make([]int, 5)); err == nil {
		t.Error("Next accepted a short buffer")
	}
	if _, err := NewLoader(s, 0, 1); err == nil {
		t.Error("NewLoader accepted batch size 0")
	}
}

func digest(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

func TestDownload(t *testing.T) {
	im, lb := mnistFiles(4)
	files := map[string][]byte{"train-images-idx3-ubyte.gz": gz(im), "train-labels-idx1-ubyte.gz": gz(lb)}
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if strings.HasPrefix(r.URL.Path, "/dead/") {
			http.NotFound(w, r)
			return
		}
		b, ok := files[filepath.Base(r.URL.Path)]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/corrupt/") {
			b = append([]byte(nil), b...)
			b[len(b)/2] ^= 0xff
		}
		_, _ = w.Write(b)
	}))
	defer srv.Close()
	remotes := []Remote{
		{"train-images-idx3-ubyte.gz", digest(files["train-images-idx3-ubyte.gz"]), int64(len(files["train-images-idx3-ubyte.gz"]))},
		{"train-labels-idx1-ubyte.gz", digest(files["train-labels-idx1-ubyte.gz"]), int64(len(files["train-labels-idx1-ubyte.gz"]))},
	}
	ctx := context.Background()

	// The first mirror is dead: the second serves verified files, 0644.
	dir := t.TempDir()
	dl := &Downloader{Client: srv.Client()}
	src := Source{Mirrors: []string{srv.URL + "/dead/", srv.URL + "/good/"}, Files: remotes}
	if err := dl.Fetch(ctx, src, dir); err != nil {
		t.Fatal(err)
	}
	if s, err := Load("mnist", dir, true); err != nil || s.N != 4 {
		t.Fatalf("loading the download: %v", err)
	}
	for _, r := range remotes {
		if fi, err := os.Stat(filepath.Join(dir, r.Name)); err != nil || fi.Mode() != 0o644 {
			t.Errorf("%s: mode %v (%v), want -rw-r--r--", r.Name, fi.Mode(), err)
		}
	}
	// Present and verified: nothing is fetched again.
	before := requests.Load()
	if err := dl.Fetch(ctx, src, dir); err != nil {
		t.Fatal(err)
	}
	if requests.Load() != before {
		t.Error("verified files were fetched again")
	}

	// A corrupted download fails the checksum and leaves nothing behind.
	dir2 := t.TempDir()
	bad := Source{Mirrors: []string{srv.URL + "/corrupt/"}, Files: remotes}
	if err := dl.Fetch(ctx, bad, dir2); !errors.Is(err, ErrChecksum) {
		t.Fatalf("corrupt download: error %v, want ErrChecksum", err)
	}
	if left, _ := os.ReadDir(dir2); len(left) != 0 {
		t.Errorf("a failed download left %d files", len(left))
	}
	// Into folders that did not exist (an offline -download): a failure
	// leaves no folder behind, and a folder that held a file stays.
	parent := t.TempDir()
	fresh := filepath.Join(parent, "data", "mnist")
	if err := dl.Fetch(ctx, Source{Mirrors: []string{srv.URL + "/dead/"}, Files: remotes}, fresh); err == nil {
		t.Fatal("a dead mirror: no error")
	}
	if left, _ := os.ReadDir(parent); len(left) != 0 {
		t.Errorf("a failed download into a new folder left %v", left)
	}
	kept := filepath.Join(parent, "kept")
	if err := os.MkdirAll(kept, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := dl.Fetch(ctx, Source{Mirrors: []string{srv.URL + "/dead/"}, Files: remotes}, kept); err == nil {
		t.Fatal("a dead mirror: no error")
	}
	if _, err := os.Stat(kept); err != nil {
		t.Errorf("a failed download removed the folder it was given: %v", err)
	}
	// A size that disagrees is refused.
	short := Source{Mirrors: []string{srv.URL + "/good/"}, Files: []Remote{{remotes[0].Name, remotes[0].SHA256, remotes[0].Size - 1}}}
	if err := dl.Fetch(ctx, short, t.TempDir()); err == nil || !strings.Contains(err.Error(), "want") {
		t.Errorf("oversized download: error %v", err)
	}
	if err := Download(ctx, nil, "fashion-mnist", t.TempDir()); err == nil || !strings.Contains(err.Error(), "dataset-fashion-mnist") {
		t.Errorf("fashion-mnist download: error %v", err)
	}
}

// cifarArchive returns a CIFAR-10 tar.gz: five training batches of one
// record, a test batch of two, an entry that tries to escape, and a page.
func cifarArchive() []byte {
	var tgz bytes.Buffer
	zw := gzip.NewWriter(&tgz)
	tw := tar.NewWriter(zw)
	add := func(name string, b []byte) {
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg})
		_, _ = tw.Write(b)
	}
	for i := 1; i <= 5; i++ {
		add("cifar-10-batches-bin/data_batch_"+strconv.Itoa(i)+".bin", cifarBatch(1))
	}
	add("cifar-10-batches-bin/test_batch.bin", cifarBatch(2))
	add("../../escape.bin", cifarBatch(1)) // written by base name only
	add("cifar-10-batches-bin/readme.html", []byte("<html>"))
	_ = tw.Close()
	_ = zw.Close()
	return tgz.Bytes()
}

func TestDownloadCIFARArchive(t *testing.T) {
	archive := cifarArchive()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(archive) }))
	defer srv.Close()
	src := Source{Mirrors: []string{srv.URL}, Files: []Remote{{"cifar-10-binary.tar.gz", digest(archive), int64(len(archive))}}, Archive: true}
	dl := &Downloader{Client: srv.Client()}
	victimBytes := []byte("the user's file, not to be touched\n")

	for _, tc := range []struct {
		name string
		// plant prepares dir and returns the victim file that must stay
		// byte-identical ("" for none).
		plant func(t *testing.T, dir string) string
		want  string // error; "" for success
	}{
		{"fresh", func(t *testing.T, dir string) string { return "" }, ""},
		{"stale-extraction", func(t *testing.T, dir string) string {
			// An extraction killed midway, an hour ago.
			p := filepath.Join(dir, ".cifar-10-batches-bin.123.part")
			write(t, filepath.Join(p, "data_batch_1.bin"), []byte("half"))
			old := time.Now().Add(-time.Hour)
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
			return ""
		}, ""},
		{"symlinked-batch", func(t *testing.T, dir string) string {
			victim := write(t, filepath.Join(t.TempDir(), "victim"), victimBytes)
			write(t, filepath.Join(dir, "cifar-10-batches-bin", "keep.txt"), nil)
			if err := os.Symlink(victim, filepath.Join(dir, "cifar-10-batches-bin", "test_batch.bin")); err != nil {
				t.Fatal(err)
			}
			return victim
		}, ""},
		{"symlinked-folder", func(t *testing.T, dir string) string {
			target := t.TempDir()
			victim := write(t, filepath.Join(target, "test_batch.bin"), victimBytes)
			if err := os.Symlink(target, filepath.Join(dir, "cifar-10-batches-bin")); err != nil {
				t.Fatal(err)
			}
			return victim
		}, "is not a folder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			victim := tc.plant(t, dir)
			err := dl.Fetch(context.Background(), src, dir)
			if victim != "" {
				if b, rerr := os.ReadFile(victim); rerr != nil || !bytes.Equal(b, victimBytes) {
					t.Errorf("the planted symlink's target changed: %d bytes, %v", len(b), rerr)
				}
			}
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), filepath.Join(dir, "cifar-10-batches-bin")) {
					t.Errorf("error %v, want %q naming the folder", err, tc.want)
				}
				if entries, _ := os.ReadDir(filepath.Dir(victim)); len(entries) != 1 {
					t.Errorf("the symlinked folder's target holds %d entries, want only the victim", len(entries))
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				s, err := Load("cifar10", dir, false)
				if err != nil || s.N != 2 {
					t.Fatalf("test batch from the archive: %v", err)
				}
				if fi, err := os.Lstat(filepath.Join(dir, "cifar-10-batches-bin", "test_batch.bin")); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
					t.Errorf("test_batch.bin: %v, %v; want a regular file, mode 0644", fi.Mode(), err)
				}
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape.bin")); err == nil {
				t.Error("an archive entry escaped the target folder")
			}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), ".") {
					t.Errorf("a temporary %s was left in %s", e.Name(), dir)
				}
			}
		})
	}
}

// TestDownloadTimeouts serves files from mirrors that never answer, stall
// after the headers, or trickle a byte at a time: each is given up, naming
// the timeout that ended it, and the next mirror is tried.
func TestDownloadTimeouts(t *testing.T) {
	file := gz(bytes.Repeat([]byte("orthonet"), 1000))
	remotes := []Remote{{"f.gz", digest(file), int64(len(file))}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/silent/"): // never answers
			<-r.Context().Done()
		case strings.HasPrefix(r.URL.Path, "/stall/"): // headers, then nothing
			w.Header().Set("Content-Length", strconv.Itoa(len(file)))
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(file[:10])
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case strings.HasPrefix(r.URL.Path, "/drip/"): // a byte every 5 ms
			w.Header().Set("Content-Length", strconv.Itoa(len(file)))
			for _, b := range file {
				if _, err := w.Write([]byte{b}); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
		default:
			_, _ = w.Write(file)
		}
	}))
	defer srv.Close()
	dl := &Downloader{Client: srv.Client(), ConnectTimeout: 100 * time.Millisecond, IdleTimeout: 100 * time.Millisecond, Timeout: 300 * time.Millisecond}
	ctx := context.Background()
	for _, tc := range []struct{ mirror, want string }{
		{"silent", "no response within 100ms (the Downloader's ConnectTimeout)"},
		{"stall", "no data for 100ms (the Downloader's IdleTimeout)"},
		{"drip", "not done within 300ms (the Downloader's Timeout)"},
	} {
		t.Run(tc.mirror, func(t *testing.T) {
			dir := t.TempDir()
			src := Source{Mirrors: []string{srv.URL + "/" + tc.mirror + "/", srv.URL + "/good/"}, Files: remotes}
			if err := dl.Fetch(ctx, src, dir); err != nil {
				t.Fatalf("the second mirror was not tried: %v", err)
			}
			if b, err := os.ReadFile(filepath.Join(dir, "f.gz")); err != nil || !bytes.Equal(b, file) {
				t.Fatalf("downloaded file differs: %v", err)
			}
			src.Mirrors = src.Mirrors[:1]
			err := dl.Fetch(ctx, src, dir+"/alone")
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), srv.URL+"/"+tc.mirror+"/f.gz") {
				t.Errorf("error %v, want %q naming the URL", err, tc.want)
			}
			if left, _ := os.ReadDir(dir + "/alone"); len(left) != 0 {
				t.Errorf("a failed download left %d files", len(left))
			}
		})
	}
}

// TestDownloadEncoding serves the .gz as mirrors do that set
// Content-Encoding: gzip, stored so (S3) or compressed on request: the file
// must arrive as published, not unzipped by the transport.
func TestDownloadEncoding(t *testing.T) {
	file := gz(bytes.Repeat([]byte("orthonet"), 1000))
	var asked atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Store(r.Header.Get("Accept-Encoding"))
		switch {
		case strings.HasPrefix(r.URL.Path, "/stored/"): // the .gz's bytes, labelled gzip
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(file)
		case strings.Contains(r.Header.Get("Accept-Encoding"), "gzip"): // compresses when asked
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(gz(file))
		default:
			_, _ = w.Write(file)
		}
	}))
	defer srv.Close()
	for _, mirror := range []string{"stored", "on-request"} {
		dir := t.TempDir()
		src := Source{Mirrors: []string{srv.URL + "/" + mirror + "/"}, Files: []Remote{{"f.gz", digest(file), int64(len(file))}}}
		if err := (&Downloader{Client: srv.Client()}).Fetch(context.Background(), src, dir); err != nil {
			t.Errorf("%s: %v", mirror, err)
		}
		if got := asked.Load(); got != "identity" {
			t.Errorf("%s: the request's Accept-Encoding is %q, want identity", mirror, got)
		}
	}
}

// TestDownloadStaleParts leaves temporary files as a killed download
// would: the next download removes exactly those of its pattern that are
// old, and nothing else.
func TestDownloadStaleParts(t *testing.T) {
	file := gz([]byte("orthonet"))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(file) }))
	defer srv.Close()
	dir := t.TempDir()
	old := time.Now().Add(-time.Hour)
	target := write(t, filepath.Join(t.TempDir(), "target"), []byte("kept"))
	for _, tc := range []struct {
		name    string
		old     bool
		link    bool
		removed bool
	}{
		{".f.gz.1234567890.part", true, false, true},
		{".f.gz.42.part", true, false, true},
		{".f.gz.43.part", false, false, false}, // may be a download in progress
		{".f.gz.12a.part", true, false, false},
		{".f.gz..part", true, false, false},
		{"f.gz.44.part", true, false, false},
		{".f.gz.45.part.bak", true, false, false},
		{".g.gz.46.part", true, false, false},
		{".f.gz.12345678901.part", true, false, false},
		{".f.gz.47.part", true, true, false}, // a symlink, not ours
	} {
		p := filepath.Join(dir, tc.name)
		if tc.link {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
		} else {
			write(t, p, []byte("partial"))
		}
		if tc.old && !tc.link {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
		defer func() {
			if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) != tc.removed {
				t.Errorf("%s: removed is %v, want %v", tc.name, !tc.removed, tc.removed)
			}
		}()
	}
	src := Source{Mirrors: []string{srv.URL}, Files: []Remote{{"f.gz", digest(file), int64(len(file))}}}
	if err := (&Downloader{Client: srv.Client(), IdleTimeout: time.Second}).Fetch(context.Background(), src, dir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "kept" {
		t.Errorf("the symlink's target changed: %q, %v", b, err)
	}
}

// TestFashionMNIST reads the real Fashion-MNIST that Debian's package
// installs: 60,000 training and 10,000 test images of 28 x 28, every class
// equally often. make test installs the package and sets
// ORTHONET_REQUIRE_DATA=1, so there it cannot be skipped.
func TestFashionMNIST(t *testing.T) {
	if _, err := os.Stat(FashionMNISTDir); err != nil {
		if os.Getenv("ORTHONET_REQUIRE_DATA") != "" {
			t.Fatalf("Fashion-MNIST is required: %v", err)
		}
		t.Skip("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)")
	}
	for _, tc := range []struct {
		train bool
		n     int
	}{{false, 10000}, {true, 60000}} {
		s, err := Load("fashion-mnist", "", tc.train)
		if err != nil {
			t.Fatal(err)
		}
		if s.N != tc.n || s.H != 28 || s.W != 28 {
			t.Fatalf("train=%v: %d images of %dx%d", tc.train, s.N, s.H, s.W)
		}
		counts := make([]int, 10)
		for _, y := range s.Y {
			counts[y]++
		}
		for c, k := range counts {
			if k != tc.n/10 {
				t.Errorf("train=%v: class %d has %d examples, want %d", tc.train, c, k, tc.n/10)
			}
		}
		lo, hi := float32(1), float32(-1)
		for _, v := range s.X {
			lo, hi = min(lo, v), max(hi, v)
		}
		if lo != -1 || hi != 1 {
			t.Errorf("train=%v: pixel range [%g, %g], want [-1, 1]", tc.train, lo, hi)
		}
	}
}
