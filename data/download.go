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
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
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

// Downloader fetches datasets over HTTP, bounding how long each request may
// take so that a mirror that stalls or trickles is given up for the next
// one. The zero value is ready to use: its fields' defaults are below.
type Downloader struct {
	// Client makes the requests; nil means http.DefaultClient. The
	// timeouts below apply whatever the client's own.
	Client *http.Client

	// ConnectTimeout bounds the time from sending a request to receiving
	// the response's headers: connecting, TLS, redirects. Zero means 30 s.
	ConnectTimeout time.Duration

	// IdleTimeout bounds the wait for each next piece of a response's
	// body. Zero means 60 s.
	IdleTimeout time.Duration

	// Timeout bounds a whole file's transfer from one mirror, headers to
	// last byte. Zero means a minute plus a second per 100 kB of the
	// file's published size: 2.7 minutes for MNIST's training images,
	// 29 minutes for CIFAR-10's archive.
	Timeout time.Duration
}

func (d *Downloader) client() *http.Client {
	if d.Client == nil {
		return http.DefaultClient
	}
	return d.Client
}

func (d *Downloader) connectTimeout() time.Duration {
	if d.ConnectTimeout > 0 {
		return d.ConnectTimeout
	}
	return 30 * time.Second
}

func (d *Downloader) idleTimeout() time.Duration {
	if d.IdleTimeout > 0 {
		return d.IdleTimeout
	}
	return time.Minute
}

func (d *Downloader) timeout(size int64) time.Duration {
	if d.Timeout > 0 {
		return d.Timeout
	}
	return time.Minute + time.Duration(size/100_000)*time.Second
}

// Download fetches dataset ("mnist" or "cifar10") from Sources into dir
// with the default timeouts of a Downloader using client (nil:
// http.DefaultClient); see Downloader.Fetch.
func Download(ctx context.Context, client *http.Client, dataset, dir string) error {
	return (&Downloader{Client: client}).Download(ctx, dataset, dir)
}

// Download fetches dataset ("mnist" or "cifar10") from Sources into dir;
// see Fetch.
func (d *Downloader) Download(ctx context.Context, dataset, dir string) error {
	src, ok := Sources[dataset]
	if !ok {
		return fmt.Errorf("data: no download for %q (want mnist or cifar10; Fashion-MNIST comes from Debian's dataset-fashion-mnist)", dataset)
	}
	return d.Fetch(ctx, src, dir)
}

// Fetch fetches src's files into dir, trying the mirrors in order: a
// mirror that fails, or exceeds one of d's timeouts, is given up for the
// next. Each file goes to a temporary file .NAME.DIGITS.part in dir and is
// renamed into place, with mode 0644, only after its size and SHA-256
// match; an archive is then unpacked into dir/cifar-10-batches-bin through
// a temporary folder. Files already present with the right digest are not
// fetched again. Temporary files and folders that an interrupted Fetch left
// behind are removed once untouched for twice IdleTimeout plus a minute (a
// younger one may belong to a Fetch still running).
func (d *Downloader) Fetch(ctx context.Context, src Source, dir string) (err error) {
	created := missingDirs(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	defer func() {
		if err != nil { // nothing left behind: the folders made for it, where still empty
			for _, c := range created {
				_ = os.Remove(c) // removes only an empty folder
			}
		}
	}()
	return d.fetchAll(ctx, src, dir)
}

// missingDirs returns dir and those of its parents that do not exist,
// deepest first: the folders os.MkdirAll(dir) would make.
func missingDirs(dir string) []string {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			return missing
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			return missing
		}
	}
}

