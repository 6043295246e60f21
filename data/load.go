package data

import (
	"errors"
	"fmt"
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
// CIFAR-10 batches may sit in dir or in dir/cifar-10-batches-bin.
func Load(dataset, dir string, train bool) (*Set, error) {
	if dir == "" {
		dir = DefaultDir(dataset)
	}
	switch dataset {
	case "mnist", "fashion-mnist":
		prefix := "t10k"
		if train {
			prefix = "train"
		}
		im, err := findFile(dir, prefix+"-images-idx3-ubyte", prefix+"-images-idx3-ubyte.gz")
		if err != nil {
			return nil, fmt.Errorf("data: %s: %w", dataset, err)
		}
		lb, err := findFile(dir, prefix+"-labels-idx1-ubyte", prefix+"-labels-idx1-ubyte.gz")
		if err != nil {
			return nil, fmt.Errorf("data: %s: %w", dataset, err)
		}
		s, err := ReadIDX(im, lb)
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
			p, err := findFile(dir, n, filepath.Join("cifar-10-batches-bin", n))
			if err != nil {
				return nil, fmt.Errorf("data: cifar10: %w", err)
			}
			paths[i] = p
		}
		s, err := ReadCIFAR10(paths...)
		if err != nil {
			return nil, err
		}
		s.Name = dataset
		return s, nil
	}
	return nil, fmt.Errorf("data: unknown dataset %q (want mnist, fashion-mnist or cifar10)", dataset)
}

// findFile returns the first of names that exists in dir.
func findFile(dir string, names ...string) (string, error) {
	for _, n := range names {
		p := filepath.Join(dir, n)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("none of %v in %s: %w", names, dir, fs.ErrNotExist)
}
