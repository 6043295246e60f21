package data

import (
	"bufio"
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// FolderOptions says how ReadImageFolder reads a folder of images.
type FolderOptions struct {
	// C is the channels every image is read with: 1 (grayscale) or 3
	// (RGB). It has no default.
	C int
	// H and W are the rows and columns every image is resized to, by
	// Resize. They have no default.
	H, W int
	// Skip, if true, passes over a faulty file (not a regular file, empty,
	// not a PNG or JPEG image, undecodable, more than MaxImagePixels
	// pixels, or in colour where C is 1), listing it with its fault in the
	// Set's Skipped. If false, the default, the first faulty file, in the
	// order the set would hold it, is an error naming it and the fault.
	Skip bool
	// MaxBytes bounds the float32 pixels of the set, PixelBytes(files, C,
	// H, W), counting every file found: a larger set is refused before
	// anything is decoded. Zero or less means DefaultMaxBytes.
	MaxBytes int64
}

// check returns an error for options that cannot be read with.
func (o FolderOptions) check(dir string) error {
	if o.C != 1 && o.C != 3 {
		return fmt.Errorf("data: reading image folder %s: %d channels asked for, want 1 or 3", dir, o.C)
	}
	if o.H < 1 || o.W < 1 {
		return fmt.Errorf("data: reading image folder %s: images resized to %d x %d, want positive sizes", dir, o.H, o.W)
	}
	return nil
}

// ReadImageFolder reads a folder of labelled images: one subfolder per
// class, each holding PNG or JPEG files, told by their content, not their
// names. Each image is decoded as ReadImageFile decodes it (pixels scaled
// to [-1, 1], at most MaxImagePixels pixels), read with opts.C channels (a
// grayscale image is read as three equal planes where C is 3; a colour one
// is refused where C is 1), and resized to opts.H x opts.W by Resize.
//
// The class folders, sorted by name, are labels 0, 1, ...; the Set's
// ClassNames are their names and its Classes their number, at most 256.
// The images are ordered by class, then by file name. Names that start
// with '.' are ignored, at both levels. A class folder may be a symbolic
// link to a folder, and an image a symbolic link to a regular file. A
// non-directory entry among the class folders, a class folder without
// images, and more than 256 classes are errors; so is a faulty file (see
// FolderOptions.Skip), unless opts.Skip is set, and a class all of whose
// files are skipped. A file that is not regular (a named pipe, a device, a
// symbolic link loop) is refused before it is opened, so reading never
// blocks.
//
// Files are decoded on runtime.GOMAXPROCS(0) goroutines, each holding one
// image at a time: up to about 300 MiB for one of MaxImagePixels RGB
// pixels. The Set's Name is dir and its Files the files read, in order.
func ReadImageFolder(dir string, opts FolderOptions) (*Set, error) {
	if err := opts.check(dir); err != nil {
		return nil, err
	}
	f, err := listFolder(dir)
	if err != nil {
		return nil, err
	}
	if err := f.fits(opts); err != nil {
		return nil, err
	}
	return f.read(opts)
}

// ReadImageFolderSplit reads root/train and root/test as ReadImageFolder
// does, after checking that both have the same class folders (else an
// error naming the classes found in only one) and that each fits within
// opts.MaxBytes. Other entries of root are ignored.
func ReadImageFolderSplit(root string, opts FolderOptions) (train, test *Set, err error) {
	if err := opts.check(root); err != nil {
		return nil, nil, err
	}
	tr, err := listFolder(filepath.Join(root, "train"))
	if err != nil {
		return nil, nil, err
	}
	te, err := listFolder(filepath.Join(root, "test"))
	if err != nil {
		return nil, nil, err
	}
	if !slices.Equal(tr.classes, te.classes) {
		return nil, nil, fmt.Errorf("data: %s and %s have different classes: %s only in train, %s only in test",
			tr.dir, te.dir, missing(tr.classes, te.classes), missing(te.classes, tr.classes))
	}
	for _, f := range []*folder{tr, te} {
		if err := f.fits(opts); err != nil {
			return nil, nil, err
		}
	}
	if train, err = tr.read(opts); err != nil {
		return nil, nil, err
	}
	if test, err = te.read(opts); err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

// missing quotes the names of a absent from b, or says "none".
func missing(a, b []string) string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, fmt.Sprintf("%q", s))
		}
	}
	if out == nil {
		return "none"
	}
	return strings.Join(out, ", ")
}