// fetchAll fetches src's files into the folder dir, as Fetch says.
func (d *Downloader) fetchAll(ctx context.Context, src Source, dir string) error {
	for _, f := range src.Files {
		if err := removeStaleParts(dir, f.Name, false, d.staleAge()); err != nil {
			return err
		}
		path := filepath.Join(dir, f.Name)
		if sum, err := fileSHA256(path); err == nil && sum == f.SHA256 {
			continue
		}
		var errs []error
		for _, m := range src.Mirrors {
			err := d.fetch(ctx, strings.TrimSuffix(m, "/")+"/"+f.Name, path, f)
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
		if err := removeStaleParts(dir, cifarFolder, true, d.staleAge()); err != nil {
			return err
		}
		return untarCIFAR(filepath.Join(dir, src.Files[0].Name), dir)
	}
	return nil
}

// staleAge is how long a temporary file of Fetch must stay untouched to
// count as left behind: a running Fetch writes to it at least once per
// IdleTimeout.
func (d *Downloader) staleAge() time.Duration { return 2*d.idleTimeout() + time.Minute }

// isPart reports whether file is a temporary file or folder that Fetch
// creates for name: "." + name + "." + decimal digits + ".part".
func isPart(file, name string) bool {
	digits, ok := strings.CutPrefix(file, "."+name+".")
	if !ok {
		return false
	}
	if digits, ok = strings.CutSuffix(digits, ".part"); !ok || len(digits) == 0 || len(digits) > 10 {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// removeStaleParts removes the temporary files (folders if dirs is set)
// in dir that Fetch created for name and that have not changed for age.
func removeStaleParts(dir, name string, dirs bool, age time.Duration) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	for _, e := range entries {
		if !isPart(e.Name(), name) || (dirs && !e.IsDir()) || (!dirs && !e.Type().IsRegular()) {
			continue
		}
		fi, err := e.Info()
		if err != nil || time.Since(fi.ModTime()) < age {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("data: removing a stale partial download: %w", err)
		}
	}
	return nil
}

// idleReader reads from r, restarting timer t for d after each read that
// returns data.
type idleReader struct {
	r io.Reader
	t *time.Timer
	d time.Duration
}

func (ir *idleReader) Read(p []byte) (int, error) {
	n, err := ir.r.Read(p)
	if n > 0 {
		ir.t.Reset(ir.d)
	}
	return n, err
}

// fetch downloads url to path through a temporary file, checking size and
// digest before the rename.
func (d *Downloader) fetch(ctx context.Context, url, path string, want Remote) (err error) {
	deadline := d.timeout(want.Size)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ctx, stop := context.WithTimeoutCause(ctx, deadline, fmt.Errorf("not done within %v (the Downloader's Timeout)", deadline))
	defer stop()
	// Name the timeout that ended the transfer, rather than the bare
	// "context canceled" of the transport.
	defer func() {
		if err != nil && ctx.Err() != nil {
			err = fmt.Errorf("%s: %w", url, context.Cause(ctx))
		}
	}()

	connect := d.connectTimeout()
	timer := time.AfterFunc(connect, func() {
		cancel(fmt.Errorf("no response within %v (the Downloader's ConnectTimeout)", connect))
	})
	defer timer.Stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	// The file is what the SHA-256 covers: ask for it as it is, so that
	// the transport neither requests gzip nor unzips a .gz on the way.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := d.client().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	timer.Stop()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	if resp.ContentLength > want.Size {
		return fmt.Errorf("%s: announces %d bytes, want %d", url, resp.ContentLength, want.Size)
	}
	idle := d.idleTimeout()
	timer = time.AfterFunc(idle, func() {
		cancel(fmt.Errorf("no data for %v (the Downloader's IdleTimeout)", idle))
	})
	defer timer.Stop()
	return saveVerified(url, path, &idleReader{r: resp.Body, t: timer, d: idle}, want)
}

// saveVerified writes body, downloaded from url, to path through a
// temporary file beside it, checking size and digest before the rename.
func saveVerified(url, path string, body io.Reader, want Remote) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.part")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(body, want.Size+1))
	if err == nil {
		err = tmp.Chmod(0o644)
	}
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
// dir/cifar-10-batches-bin, ignoring every other entry. The batches are
// written to a fresh temporary folder in dir and renamed into place, so a
// symlink planted at a batch's name is replaced, never followed. A
// cifar-10-batches-bin that is not a folder is refused.
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
	out := filepath.Join(dir, cifarFolder)
	if fi, err := os.Lstat(out); err == nil && !fi.IsDir() {
		return fmt.Errorf("data: %s is not a folder (%v); remove it to unpack %s", out, fi.Mode().Type(), archive)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("data: %w", err)
	}
	tmp, err := os.MkdirTemp(dir, "."+cifarFolder+".*.part")
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	defer os.RemoveAll(tmp) // only what this call wrote; empty after the renames
	names, err := extractBatches(tar.NewReader(zr), archive, tmp)
	if err != nil {
		return err
	}
	return placeBatches(names, tmp, out, archive)
}

// extractBatches writes the .bin batches of the archive read by tr into
// the folder tmp and returns their names; at least one.
func extractBatches(tr *tar.Reader, archive, tmp string) ([]string, error) {
	var names []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrFormat, archive, err)
		}
		base := filepath.Base(hdr.Name)
		if hdr.Typeflag != tar.TypeReg || !strings.HasSuffix(base, ".bin") || hdr.Size > maxCIFAR || slices.Contains(names, base) {
			continue
		}
		dst, err := os.OpenFile(filepath.Join(tmp, base), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return nil, fmt.Errorf("data: %w", err)
		}
		_, err = io.Copy(dst, io.LimitReader(tr, hdr.Size))
		if cerr := dst.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("data: extracting %s from %s: %w", base, archive, err)
		}
		names = append(names, base)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: %s holds no .bin batch", ErrFormat, archive)
	}
	return names, nil
}

// placeBatches renames the batches names from the folder tmp into the
// folder out, made if missing.
func placeBatches(names []string, tmp, out, archive string) error {
	if err := os.Mkdir(out, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("data: %w", err)
	}
	if fi, err := os.Lstat(out); err != nil || !fi.IsDir() {
		return fmt.Errorf("data: %s is not a folder; remove it to unpack %s", out, archive)
	}
	for _, n := range names {
		// rename replaces whatever is at the destination, a symlink
		// included, without following it.
		if err := os.Rename(filepath.Join(tmp, n), filepath.Join(out, n)); err != nil {
			return fmt.Errorf("data: %w", err)
		}
	}
	return nil
}
