package data

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"path/filepath"
	"strings"
	"testing"
)

func encodePNG(t *testing.T, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// grayImage returns a w x h image whose pixel (x, y) is f(x, y).
func grayImage(w, h int, f func(x, y int) uint8) *image.Gray {
	img := image.NewGray(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.SetGray(x, y, color.Gray{Y: f(x, y)})
		}
	}
	return img
}

// rgbImage returns a w x h NRGBA image whose channel c of pixel (x, y) is
// f(c, x, y).
func rgbImage(w, h int, f func(c, x, y int) uint8) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.SetNRGBA(x, y, color.NRGBA{R: f(0, x, y), G: f(1, x, y), B: f(2, x, y), A: 255})
		}
	}
	return img
}

// hugePNG returns a 1 x 1 PNG whose header announces w x h pixels, its
// checksum fixed.
func hugePNG(t *testing.T, w, h uint32) []byte {
	b := encodePNG(t, grayImage(1, 1, func(int, int) uint8 { return 0 }))
	// 8-byte signature, then IHDR: length (4), "IHDR" (4), width, height, ..., CRC of type and data.
	binary.BigEndian.PutUint32(b[16:], w)
	binary.BigEndian.PutUint32(b[20:], h)
	binary.BigEndian.PutUint32(b[29:], crc32.ChecksumIEEE(b[12:29]))
	return b
}

