package data

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Datasets lists the names Load accepts.
var Datasets = []string{"mnist", "fashion-mnist", "cifar10"}

// FashionMNISTDir is where Debian's dataset-fashion-mnist package installs
// Fashion-MNIST.
const FashionMNISTDir = "/usr/share/datasets/fashion-mnist"

// DefaultDir returns the folder Load reads a dataset from when none is given:
// FashionMNISTDir for Fashion-MNIST, data/NAME otherwise.
func DefaultDir(dataset string) string {
	if dataset == "fashion-mnist" {
		return FashionMNISTDir
	}
	return filepath.Join("data", dataset)
}

// Load reads the training set (train true) or the test set of a dataset
// from dir ("" for DefaultDir). MNIST-format files may be raw or gzip;
// CIFAR-10 batches may sit in dir or in dir/cifar-10-batches-bin. The
// Set's Files are the files read.
//
// When a file is present in both forms (raw and .gz, or in dir and in
// dir/cifar-10-batches-bin), Load reads a .gz whose SHA-256 is the one
// Sources[dataset] publishes; otherwise it refuses, naming both, unless
// both hold the same data. Errors for missing files match fs.ErrNotExist.
func Load(dataset, dir string, train bool) (*Set, error) {
	return LoadFirst(dataset, dir, train, 0)
}

// LoadFirst reads the first n examples of the training set (train true) or
// the test set of a dataset, all of them for n <= 0, as Load does. It reads
// and allocates only what those n examples need, whatever the files'
// headers announce: a small crafted file that claims millions of images
// costs no more than n of them. The examples beyond the first n are not
// read, so their faults (a truncated file, a bad label) go unnoticed.
func LoadFirst(dataset, dir string, train bool, n int) (*Set, error) {
	if dir == "" {
		dir = DefaultDir(dataset)
	}
	switch dataset {
	case "mnist", "fashion-mnist":
		prefix := "t10k"
		if train {
			prefix = "train"
		}
		im, err := pickIDX(dataset, dir, prefix+"-images-idx3-ubyte")
		if err != nil {
			return nil, err
		}
		lb, err := pickIDX(dataset, dir, prefix+"-labels-idx1-ubyte")
		if err != nil {
			return nil, err
		}
		s, err := ReadIDXFirst(im, lb, n)
		if err != nil {
			return nil, err
		}
		s.Name = dataset
		return s, nil
	case "cifar10":
		names := []string{"test_batch.bin"}
		if train {
			names = []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"}
		}
		paths := make([]string, len(names))
		for i, n := range names {
			p, err := pickCIFAR(dir, n)
			if err != nil {
				return nil, err
			}
			paths[i] = p
		}
		s, err := ReadCIFAR10First(n, paths...)
		if err != nil {
			return nil, err
		}
		s.Name = dataset
		return s, nil
	}
	return nil, fmt.Errorf("data: unknown dataset %q (want mnist, fashion-mnist or cifar10)", dataset)
}

// LoadSplit reads the training and the test set of a dataset from dir, as
// Load does, and checks that their images have the same shape and their
// labels the same range: a model trained on one must take the other.
func LoadSplit(dataset, dir string) (train, test *Set, err error) {
	return LoadSplitFirst(dataset, dir, 0, 0)
}

// LoadSplitFirst reads the first nTrain training and nTest test examples
// of a dataset (all of a set for n <= 0), as LoadFirst does, and checks
// them as LoadSplit does.
func LoadSplitFirst(dataset, dir string, nTrain, nTest int) (train, test *Set, err error) {
	if train, err = LoadFirst(dataset, dir, true, nTrain); err != nil {
		return nil, nil, err
	}
	if test, err = LoadFirst(dataset, dir, false, nTest); err != nil {
		return nil, nil, err
	}
	if train.C != test.C || train.H != test.H || train.W != test.W || train.Classes != test.Classes {
		return nil, nil, fmt.Errorf("%w: %s: the training images (%s) are %dx%dx%d with %d classes but the test images (%s) are %dx%dx%d with %d classes",
			ErrFormat, dataset, train.source(), train.C, train.H, train.W, train.Classes, test.source(), test.C, test.H, test.W, test.Classes)
	}
	return train, test, nil
}

// exists reports whether path exists, following symlinks.
func exists(path string) (bool, error) {
	_, err := os.Stat(path)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, fmt.Errorf("data: %w", err)
}

