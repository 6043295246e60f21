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
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
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
	for _, tc := range []struct {
		name           string
		images, labels []byte
		want           string
	}{
		{"raw", im, lb, ""},
		{"gzip", gz(im), gz(lb), ""},
		{"count-mismatch", im, idx([]int{24}, make([]byte, 24)), "has 25 images but"},
		{"bad-magic", append([]byte{1, 2}, im[2:]...), lb, "not an IDX file"},
		{"float-type", append([]byte{0, 0, 0x0d}, im[3:]...), lb, "element type 0x0d"},
		{"truncated", im[:len(im)-5], lb, "truncated: header [25 4 3] announces 300 bytes, file has 295"},
		{"trailing", append(append([]byte(nil), im...), 7), lb, "trailing data"},
		{"short-header", im[:9], lb, "truncated IDX header"},
		{"huge-header", huge, lb, "larger than"},
		{"label-range", im, idx([]int{25}, bytes.Repeat([]byte{11}, 25)), "label 11 of example 0"},
		{"labels-2d", im, idx([]int{25, 1}, make([]byte, 25)), "labels have 2 dimensions"},
		{"bad-gzip", append([]byte{0x1f, 0x8b}, 1, 2, 3), lb, "gzip"},
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
				if !strings.Contains(err.Error(), dir) {
					t.Errorf("error %q does not name the file", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.N != 25 || s.C != 1 || s.H != 4 || s.W != 3 || s.Dim() != 12 {
				t.Fatalf("shape %d x %d x %d x %d", s.N, s.C, s.H, s.W)
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

func plane(h, w int, f func(i, j int) float32) *Set {
	s := &Set{N: 1, C: 1, H: h, W: w, X: make([]float32, h*w), Y: []uint8{0}, Classes: 1}
	for i := 0; i < h; i++ {
		for j := 0; j < w; j++ {
			s.X[i*w+j] = f(i, j)
		}
	}
	return s
}

func TestResize(t *testing.T) {
	// A constant stays constant, up and down.
	c := plane(28, 28, func(i, j int) float32 { return 0.25 })
	for _, sz := range [][2]int{{32, 32}, {20, 20}, {7, 40}} {
		r := c.Resize(sz[0], sz[1])
		for _, v := range r.X {
			if math.Abs(float64(v)-0.25) > 1e-6 {
				t.Fatalf("constant image resized to %v has %g", sz, v)
			}
		}
	}
	// Upsampling reproduces a linear ramp away from the edges: x_out(j) is
	// the ramp at input coordinate (j + 0.5) * 28/32 - 0.5.
	ramp := plane(28, 28, func(i, j int) float32 { return float32(j) / 27 })
	up := ramp.Resize(32, 32)
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
	for _, v := range checker.Resize(20, 20).X {
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
	if a, b := mean(img), mean(img.Resize(16, 16)); math.Abs(a-b) > 0.01 {
		t.Errorf("mean %g became %g after shrinking by 2", a, b)
	}
	if img.Resize(32, 32) != img {
		t.Error("resizing to the same size copied the set")
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

	// The first mirror is dead: the second serves verified files.
	dir := t.TempDir()
	src := Source{Mirrors: []string{srv.URL + "/dead/", srv.URL + "/good/"}, Files: remotes}
	if err := src.Download(ctx, srv.Client(), dir); err != nil {
		t.Fatal(err)
	}
	if s, err := Load("mnist", dir, true); err != nil || s.N != 4 {
		t.Fatalf("loading the download: %v", err)
	}
	// Present and verified: nothing is fetched again.
	before := requests.Load()
	if err := src.Download(ctx, srv.Client(), dir); err != nil {
		t.Fatal(err)
	}
	if requests.Load() != before {
		t.Error("verified files were fetched again")
	}

	// A corrupted download fails the checksum and leaves nothing behind.
	dir2 := t.TempDir()
	bad := Source{Mirrors: []string{srv.URL + "/corrupt/"}, Files: remotes}
	if err := bad.Download(ctx, srv.Client(), dir2); !errors.Is(err, ErrChecksum) {
		t.Fatalf("corrupt download: error %v, want ErrChecksum", err)
	}
	if left, _ := os.ReadDir(dir2); len(left) != 0 {
		t.Errorf("a failed download left %d files", len(left))
	}
	// A size that disagrees is refused.
	short := Source{Mirrors: []string{srv.URL + "/good/"}, Files: []Remote{{remotes[0].Name, remotes[0].SHA256, remotes[0].Size - 1}}}
	if err := short.Download(ctx, srv.Client(), t.TempDir()); err == nil || !strings.Contains(err.Error(), "want") {
		t.Errorf("oversized download: error %v", err)
	}
	if err := Download(ctx, nil, "fashion-mnist", t.TempDir()); err == nil || !strings.Contains(err.Error(), "dataset-fashion-mnist") {
		t.Errorf("fashion-mnist download: error %v", err)
	}
}

func TestDownloadCIFARArchive(t *testing.T) {
	var tgz bytes.Buffer
	zw := gzip.NewWriter(&tgz)
	tw := tar.NewWriter(zw)
	add := func(name string, b []byte) {
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg})
		_, _ = tw.Write(b)
	}
	for i := 1; i <= 5; i++ {
		add("cifar-10-batches-bin/data_batch_"+string(rune('0'+i))+".bin", cifarBatch(1))
	}
	add("cifar-10-batches-bin/test_batch.bin", cifarBatch(2))
	add("../../escape.bin", cifarBatch(1)) // written by base name only
	add("cifar-10-batches-bin/readme.html", []byte("<html>"))
	_ = tw.Close()
	_ = zw.Close()
	archive := tgz.Bytes()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(archive) }))
	defer srv.Close()
	dir := t.TempDir()
	src := Source{Mirrors: []string{srv.URL}, Files: []Remote{{"cifar-10-binary.tar.gz", digest(archive), int64(len(archive))}}, Archive: true}
	if err := src.Download(context.Background(), srv.Client(), dir); err != nil {
		t.Fatal(err)
	}
	s, err := Load("cifar10", dir, false)
	if err != nil || s.N != 2 {
		t.Fatalf("test batch from the archive: %v", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape.bin")); err == nil {
		t.Error("an archive entry escaped the target folder")
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
