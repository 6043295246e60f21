package data

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// writeFile writes b to dir/name, making dir.
func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return write(t, filepath.Join(dir, name), b)
}

// uniformPNG returns a w x h grayscale PNG of one value.
func uniformPNG(t *testing.T, w, h int, v uint8) []byte {
	return encodePNG(t, grayImage(w, h, func(int, int) uint8 { return v }))
}

// rampPNG returns a 4 x 2 grayscale PNG whose pixel (x, y) is base + 4y + x.
func rampPNG(t *testing.T, base uint8) []byte {
	return encodePNG(t, grayImage(4, 2, func(x, y int) uint8 { return base + uint8(4*y+x) }))
}

func encodeJPEG(t *testing.T, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// scaled returns the [-1, 1] values of bytes, as every reader scales them.
func scaled(b ...uint8) []float32 {
	x := make([]float32, len(b))
	for i, v := range b {
		x[i] = float32(v)/127.5 - 1
	}
	return x
}

// ramp returns the 8 bytes of rampPNG(base).
func ramp(base uint8) []uint8 {
	b := make([]uint8, 8)
	for i := range b {
		b[i] = base + uint8(i)
	}
	return b
}

// TestReadImageFolder checks class order (sorted names, not the order of
// creation), file order, pixels of PNGs and JPEGs, resizing, and that hidden
// names are ignored.
func TestReadImageFolder(t *testing.T) {
	dir := t.TempDir()
	// zebra is created first: labels follow the sorted names.
	writeFile(t, filepath.Join(dir, "zebra"), "b.png", rampPNG(t, 100))
	writeFile(t, filepath.Join(dir, "zebra"), "a.png", rampPNG(t, 50))
	writeFile(t, filepath.Join(dir, "ant"), "only.png", rampPNG(t, 0))
	gradient := grayImage(4, 2, func(x, y int) uint8 { return uint8(30*x + 60*y) })
	jpg := encodeJPEG(t, gradient)
	writeFile(t, filepath.Join(dir, "moth"), "x.jpeg", jpg)
	writeFile(t, filepath.Join(dir, "moth"), "y.png", uniformPNG(t, 8, 4, 200)) // resized to 4 x 2
	writeFile(t, filepath.Join(dir, "moth"), ".DS_Store", []byte("junk"))
	writeFile(t, filepath.Join(dir, ".git"), "HEAD", []byte("junk"))
	writeFile(t, dir, ".hidden", []byte("junk"))

	s, err := ReadImageFolder(dir, FolderOptions{C: 1, H: 2, W: 4})
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != dir || s.N != 5 || s.C != 1 || s.H != 2 || s.W != 4 || s.Classes != 3 || len(s.X) != 5*8 || s.Skipped != nil {
		t.Fatalf("%s: %d images of %dx%dx%d, %d classes, %d values, skipped %v; want %s: 5 of 1x2x4, 3, 40, none", s.Name, s.N, s.C, s.H, s.W, s.Classes, len(s.X), s.Skipped, dir)
	}
	if want := []string{"ant", "moth", "zebra"}; !slices.Equal(s.ClassNames, want) {
		t.Errorf("ClassNames %q, want %q", s.ClassNames, want)
	}
	if want := []uint8{0, 1, 1, 2, 2}; !slices.Equal(s.Y, want) {
		t.Errorf("labels %v, want %v", s.Y, want)
	}
	var files []string
	for _, f := range []string{"ant/only.png", "moth/x.jpeg", "moth/y.png", "zebra/a.png", "zebra/b.png"} {
		files = append(files, filepath.Join(dir, f))
	}
	if !slices.Equal(s.Files, files) {
		t.Errorf("Files %q, want %q", s.Files, files)
	}
	dec, err := jpeg.Decode(bytes.NewReader(jpg))
	if err != nil {
		t.Fatal(err)
	}
	var jpegBytes []uint8
	for y := range 2 {
		for x := range 4 {
			jpegBytes = append(jpegBytes, color.GrayModel.Convert(dec.At(x, y)).(color.Gray).Y)
		}
	}
	for i, want := range [][]float32{scaled(ramp(0)...), scaled(jpegBytes...), nil, scaled(ramp(50)...), scaled(ramp(100)...)} {
		if want != nil && !slices.Equal(s.Image(i), want) {
			t.Errorf("image %d (%s) is %v, want %v", i, s.Files[i], s.Image(i), want)
		}
	}
	for _, v := range s.Image(2) { // a uniform image stays uniform when resized
		if want := scaled(200)[0]; math.Abs(float64(v-want)) > 1e-6 {
			t.Errorf("resized uniform image has %v, want %v", v, want)
			break
		}
	}

	// Three channels: a grayscale image is three equal planes.
	s3, err := ReadImageFolder(dir, FolderOptions{C: 3, H: 2, W: 4})
	if err != nil {
		t.Fatal(err)
	}
	for i := range s.N {
		for c := range 3 {
			if !slices.Equal(s3.Image(i)[8*c:8*(c+1)], s.Image(i)) {
				t.Errorf("image %d, channel %d differs from the grayscale image", i, c)
			}
		}
	}

	// The order does not depend on the number of goroutines decoding.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	one, err := ReadImageFolder(dir, FolderOptions{C: 1, H: 2, W: 4})
	if err != nil {
		t.Fatal(err)
	}
	runtime.GOMAXPROCS(7)
	seven, err := ReadImageFolder(dir, FolderOptions{C: 1, H: 2, W: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*Set{one, seven} {
		if !slices.Equal(r.X, s.X) || !slices.Equal(r.Y, s.Y) || !slices.Equal(r.Files, s.Files) {
			t.Error("another number of goroutines read another set")
		}
	}
}

// TestReadImageFolderColour checks RGB pixels, and that a colour image is
// refused where one channel is asked for.
func TestReadImageFolderColour(t *testing.T) {
	dir := t.TempDir()
	img := rgbImage(3, 2, func(c, x, y int) uint8 { return uint8(100*c + 10*y + x) })
	writeFile(t, filepath.Join(dir, "red"), "a.png", encodePNG(t, img))
	s, err := ReadImageFolder(dir, FolderOptions{C: 3, H: 2, W: 3})
	if err != nil {
		t.Fatal(err)
	}
	var want []uint8
	for c := range 3 {
		for y := range 2 {
			for x := range 3 {
				want = append(want, uint8(100*c+10*y+x))
			}
		}
	}
	if !slices.Equal(s.X, scaled(want...)) {
		t.Errorf("pixels %v, want %v", s.X, scaled(want...))
	}
	_, err = ReadImageFolder(dir, FolderOptions{C: 1, H: 2, W: 3})
	if err == nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), filepath.Join(dir, "red", "a.png")) || !strings.Contains(err.Error(), "colour") {
		t.Errorf("a colour image read as grayscale: error %v", err)
	}
}

// TestReadImageFolderFaults checks that each faulty file is refused with
// an error naming it and the fault, or skipped and listed with Skip.
func TestReadImageFolderFaults(t *testing.T) {
	good := rampPNG(t, 9)
	png := rampPNG(t, 1)
	for _, tc := range []struct {
		name  string
		bad   func(t *testing.T, class string) string // makes the faulty file in class, returns its path
		fault string
	}{
		{"empty", func(t *testing.T, c string) string { return writeFile(t, c, "e.png", nil) }, "empty file"},
		{"text", func(t *testing.T, c string) string { return writeFile(t, c, "notes.txt", []byte("hello")) }, "not a PNG or JPEG"},
		{"truncated PNG", func(t *testing.T, c string) string { return writeFile(t, c, "t.png", png[:len(png)-20]) }, "bad file format"},
		{"bad JPEG", func(t *testing.T, c string) string {
			return writeFile(t, c, "j.jpg", []byte{0xff, 0xd8, 0xff, 0xe0, 0, 3, 1, 2})
		}, "bad file format"},
		{"too many pixels", func(t *testing.T, c string) string { return writeFile(t, c, "h.png", hugePNG(t, 5000, 5000)) }, "MaxImagePixels"},
		{"folder", func(t *testing.T, c string) string {
			p := filepath.Join(c, "sub")
			writeFile(t, p, "a.png", good)
			return p
		}, "a folder, not a regular file"},
	} {
		for _, skip := range []bool{false, true} {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "a"), "0.png", good)
			writeFile(t, filepath.Join(dir, "a"), "z.png", good)
			writeFile(t, filepath.Join(dir, "b"), "0.png", good)
			path := tc.bad(t, filepath.Join(dir, "a"))
			s, err := ReadImageFolder(dir, FolderOptions{C: 1, H: 2, W: 4, Skip: skip})
			if !skip {
				if err == nil || !strings.HasPrefix(err.Error(), "data: ") || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.fault) {
					t.Errorf("%s: error %v, want one naming %s and saying %q", tc.name, err, path, tc.fault)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s, skipping: %v", tc.name, err)
				continue
			}
			if s.N != 3 || len(s.Skipped) != 1 || !strings.Contains(s.Skipped[0], path) || !strings.Contains(s.Skipped[0], tc.fault) || slices.Contains(s.Files, path) {
				t.Errorf("%s, skipping: %d images, skipped %q; want 3, and %s with %q", tc.name, s.N, s.Skipped, path, tc.fault)
			}
			if !slices.Equal(s.Y, []uint8{0, 0, 1}) || !slices.Equal(s.X, scaled(slices.Concat(ramp(9), ramp(9), ramp(9))...)) {
				t.Errorf("%s, skipping: labels %v and pixels of the images kept are wrong", tc.name, s.Y)
			}
		}
	}
}