// folder is the listing of an image folder: its classes and their files.
type folder struct {
	dir     string
	classes []string
	files   []string // every file, class after class, each class sorted
	labels  []uint8  // the class of each file
}

// listFolder lists dir's class folders and their files, ignoring hidden
// names; it opens no file.
func listFolder(dir string) (*folder, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("data: reading image folder: %w", err)
	}
	f := &folder{dir: dir}
	for _, e := range entries {
		if hidden(e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		fi, err := os.Stat(path) // follows a link; a loop is an error, not a wait
		if err != nil {
			return nil, fmt.Errorf("data: reading image folder %s: %w", dir, err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("data: reading image folder %s: %s is %s, not a folder; want one folder of images per class", dir, path, fileKind(fi.Mode()))
		}
		if len(f.classes) == 256 {
			return nil, fmt.Errorf("data: reading image folder %s: more than 256 class folders; labels are bytes", dir)
		}
		names, err := os.ReadDir(path)
		if err != nil {
			return nil, fmt.Errorf("data: reading image folder %s: %w", dir, err)
		}
		n := len(f.files)
		for _, name := range names {
			if !hidden(name.Name()) {
				f.files = append(f.files, filepath.Join(path, name.Name()))
				f.labels = append(f.labels, uint8(len(f.classes)))
			}
		}
		if len(f.files) == n {
			return nil, fmt.Errorf("data: reading image folder %s: class %q has no images", dir, e.Name())
		}
		f.classes = append(f.classes, e.Name())
	}
	if len(f.classes) == 0 {
		return nil, fmt.Errorf("data: reading image folder %s: no class folders in it; want one folder of images per class", dir)
	}
	return f, nil
}

// hidden reports whether a file name starts with a dot.
func hidden(name string) bool { return strings.HasPrefix(name, ".") }

// fits checks the pixels of every file listed against opts.MaxBytes.
func (f *folder) fits(opts FolderOptions) error {
	maxBytes := opts.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if b := PixelBytes(len(f.files), opts.C, opts.H, opts.W); b > maxBytes {
		return fmt.Errorf("data: reading image folder %s: %d images of %dx%dx%d take %d bytes as float32, more than the budget of %d", f.dir, len(f.files), opts.C, opts.H, opts.W, b, maxBytes)
	}
	return nil
}

// read decodes every file listed on GOMAXPROCS goroutines, each into its
// place in the set's pixels, and then drops the skipped ones.
func (f *folder) read(opts FolderOptions) (*Set, error) {
	n, dim := len(f.files), opts.C*opts.H*opts.W
	x := make([]float32, n*dim)
	errs := make([]error, n)
	var next atomic.Int64
	var firstFault atomic.Int64 // without Skip, files after a fault need not be read
	firstFault.Store(int64(n))
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || i > firstFault.Load() {
					return
				}
				if errs[i] = readFolderImage(f.files[i], opts, x[int(i)*dim:(int(i)+1)*dim]); errs[i] != nil && !opts.Skip {
					for {
						old := firstFault.Load()
						if i >= old || firstFault.CompareAndSwap(old, i) {
							break
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	s := &Set{Name: f.dir, C: opts.C, H: opts.H, W: opts.W, Classes: len(f.classes), ClassNames: f.classes}
	kept := make([]int, len(f.classes)) // images of each class
	for i, err := range errs {
		if err != nil {
			if !opts.Skip {
				return nil, err
			}
			s.Skipped = append(s.Skipped, err.Error())
			continue
		}
		copy(x[s.N*dim:(s.N+1)*dim], x[i*dim:(i+1)*dim])
		s.Files = append(s.Files, f.files[i])
		s.Y = append(s.Y, f.labels[i])
		kept[f.labels[i]]++
		s.N++
	}
	for c, k := range kept {
		if k == 0 {
			return nil, fmt.Errorf("data: reading image folder %s: class %q has no images that could be read (%d files skipped in all)", f.dir, f.classes[c], len(s.Skipped))
		}
	}
	s.X = x[:s.N*dim]
	return s, nil
}

// readFolderImage reads the PNG or JPEG image at path into x, resized to
// opts.H x opts.W. It looks at what path is before opening it, and opens
// it without blocking, so a named pipe or device is refused, not waited on.
func readFolderImage(path string, opts FolderOptions, x []float32) error {
	file, fi, err := openRegular(path)
	if err != nil {
		return err
	}
	defer file.Close()
	if fi.Size() == 0 {
		return fmt.Errorf("%w: %s: an empty file, not an image", ErrFormat, path)
	}
	br := bufio.NewReader(file)
	head, _ := br.Peek(8)
	var s *Set
	switch {
	case bytes.HasPrefix(head, []byte("\x89PNG\r\n\x1a\n")):
		s, err = readPicture(path, br, opts.C, true, png.DecodeConfig, png.Decode)
	case bytes.HasPrefix(head, []byte{0xff, 0xd8, 0xff}):
		s, err = readPicture(path, br, opts.C, true, jpeg.DecodeConfig, jpeg.Decode)
	default:
		return fmt.Errorf("%w: %s: not a PNG or JPEG image", ErrFormat, path)
	}
	if err != nil {
		return err
	}
	if s, err = s.Resize(opts.H, opts.W, 0); err != nil {
		return err
	}
	copy(x, s.X)
	return nil
}

// openRegular opens the regular file at path (a symbolic link is
// followed; a loop is an error), looking at what path is before opening it
// and opening it without blocking, so that a named pipe or a device is
// refused, never waited on, and one put in its place meanwhile is caught.
func openRegular(path string) (*os.File, fs.FileInfo, error) {
	fi, err := os.Lstat(path)
	if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		fi, err = os.Stat(path)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("data: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%w: %s: %s, not a regular file", ErrFormat, path, fileKind(fi.Mode()))
	}
	file, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("data: %w", err)
	}
	if now, err := file.Stat(); err != nil || !os.SameFile(fi, now) {
		file.Close()
		return nil, nil, fmt.Errorf("%w: %s: replaced while being read", ErrFormat, path)
	}
	return file, fi, nil
}

// fileKind names the kind of file a mode describes, for messages.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a file"
	case m.IsDir():
		return "a folder"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "a special file"
}

// FirstImageShape returns the channels (1 for a grayscale image, 3 for any
// other), rows and columns of the first image of the folder dir of class
// folders: the first file, by name, of its first class folder. It reads
// only the image's header.
func FirstImageShape(dir string) (c, h, w int, err error) {
	classes, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("data: %w", err)
	}
	for _, class := range classes {
		if strings.HasPrefix(class.Name(), ".") || !class.IsDir() {
			continue
		}
		files, err := os.ReadDir(filepath.Join(dir, class.Name()))
		if err != nil {
			return 0, 0, 0, fmt.Errorf("data: %w", err)
		}
		for _, f := range files {
			if strings.HasPrefix(f.Name(), ".") || !f.Type().IsRegular() {
				continue
			}
			path := filepath.Join(dir, class.Name(), f.Name())
			r, err := os.Open(path)
			if err != nil {
				return 0, 0, 0, fmt.Errorf("data: %w", err)
			}
			cfg, _, err := image.DecodeConfig(r)
			r.Close()
			if err != nil {
				return 0, 0, 0, fmt.Errorf("%w: %s: %v", ErrFormat, path, err)
			}
			c = 3
			if cfg.ColorModel == color.GrayModel || cfg.ColorModel == color.Gray16Model {
				c = 1
			}
			return c, cfg.Height, cfg.Width, nil
		}
	}
	return 0, 0, 0, fmt.Errorf("data: %s holds no image in a class folder", dir)
}
