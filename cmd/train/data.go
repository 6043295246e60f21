package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/orthonet/orthonet/data"
	"github.com/orthonet/orthonet/internal/membudget"
)

// imageSize is the side the paper resizes each data set to: 32 for the ViT,
// and for the FFN 32 (MNIST, 1024 inputs) or 20 (CIFAR-10, 1200 inputs);
// the CNN and the RNN take the images as they are (0: 28 for MNIST and
// Fashion-MNIST, 32 for CIFAR-10; the RNN reads a row a step).
func imageSize(model, dataset string) int {
	switch {
	case model == "cnn" || model == "rnn":
		return 0
	case model == "ffn" && dataset == "cifar10":
		return 20
	}
	return 32
}

// dataBudget is the most bytes a data set's pixels may take, read or
// resized: the data package's bound (data.DefaultMaxBytes), or the
// memory budget where that is smaller.
func dataBudget(b membudget.Budget, has bool) int64 {
	if has && b.Bytes < data.DefaultMaxBytes {
		return max(1, b.Bytes)
	}
	return data.DefaultMaxBytes
}

// loadData downloads the data set if asked, reads its training and test
// sets and resizes them to the model's side, each set's pixels within
// dataBudget where the reader takes a bound (an image folder, a resize).
func loadData(ctx context.Context, c config, w io.Writer) (train, test *data.Set, err error) {
	maxBytes := dataBudget(c.budget())
	dir := c.dataDir
	if c.dataset == "folder" {
		if train, test, err = loadFolder(dir, maxBytes); err != nil {
			return nil, nil, err
		}
		return resize(c, train, test, maxBytes)
	}
	if dir == "" {
		dir = data.DefaultDir(c.dataset)
	}
	if c.download {
		fmt.Fprintf(w, "downloading %s into %s\n", c.dataset, dir)
		// The zero Downloader bounds each request (connect, idle, overall)
		// and goes on to the next mirror when one stalls.
		var dl data.Downloader
		if err := dl.Download(ctx, c.dataset, dir); err != nil {
			return nil, nil, err
		}
	}
	// Only the examples -limit-train and -limit-test keep are read: the
	// sets hold those and no more (data.LoadFirst).
	if train, test, err = data.LoadSplitFirst(c.dataset, dir, c.limitTrain, c.limitTest); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%w (use -data DIR, or -download for mnist and cifar10)", err)
		}
		return nil, nil, err
	}
	return resize(c, train, test, maxBytes)
}

// resize resizes train and test to the model's side, each within
// maxBytes.
func resize(c config, train, test *data.Set, maxBytes int64) (_, _ *data.Set, err error) {
	side := imageSize(c.model, c.dataset)
	if side == 0 { // the images as they are
		return train, test, nil
	}
	if train, err = train.Resize(side, side, maxBytes); err != nil {
		return nil, nil, err
	}
	if test, err = test.Resize(side, side, maxBytes); err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

// loadFolder reads the image folder dir (dir/train/CLASS/* and
// dir/test/CLASS/*, PNG or JPEG) at the channels and size of its first
// image (data.FirstImageShape): grayscale images as one channel, colour
// ones as three, each split's pixels within maxBytes.
func loadFolder(dir string, maxBytes int64) (train, test *data.Set, err error) {
	if dir == "" {
		return nil, nil, &usageError{errors.New("-dataset folder needs -data DIR, a folder of DIR/train/CLASS/* and DIR/test/CLASS/* images")}
	}
	c, h, w, err := data.FirstImageShape(filepath.Join(dir, "train"))
	if err != nil {
		return nil, nil, &usageError{err}
	}
	if train, test, err = data.ReadImageFolderSplit(dir, data.FolderOptions{C: c, H: h, W: w, MaxBytes: maxBytes}); err != nil {
		return nil, nil, &usageError{err}
	}
	return train, test, nil
}