// TestReadImageFolderFirstFault checks that of two faulty files, the one
// first in the set's order is reported, however many goroutines decode.
func TestReadImageFolderFirstFault(t *testing.T) {
	dir := t.TempDir()
	for i := range 40 {
		writeFile(t, filepath.Join(dir, "a"), fmt.Sprintf("%02d.png", i), rampPNG(t, 0))
	}
	first := writeFile(t, filepath.Join(dir, "a"), "20.png", []byte("bad"))
	writeFile(t, filepath.Join(dir, "a"), "30.png", nil)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	for range 5 {
		_, err := ReadImageFolder(dir, FolderOptions{C: 1, H: 2, W: 4})
		if err == nil || !strings.Contains(err.Error(), first) {
			t.Fatalf("error %v, want one naming %s", err, first)
		}
	}
}

// TestReadImageFolderRefuses checks the faults of a folder as a whole.
func TestReadImageFolderRefuses(t *testing.T) {
	good := rampPNG(t, 0)
	opts := FolderOptions{C: 1, H: 2, W: 4}
	for _, tc := range []struct {
		name  string
		make  func(t *testing.T, dir string)
		opts  FolderOptions
		fault string
	}{
		{"empty class", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "a"), "0.png", good)
			writeFile(t, filepath.Join(dir, "b"), ".hidden.png", good)
		}, opts, `class "b" has no images`},
		{"all skipped", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "a"), "0.png", good)
			writeFile(t, filepath.Join(dir, "b"), "0.png", nil)
		}, FolderOptions{C: 1, H: 2, W: 4, Skip: true}, `class "b" has no images that could be read`},
		{"file among classes", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "a"), "0.png", good)
			writeFile(t, dir, "stray.png", good)
		}, opts, "stray.png is a file, not a folder"},
		{"no classes", func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, ".a"), "0.png", good) }, opts, "no class folders"},
		{"257 classes", func(t *testing.T, dir string) {
			for c := range 257 {
				writeFile(t, filepath.Join(dir, fmt.Sprintf("c%03d", c)), "0.png", good)
			}
		}, opts, "more than 256 class folders"},
		{"over budget", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "a"), "0.png", good)
			writeFile(t, filepath.Join(dir, "a"), "1.png", good)
		}, FolderOptions{C: 1, H: 2, W: 4, MaxBytes: 63}, "2 images of 1x2x4 take 64 bytes"},
		{"2 channels", func(t *testing.T, dir string) {}, FolderOptions{C: 2, H: 2, W: 4}, "2 channels asked for"},
		{"no height", func(t *testing.T, dir string) {}, FolderOptions{C: 1, H: 0, W: 4}, "positive sizes"},
		{"missing folder", func(t *testing.T, dir string) { os.Remove(dir) }, opts, "no such file"},
	} {
		dir := filepath.Join(t.TempDir(), "set")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		tc.make(t, dir)
		_, err := ReadImageFolder(dir, tc.opts)
		if err == nil || !strings.HasPrefix(err.Error(), "data: ") || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), tc.fault) {
			t.Errorf("%s: error %v, want one naming %s and saying %q", tc.name, err, dir, tc.fault)
		}
	}
	// 256 classes are fine.
	dir := t.TempDir()
	for c := range 256 {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("c%03d", c)), "0.png", good)
	}
	s, err := ReadImageFolder(dir, opts)
	if err != nil || s.Classes != 256 || s.Y[255] != 255 || s.ClassNames[255] != "c255" {
		t.Errorf("256 classes: %v", err)
	}
}

