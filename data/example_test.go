package data_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/orthonet/orthonet/data"
)

// The default budget admits all of CIFAR-10 at 3 x 32 x 32.
func ExamplePixelBytes() {
	b := data.PixelBytes(60000, 3, 32, 32)
	fmt.Println(b, b <= data.DefaultMaxBytes)
	// Output: 737280000 true
}

// Resize refuses a result larger than its budget before allocating it.
func ExampleSet_Resize() {
	s := &data.Set{Name: "tiny", N: 4, C: 1, H: 28, W: 28, X: make([]float32, 4*28*28), Y: make([]uint8, 4), Classes: 10}
	r, err := s.Resize(32, 32, 0) // the default budget
	fmt.Println(r.N, r.H, r.W, err)
	_, err = s.Resize(32, 32, s.ResizeBytes(32, 32)-1)
	fmt.Println(err != nil)
	// Output:
	// 4 32 32 <nil>
	// true
}

// A mirror that sends its headers and then nothing is given up after
// IdleTimeout, and the next mirror serves the file.
func ExampleDownloader() {
	file := []byte("the published bytes")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stalled/f.bin" {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		_, _ = w.Write(file)
	}))
	defer srv.Close()
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)

	src := data.Source{
		Mirrors: []string{srv.URL + "/stalled/", srv.URL + "/good/"},
		// The SHA-256 of file.
		Files: []data.Remote{{Name: "f.bin", SHA256: "20139b7f2cbb8718eeaa22d38745d005a642545d21cc47fa49475c42d72e044e", Size: int64(len(file))}},
	}
	dl := &data.Downloader{IdleTimeout: 50 * time.Millisecond}
	err := dl.Fetch(context.Background(), src, dir)
	b, _ := os.ReadFile(filepath.Join(dir, "f.bin"))
	fmt.Printf("%v %q\n", err, b)
	// Output: <nil> "the published bytes"
}

// LoadSplit reads both sets and checks that their images agree in shape.
func ExampleLoadSplit() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	files := map[string][]byte{
		// Magic number 0x00000803, then N, H and W, then the pixels.
		"train-images-idx3-ubyte": append([]byte{0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 2}, make([]byte, 3*2*2)...),
		"t10k-images-idx3-ubyte":  append([]byte{0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2}, make([]byte, 2*2*2)...),
		// Magic number 0x00000801, then N, then the labels.
		"train-labels-idx1-ubyte": {0, 0, 8, 1, 0, 0, 0, 3, 7, 1, 4},
		"t10k-labels-idx1-ubyte":  {0, 0, 8, 1, 0, 0, 0, 2, 0, 9},
	}
	for name, b := range files {
		_ = os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}
	train, test, err := data.LoadSplit("mnist", dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(train.N, test.N, train.C, train.H, train.W, train.Y, test.Y)
	// Output: 3 2 1 2 2 [7 1 4] [0 9]
}

// points is a user's own data set held in memory: 2-D points, each
// labelled 0 left of the vertical axis and 1 right of it.
type points struct {
	xy     [][2]float32
	labels []int
}

func (p points) Len() int        { return len(p.labels) }
func (p points) Shape() []int    { return []int{2} }
func (p points) NumClasses() int { return 2 }
func (p points) Example(i int, x []float32) (int, error) {
	if i < 0 || i >= len(p.labels) {
		return 0, fmt.Errorf("points: no example %d", i)
	}
	copy(x, p.xy[i][:])
	return p.labels[i], nil
}

// A user's own data implements Dataset in a few lines, and a Loader serves
// it in shuffled batches.
func ExampleDataset() {
	p := points{
		xy:     [][2]float32{{-1, 0}, {-2, 1}, {3, 0}, {4, -1}, {-5, 2}},
		labels: []int{0, 0, 1, 1, 0},
	}
	l, err := data.NewLoader(p, 2, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	x, y := make([]float32, 2*2), make([]int, 2)
	for {
		n, err := l.Next(x, y)
		if err != nil {
			fmt.Println(err)
			return
		}
		if n == 0 {
			break
		}
		fmt.Println(x[:2*n], y[:n])
	}
	// Output:
	// [-2 1 -1 0] [0 0]
	// [4 -1 -5 2] [1 0]
	// [3 0] [1]
}
