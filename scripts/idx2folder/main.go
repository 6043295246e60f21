// Command idx2folder writes a data set that data.Load reads (MNIST,
// Fashion-MNIST or CIFAR-10) as image folders, one PNG per example:
//
//	go run ./scripts/idx2folder -dataset fashion-mnist -out DIR [-limit-train N -limit-test N]
//
// writes DIR/train/CLASS/00001.png ... and DIR/test/CLASS/..., the number
// being the example's place in its split (from 1), so that
// data.ReadImageFolderSplit at the set's size gives back exactly its pixels,
// and its labels: the class folders are the class names made file-name
// safe ("T-shirt/top" is "T-shirt_top"), prefixed with the label
// ("0_T-shirt_top") where the names alone would not sort in label order.
//
// It never writes into an existing non-empty DIR: it writes a new folder
// next to DIR and renames it into place at the end, so an interrupted run
// leaves no partial DIR.
package main

import (
	"errors"
	"flag"
	"fmt"
	"image"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/orthonet/orthonet/data"
)

func main() {
	dataset := flag.String("dataset", "fashion-mnist", "data set: "+strings.Join(data.Datasets, ", "))
	dir := flag.String("dir", "", "folder of the data set's files (default data.DefaultDir(dataset))")
	out := flag.String("out", "", "folder to create, which must not exist or be empty")
	limitTrain := flag.Int("limit-train", 0, "write only the first N training examples (0: all)")
	limitTest := flag.Int("limit-test", 0, "write only the first N test examples (0: all)")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: idx2folder -dataset NAME -out DIR [-dir DATADIR] [-limit-train N] [-limit-test N]")
		os.Exit(2)
	}
	if err := run(*dataset, *dir, *out, *limitTrain, *limitTest); err != nil {
		fmt.Fprintln(os.Stderr, "idx2folder:", err)
		os.Exit(1)
	}
}

// run reads the first limitTrain and limitTest examples of a data set's
// splits from dir and writes them as image folders into out.
func run(dataset, dir, out string, limitTrain, limitTest int) error {
	names := data.ClassNames(dataset)
	if names == nil {
		return fmt.Errorf("unknown data set %q, want one of %s", dataset, strings.Join(data.Datasets, ", "))
	}
	if err := checkOut(out); err != nil { // before the minutes of loading
		return err
	}
	train, err := data.LoadFirst(dataset, dir, true, limitTrain)
	if err != nil {
		return err
	}
	test, err := data.LoadFirst(dataset, dir, false, limitTest)
	if err != nil {
		return err
	}
	return writeFolders(out, folderNames(names), map[string]*data.Set{"train": train, "test": test})
}

// checkOut refuses an out that exists and is not an empty folder.
func checkOut(out string) error {
	f, err := os.Open(out)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s exists and is not a folder; not overwriting it", out)
	}
	if _, err := f.Readdirnames(1); err != io.EOF {
		if err == nil {
			return fmt.Errorf("%s exists and is not empty; not writing into it", out)
		}
		return err
	}
	return nil
}

// folderNames returns the class folders' names for class names, by label:
// each name with the characters a file name cannot hold ('/', '\\', those
// Windows refuses, control characters) and a leading '.' replaced by '_',
// all prefixed with the label where they would not otherwise sort in label
// order (as data.ReadImageFolder orders classes) or would not be distinct.
func folderNames(names []string) []string {
	safe := make([]string, len(names))
	for i, n := range names {
		safe[i] = strings.Map(func(r rune) rune {
			if r < 32 || r == 127 || strings.ContainsRune(`/\<>:"|?*`, r) {
				return '_'
			}
			return r
		}, n)
		if safe[i] == "" || strings.HasPrefix(safe[i], ".") {
			safe[i] = "_" + safe[i]
		}
	}
	if slices.IsSorted(safe) && len(slices.Compact(slices.Clone(safe))) == len(safe) {
		return safe
	}
	width := len(fmt.Sprint(len(names) - 1))
	for i := range safe {
		safe[i] = fmt.Sprintf("%0*d_%s", width, i, safe[i])
	}
	return safe
}

// writeFolders writes each split's examples as PNG files under
// out/SPLIT/CLASS into a new folder next to out, then renames it to out.
// Every class must have examples in every split: a folder without images
// would not be read back.
func writeFolders(out string, classes []string, splits map[string]*data.Set) error {
	if err := checkOut(out); err != nil {
		return err
	}
	for name, s := range splits {
		if s.Classes != len(classes) {
			return fmt.Errorf("%s set has %d classes, want %d", name, s.Classes, len(classes))
		}
		count := make([]int, len(classes))
		for _, y := range s.Y {
			count[y]++
		}
		for c, k := range count {
			if k == 0 {
				return fmt.Errorf("the %d %s examples written would leave class %q without images; write more of them", s.N, name, classes[c])
			}
		}
	}
	out = filepath.Clean(out)
	tmp, err := os.MkdirTemp(filepath.Dir(out), "."+filepath.Base(out)+".tmp-")
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	for name, s := range splits {
		if err := writeSplit(filepath.Join(tmp, name), classes, s); err != nil {
			return err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	// An empty out is removed so that the rename can take its place; a
	// folder someone filled meanwhile is not, and the rename fails.
	if err := os.Remove(out); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s: %w; the images are left in %s", out, err, tmp)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("%w; the images are left in %s", err, tmp)
	}
	done = true
	return nil
}

// writeSplit writes s's examples as dir/CLASS/NNNNN.png, numbered from 1.
func writeSplit(dir string, classes []string, s *data.Set) error {
	for _, c := range classes {
		if err := os.MkdirAll(filepath.Join(dir, c), 0o755); err != nil {
			return err
		}
	}
	width := max(5, len(fmt.Sprint(s.N)))
	for i := range s.N {
		img, err := toImage(s, i)
		if err != nil {
			return err
		}
		path := filepath.Join(dir, classes[s.Y[i]], fmt.Sprintf("%0*d.png", width, i+1))
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		err = png.Encode(f, img)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}

// toImage returns example i of s as an 8-bit image: grayscale for one
// channel, RGB for three. Each value v, in [-1, 1], was the byte
// round((v+1)*127.5), which it becomes again.
func toImage(s *data.Set, i int) (image.Image, error) {
	x := s.Image(i)
	plane := s.H * s.W
	px := make([]uint8, len(x))
	for k, v := range x {
		b := math.Round((float64(v) + 1) * 127.5)
		if !(b >= 0 && b <= 255) {
			return nil, fmt.Errorf("%s: example %d has value %v, outside [-1, 1]", s.Name, i, v)
		}
		px[k] = uint8(b)
	}
	r := image.Rect(0, 0, s.W, s.H)
	switch s.C {
	case 1:
		return &image.Gray{Pix: px, Stride: s.W, Rect: r}, nil
	case 3:
		img := image.NewNRGBA(r)
		for p := range plane {
			img.Pix[4*p], img.Pix[4*p+1], img.Pix[4*p+2], img.Pix[4*p+3] = px[p], px[plane+p], px[2*plane+p], 255
		}
		return img, nil
	}
	return nil, fmt.Errorf("%s has %d channels, want 1 or 3", s.Name, s.C)
}