// TestReadImageFileScaling checks that image files give the pixels that
// Load gives the same bytes in a data set: a PNG cut from an IDX file, an
// IDX file of images and a CIFAR-10 batch.
func TestReadImageFileScaling(t *testing.T) {
	dir := t.TempDir()
	images, labels := mnistFiles(3) // 4 x 3 images, IDX files
	set, err := ReadIDX(write(t, filepath.Join(dir, "im"), images), write(t, filepath.Join(dir, "lb"), labels))
	if err != nil {
		t.Fatal(err)
	}
	// Image 2 as a PNG, and in an RGB PNG whose channels are equal.
	px := images[16+2*12 : 16+3*12] // after the header of 3 dimensions
	at := func(x, y int) uint8 { return px[y*3+x] }
	for name, img := range map[string]image.Image{
		"gray.png": grayImage(3, 4, at),
		"rgb.png":  rgbImage(3, 4, func(_, x, y int) uint8 { return at(x, y) }),
	} {
		s, err := ReadImageFile(write(t, filepath.Join(dir, name), encodePNG(t, img)), 1)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s.N != 1 || s.C != 1 || s.H != 4 || s.W != 3 || s.Classes != 0 {
			t.Errorf("%s: %d images of %dx%dx%d, %d classes; want 1 of 1x4x3, 0", name, s.N, s.C, s.H, s.W, s.Classes)
		}
		if !equalFloats(s.X, set.Image(2)) {
			t.Errorf("%s: pixels %v, the data set's %v", name, s.X, set.Image(2))
		}
	}
	// The IDX images file itself, and one image of 2 dimensions, gzip-compressed.
	s, err := ReadImageFile(filepath.Join(dir, "im"), 1)
	if err != nil {
		t.Fatal(err)
	}
	if s.N != 3 || !equalFloats(s.X, set.X) {
		t.Errorf("IDX images: %d images %v, want the data set's 3 %v", s.N, s.X, set.X)
	}
	s, err = ReadImageFile(write(t, filepath.Join(dir, "one.gz"), gz(idx([]int{4, 3}, px))), 1)
	if err != nil {
		t.Fatal(err)
	}
	if s.N != 1 || !equalFloats(s.X, set.Image(2)) {
		t.Errorf("one IDX image: %d images %v, want %v", s.N, s.X, set.Image(2))
	}
	// A CIFAR-10 batch, including one whose first bytes look like an IDX header.
	batch := cifarBatch(2)
	copy(batch, []byte{0, 0, 8, 1})
	path := write(t, filepath.Join(dir, "b.bin"), batch)
	want, err := ReadCIFAR10(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err = ReadImageFile(path, 3)
	if err != nil {
		t.Fatal(err)
	}
	if s.N != 2 || s.C != 3 || s.Classes != 10 || !equalFloats(s.X, want.X) || !bytes.Equal(s.Y, want.Y) {
		t.Errorf("CIFAR-10 batch: %d images of %d channels, %d classes; not ReadCIFAR10's", s.N, s.C, s.Classes)
	}
	// An RGB PNG in channel-major order, as CIFAR-10's.
	rgb := rgbImage(2, 2, func(c, x, y int) uint8 { return uint8(100*c + 10*y + x) })
	s, err = ReadImageFile(write(t, filepath.Join(dir, "c.png"), encodePNG(t, rgb)), 3)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range []byte{0, 1, 10, 11, 100, 101, 110, 111, 200, 201, 210, 211} {
		if s.X[i] != float32(p)/127.5-1 {
			t.Errorf("RGB PNG: value %d is %v, want %v", i, s.X[i], float32(p)/127.5-1)
		}
	}
}

func equalFloats(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestReadImageFileJPEG reads a JPEG: lossy, so its pixels are compared
// with the decoder's own.
func TestReadImageFileJPEG(t *testing.T) {
	img := rgbImage(16, 8, func(c, x, y int) uint8 { return uint8(40*c + 8*x + 4*y) })
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	dec, err := jpeg.Decode(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ReadImageFile(write(t, filepath.Join(t.TempDir(), "a.jpg"), b.Bytes()), 3)
	if err != nil {
		t.Fatal(err)
	}
	if s.C != 3 || s.H != 8 || s.W != 16 {
		t.Fatalf("%dx%dx%d, want 3x8x16", s.C, s.H, s.W)
	}
	c := color.NRGBAModel.Convert(dec.At(5, 3)).(color.NRGBA)
	for ch, v := range []uint8{c.R, c.G, c.B} {
		if got := s.X[ch*8*16+3*16+5]; got != float32(v)/127.5-1 {
			t.Errorf("channel %d of pixel (5, 3) is %v, want %v", ch, got, float32(v)/127.5-1)
		}
	}
}

// TestReadImageFileRefuses checks that bad files are refused with an
// error naming the file and the fault, a huge one before it is decoded.
func TestReadImageFileRefuses(t *testing.T) {
	dir := t.TempDir()
	gray := encodePNG(t, grayImage(5, 5, func(x, y int) uint8 { return uint8(x * y) }))
	colour := encodePNG(t, rgbImage(5, 5, func(c, x, y int) uint8 { return uint8(c * x) }))
	var jpg bytes.Buffer
	if err := jpeg.Encode(&jpg, rgbImage(32, 32, func(c, x, y int) uint8 { return uint8(c*x + y) }), nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		content  []byte
		channels int
		want     string
	}{
		{"text.png", []byte("this is not an image\n"), 1, "not an image"},
		{"empty", nil, 1, "not an image"},
		{"truncated.png", gray[:len(gray)/2], 1, "not enough pixel data"},
		{"truncated.jpg", jpg.Bytes()[:jpg.Len()/2], 3, "EOF"},
		{"colour.png", colour, 1, "a colour image (3 channels); the model takes grayscale images (1 channel)"},
		{"gray.png", gray, 3, "a grayscale image (1 channel); the model takes RGB images (3 channels)"},
		{"huge.png", hugePNG(t, 100000, 100000), 1, "100000 x 100000 pixels; at most 16777216"},
		{"labels.idx", idx([]int{3}, []byte{1, 2, 3}), 1, "want images"},
		{"images.idx", idx([]int{1, 2, 2}, []byte{1, 2, 3, 4}), 3, "grayscale images (1 channel); the model takes 3"},
		{"short.idx", idx([]int{2, 2, 2}, []byte{1, 2, 3}), 1, "truncated"},
		{"batch.bin", cifarBatch(1), 1, "RGB images (3 channels); the model takes 1"},
	} {
		path := write(t, filepath.Join(dir, tc.name), tc.content)
		var err error
		bytes := allocated(func() { _, err = ReadImageFile(path, tc.channels) })
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v, want ErrFormat naming the file and saying %q", tc.name, err, tc.want)
		}
		if bytes > 1<<20 {
			t.Errorf("%s: %d bytes allocated to refuse it", tc.name, bytes)
		}
	}
	if _, err := ReadImageFile(filepath.Join(dir, "missing.png"), 1); err == nil || errors.Is(err, ErrFormat) {
		t.Errorf("a missing file: error %v, want a file error", err)
	}
}
