package data

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// Remote is one file of a dataset as its publishers distribute it.
type Remote struct {
	Name   string // file name on the mirror and on disk
	SHA256 string // hex digest of the file's bytes
	Size   int64  // bytes; a larger download is refused
}

// Source is where a dataset's files can be fetched from.
type Source struct {
	Mirrors []string // base URLs, tried in order
	Files   []Remote
	// Archive is true when Files is one tar.gz of CIFAR-10 batches, to be
	// unpacked into cifar-10-batches-bin after it is verified.
	Archive bool
}

// Sources lists the public sources of MNIST and CIFAR-10.
var Sources = map[string]Source{
	"mnist": {
		Mirrors: []string{"https://ossci-datasets.s3.amazonaws.com/mnist/", "https://storage.googleapis.com/cvdf-datasets/mnist/"},
		Files: []Remote{
			{"train-images-idx3-ubyte.gz", "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609", 9912422},
			{"train-labels-idx1-ubyte.gz", "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c", 28881},
			{"t10k-images-idx3-ubyte.gz", "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6", 1648877},
			{"t10k-labels-idx1-ubyte.gz", "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6", 4542},
		},
	},
	"cifar10": {
		Mirrors: []string{"https://www.cs.toronto.edu/~kriz/"},
		Files: []Remote{
			{"cifar-10-binary.tar.gz", "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd", 170052171},
		},
		Archive: true,
	},
}

// ErrChecksum reports a download whose SHA-256 is not the published one.
var ErrChecksum = errors.New("data: SHA-256 mismatch")

// Download fetches dataset ("mnist" or "cifar10") from Sources into dir
// with client (nil: http.DefaultClient); see Source.Download.
func Download(ctx context.Context, client *http.Client, dataset, dir string) error {
	src, ok := Sources[dataset]
	if !ok {
		return fmt.Errorf("data: no download for %q (want mnist or cifar10; Fashion-MNIST comes from Debian's dataset-fashion-mnist)", dataset)
	}
	return src.Download(ctx, client, dir)
}

// Download fetches src's files into dir, trying the mirrors in order. Each
// file goes to a temporary file in dir and is renamed into place only after
// its size and SHA-256 match; an archive is then unpacked into
// dir/cifar-10-batches-bin. Files already present with the right digest are
// not fetched again.
func (src Source) Download(ctx context.Context, client *http.Client, dir string) error {
	mirrors := src.Mirrors
	if client == nil {
		client = http.DefaultClient
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	for _, f := range src.Files {
		path := filepath.Join(dir, f.Name)
		if sum, err := fileSHA256(path); err == nil && sum == f.SHA256 {
			continue
		}
		var errs []error
		for _, m := range mirrors {
			err := fetch(ctx, client, strings.TrimSuffix(m, "/")+"/"+f.Name, path, f)
			if err == nil {
				errs = nil
				break
			}
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
		}
		if len(errs) > 0 {
			return fmt.Errorf("data: downloading %s: %w", f.Name, errors.Join(errs...))
		}
	}
	if src.Archive {
		return untarCIFAR(filepath.Join(dir, src.Files[0].Name), dir)
	}
	return nil
}

// fetch downloads url to path through a temporary file, checking size and
// digest before the rename.
func fetch(ctx context.Context, client *http.Client, url, path string, want Remote) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.part")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(resp.Body, want.Size+1))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	if n != want.Size {
		return fmt.Errorf("%s: got %d bytes, want %d", url, n, want.Size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want.SHA256 {
		return fmt.Errorf("%w: %s: got %s, want %s", ErrChecksum, url, got, want.SHA256)
	}
	return os.Rename(tmp.Name(), path)
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// untarCIFAR extracts the .bin batches of the verified archive into
// dir/cifar-10-batches-bin, ignoring every other entry.
func untarCIFAR(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrFormat, archive, err)
	}
	out := filepath.Join(dir, "cifar-10-batches-bin")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	tr := tar.NewReader(zr)
	found := 0
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrFormat, archive, err)
		}
		base := filepath.Base(hdr.Name)
		if hdr.Typeflag != tar.TypeReg || !strings.HasSuffix(base, ".bin") || hdr.Size > maxCIFAR {
			continue
		}
		dst, err := os.Create(filepath.Join(out, base))
		if err != nil {
			return fmt.Errorf("data: %w", err)
		}
		_, err = io.Copy(dst, io.LimitReader(tr, hdr.Size))
		if cerr := dst.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("data: extracting %s: %w", base, err)
		}
		found++
	}
	if found == 0 {
		return fmt.Errorf("%w: %s holds no .bin batch", ErrFormat, archive)
	}
	return nil
}