func TestReadImageFolderSplit(t *testing.T) {
	root := t.TempDir()
	for i, c := range []string{"cat", "dog"} {
		writeFile(t, filepath.Join(root, "train", c), "0.png", rampPNG(t, uint8(10*i)))
		writeFile(t, filepath.Join(root, "train", c), "1.png", rampPNG(t, uint8(10*i+1)))
		writeFile(t, filepath.Join(root, "test", c), "0.png", rampPNG(t, uint8(10*i+2)))
	}
	writeFile(t, root, "README", []byte("other entries of the root are ignored"))
	train, test, err := ReadImageFolderSplit(root, FolderOptions{C: 1, H: 2, W: 4})
	if err != nil {
		t.Fatal(err)
	}
	if train.N != 4 || test.N != 2 || !slices.Equal(train.Y, []uint8{0, 0, 1, 1}) || !slices.Equal(test.Y, []uint8{0, 1}) ||
		!slices.Equal(train.ClassNames, test.ClassNames) || train.Name != filepath.Join(root, "train") {
		t.Fatalf("train %d %v, test %d %v", train.N, train.Y, test.N, test.Y)
	}
	if !slices.Equal(test.Image(1), scaled(ramp(12)...)) {
		t.Errorf("test image 1 is %v, want %v", test.Image(1), scaled(ramp(12)...))
	}

	// Classes that differ are named, each side's.
	writeFile(t, filepath.Join(root, "train", "emu"), "0.png", rampPNG(t, 0))
	writeFile(t, filepath.Join(root, "test", "ant"), "0.png", rampPNG(t, 0))
	_, _, err = ReadImageFolderSplit(root, FolderOptions{C: 1, H: 2, W: 4})
	if err == nil || !strings.Contains(err.Error(), `"emu" only in train`) || !strings.Contains(err.Error(), `"ant" only in test`) {
		t.Errorf("mismatched classes: error %v", err)
	}
	if err := os.RemoveAll(filepath.Join(root, "test")); err != nil {
		t.Fatal(err)
	}
	if _, _, err = ReadImageFolderSplit(root, FolderOptions{C: 1, H: 2, W: 4}); err == nil || !strings.Contains(err.Error(), "test") {
		t.Errorf("no test folder: error %v", err)
	}
}
