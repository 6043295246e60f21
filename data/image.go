package data

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
)

// MaxImagePixels bounds the width times the height of a PNG or JPEG image
// that ReadImageFile decodes: 2^24 (4096 x 4096), 64 MiB decoded, 192 MiB as
// float32 RGB. It is checked against the file's header before anything is
// decoded.
const MaxImagePixels = 1 << 24

// ReadImageFile reads the images of one file to classify them, scaled to
// [-1, 1] as Load scales the training sets' pixels: a PNG or JPEG image
// (one image), an IDX file of unsigned bytes (N x H x W images, or one
// H x W image), or a CIFAR-10 batch (each record's image). The format is
// told by the file's content, not its name.
//
// channels is what the model takes: 1 (grayscale) or 3 (RGB). A PNG or
// JPEG image is grayscale when its colour model is gray, or when every
// pixel has equal red, green and blue; any other is RGB (its alpha is
// ignored; 16-bit samples are rounded down to 8 bits). An image of other
// channels than asked for is refused, as are IDX files (grayscale) for 3
// and CIFAR-10 batches (RGB) for 1, a file whose header announces more
// than MaxImagePixels pixels or more than DefaultMaxBytes of float32
// pixels, and a truncated or malformed file; every error but a missing or
// unreadable file wraps ErrFormat.
//
// The Set's labels are a CIFAR-10 batch's, with Classes 10; other files
// carry none: their Y is zeros and Classes 0.
func ReadImageFile(path string, channels int) (*Set, error) {
	if channels != 1 && channels != 3 {
		return nil, fmt.Errorf("data: reading %s: %d channels asked for, want 1 or 3", path, channels)
	}
	f, fi, err := openRegular(path) // a named pipe is refused, not waited on
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	head, _ := br.Peek(20) // the longest IDX header, of 4 dimensions
	idx, exact := idxHeader(head, fi.Size())
	cifar := fi.Size() > 0 && fi.Size()%cifarRecord == 0
	switch {
	case bytes.HasPrefix(head, []byte("\x89PNG\r\n\x1a\n")):
		return readPicture(path, br, channels, false, png.DecodeConfig, png.Decode)
	case bytes.HasPrefix(head, []byte{0xff, 0xd8, 0xff}):
		return readPicture(path, br, channels, false, jpeg.DecodeConfig, jpeg.Decode)
	case idx && (exact || !cifar): // a CIFAR-10 batch may start like an IDX header, never with its size
		if channels != 1 {
			return nil, fmt.Errorf("%w: %s: an IDX file holds grayscale images (1 channel); the model takes %d channels", ErrFormat, path, channels)
		}
		return readIDXImages(path, br, fi.Size())
	case cifar:
		if channels != 3 {
			return nil, fmt.Errorf("%w: %s: a CIFAR-10 batch holds RGB images (3 channels); the model takes %d channel", ErrFormat, path, channels)
		}
		return ReadCIFAR10(path)
	}
	return nil, fmt.Errorf("%w: %s: not an image: neither PNG, JPEG, an IDX file of images nor a CIFAR-10 batch (%d bytes, not a multiple of its %d-byte records)", ErrFormat, path, fi.Size(), cifarRecord)
}

// idxHeader reports whether head starts like an IDX file of unsigned bytes
// (gzip-compressed or not), and whether a raw one announces exactly the
// size of the file.
func idxHeader(head []byte, size int64) (idx, exact bool) {
	if len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b {
		return true, false // gzip: a CIFAR-10 label byte is below 10
	}
	if len(head) < 4 || head[0] != 0 || head[1] != 0 || head[2] != 0x08 || head[3] < 1 || head[3] > 4 {
		return false, false
	}
	nd := int(head[3])
	if len(head) < 4+4*nd {
		return true, false
	}
	want := int64(4 + 4*nd)
	payload := int64(1)
	for i := 0; i < nd; i++ {
		payload *= int64(binary.BigEndian.Uint32(head[4+4*i:]))
		if payload > maxIDXBytes {
			return true, false
		}
	}
	return true, want+payload == size
}

// readPicture decodes a PNG or JPEG image after checking its size from its
// header. widen reads a grayscale image as RGB (three equal planes) when
// channels is 3, instead of refusing it.
func readPicture(path string, br *bufio.Reader, channels int, widen bool, config func(io.Reader) (image.Config, error), decode func(io.Reader) (image.Image, error)) (*Set, error) {
	// The header is read first, and kept: the image is then decoded from
	// the beginning.
	var head bytes.Buffer
	cfg, err := config(io.TeeReader(br, &head))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrFormat, path, err)
	}
	w, h := cfg.Width, cfg.Height
	if w < 1 || h < 1 || int64(w)*int64(h) > MaxImagePixels {
		return nil, fmt.Errorf("%w: %s: %d x %d pixels; at most %d (data.MaxImagePixels) are decoded", ErrFormat, path, w, h, MaxImagePixels)
	}
	img, err := decode(io.MultiReader(&head, br))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrFormat, path, err)
	}
	b := img.Bounds()
	if b.Dx() != w || b.Dy() != h {
		return nil, fmt.Errorf("%w: %s: the header says %d x %d pixels, the image has %d x %d", ErrFormat, path, w, h, b.Dx(), b.Dy())
	}
	gray := cfg.ColorModel == color.GrayModel || cfg.ColorModel == color.Gray16Model
	rgb := make([]byte, 3*w*h) // planes R, G, B
	same := true
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			c := color.NRGBAModel.Convert(img.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
			i := y*w + x
			rgb[i], rgb[w*h+i], rgb[2*w*h+i] = c.R, c.G, c.B
			same = same && c.R == c.G && c.G == c.B
		}
	}
	switch {
	case channels == 1 && !gray && !same:
		return nil, fmt.Errorf("%w: %s: a colour image (3 channels); the model takes grayscale images (1 channel)", ErrFormat, path)
	case channels == 3 && gray && !widen:
		return nil, fmt.Errorf("%w: %s: a grayscale image (1 channel); the model takes RGB images (3 channels)", ErrFormat, path)
	}
	pixels := rgb[:channels*w*h]
	return &Set{Name: path, Files: []string{path}, N: 1, C: channels, H: h, W: w, X: scalePixels(pixels), Y: make([]uint8, 1)}, nil
}

// readIDXImages reads an IDX file of images: N x H x W, or one H x W.
func readIDXImages(path string, r io.Reader, size int64) (*Set, error) {
	s, err := openIDX(r, path, size, 0, "")
	if err != nil {
		return nil, err
	}
	var n, h, w int
	switch d := s.dims; len(d) {
	case 3:
		n, h, w = d[0], d[1], d[2]
	case 2:
		n, h, w = 1, d[0], d[1]
	default:
		return nil, fmt.Errorf("%w: %s: IDX dimensions %v: want images, N x H x W or H x W", ErrFormat, path, d)
	}
	if b := PixelBytes(n, 1, h, w); b > DefaultMaxBytes {
		return nil, fmt.Errorf("%w: %s: %d images of %dx%d take %d bytes as float32, more than the %d of data.DefaultMaxBytes", ErrFormat, path, n, h, w, b, DefaultMaxBytes)
	}
	pixels, err := s.payload()
	if err != nil {
		return nil, err
	}
	return &Set{Name: path, Files: []string{path}, N: n, C: 1, H: h, W: w, X: scalePixels(pixels), Y: make([]uint8, n)}, nil
}