// whichExist reports whether a and b exist, following symlinks.
func whichExist(a, b string) (hasA, hasB bool, err error) {
	if hasA, err = exists(a); err == nil {
		hasB, err = exists(b)
	}
	return hasA, hasB, err
}

// pickIDX returns the path of IDX file name in dir, raw or gzip (name.gz).
func pickIDX(dataset, dir, name string) (string, error) {
	raw, gz := filepath.Join(dir, name), filepath.Join(dir, name+".gz")
	hasRaw, hasGz, err := whichExist(raw, gz)
	if err != nil {
		return "", err
	}
	switch {
	case !hasRaw && !hasGz:
		return "", fmt.Errorf("data: %s: neither %s nor %s exists: %w", dataset, raw, gz, fs.ErrNotExist)
	case !hasGz:
		return raw, nil
	case !hasRaw:
		return gz, nil
	}
	if published(dataset, name+".gz", gz) {
		return gz, nil
	}
	same, err := sameData(raw, gz, true)
	if err != nil {
		return "", err
	}
	if !same {
		return "", fmt.Errorf("data: %s: both %s and %s exist and hold different data, and %s is not the published download; remove the stale one", dataset, raw, gz, gz)
	}
	return gz, nil
}

// pickCIFAR returns the path of CIFAR-10 batch name, in dir or in
// dir/cifar-10-batches-bin.
func pickCIFAR(dir, name string) (string, error) {
	top, sub := filepath.Join(dir, name), filepath.Join(dir, cifarFolder, name)
	hasTop, hasSub, err := whichExist(top, sub)
	if err != nil {
		return "", err
	}
	switch {
	case !hasTop && !hasSub:
		return "", fmt.Errorf("data: cifar10: neither %s nor %s exists: %w", top, sub, fs.ErrNotExist)
	case !hasSub:
		return top, nil
	case !hasTop:
		return sub, nil
	}
	same, err := sameData(top, sub, false)
	if err != nil {
		return "", err
	}
	if !same {
		return "", fmt.Errorf("data: cifar10: both %s and %s exist and hold different data; remove the stale one", top, sub)
	}
	return sub, nil
}

// published reports whether the file at path has the SHA-256 that
// Sources publishes for dataset's file of that name.
func published(dataset, name, path string) bool {
	for _, f := range Sources[dataset].Files {
		if f.Name == name {
			sum, err := fileSHA256(path)
			return err == nil && sum == f.SHA256
		}
	}
	return false
}

// sameData reports whether the files at a and b hold the same bytes, b
// decompressed first if gunzip is set. It reads no more of b than a holds,
// plus one byte.
func sameData(a, b string, gunzip bool) (bool, error) {
	fa, err := os.Open(a)
	if err != nil {
		return false, fmt.Errorf("data: %w", err)
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return false, fmt.Errorf("data: %w", err)
	}
	defer fb.Close()
	var rb io.Reader = bufio.NewReader(fb)
	if gunzip {
		zr, err := gzip.NewReader(rb)
		if err != nil {
			return false, fmt.Errorf("%w: %s: gzip: %v", ErrFormat, b, err)
		}
		rb = zr
	}
	ra := bufio.NewReader(fa)
	bufA, bufB := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, errA := io.ReadFull(ra, bufA)
		endA := errors.Is(errA, io.EOF) || errors.Is(errA, io.ErrUnexpectedEOF)
		if errA != nil && !endA {
			return false, fmt.Errorf("data: reading %s: %w", a, errA)
		}
		nb, errB := io.ReadFull(rb, bufB[:na])
		if errB != nil && !errors.Is(errB, io.EOF) && !errors.Is(errB, io.ErrUnexpectedEOF) {
			return false, fmt.Errorf("%w: reading %s: %v", ErrFormat, b, errB)
		}
		if nb != na || !bytes.Equal(bufA[:na], bufB[:nb]) {
			return false, nil
		}
		if endA {
			// a has ended: b must end too.
			n, err := io.ReadFull(rb, bufB[:1])
			if n == 0 && err != nil && !errors.Is(err, io.EOF) {
				return false, fmt.Errorf("%w: reading %s: %v", ErrFormat, b, err)
			}
			return n == 0, nil
		}
	}
}
