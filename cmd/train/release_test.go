package main

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/training"
)

// TestReleaseRunResumes resumes testdata/release-run/run, a run folder of
// the release before cmd/train used package training (its epoch 1 of 2),
// to epoch 2: every tensor must be bit for bit that of the release's run
// never stopped (want.json, see testdata/release-run/README), and its
// progress the same but for the clocks. It runs where OpenBLAS is the BLAS,
// as it was for the release's run.
func TestReleaseRunResumes(t *testing.T) {
	if !strings.HasPrefix(linalg.Backend(), "OpenBLAS") {
		// The release's run took its steps on OpenBLAS: another BLAS rounds
		// its products otherwise.
		t.Skipf("the reference was made with OpenBLAS; this build's BLAS is %s", linalg.Backend())
	}
	src := filepath.Join("testdata", "release-run")
	dir := filepath.Join(t.TempDir(), "run-release")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(src, "run"))); err != nil {
		t.Fatal(err)
	}
	var want struct {
		Tensors map[string]struct {
			Shape  []int  `json:"shape"`
			SHA256 string `json:"sha256"`
		} `json:"tensors"`
		Progress training.Progress `json:"progress"`
	}
	b, err := os.ReadFile(filepath.Join(src, "want.json"))
	if err == nil {
		err = json.Unmarshal(b, &want)
	}
	if err != nil {
		t.Fatal(err)
	}
	c := parsed(t, "-resume", dir, "-epochs", "2", "-data", filepath.Join(src, "data"), "-device", "cpu")
	if err := run(t.Context(), c, io.Discard, hooks{}); err != nil {
		t.Fatal(err)
	}
	got, gotProgress := finalState(t, filepath.Dir(dir))
	if len(got.Tensors) != len(want.Tensors) {
		t.Fatalf("%d tensors, want %d", len(got.Tensors), len(want.Tensors))
	}
	for name, w := range want.Tensors {
		g, ok := got.Tensors[name]
		h := sha256.New()
		if ok {
			_ = binary.Write(h, binary.LittleEndian, g.Data)
		}
		if !ok || !reflect.DeepEqual(g.Shape, w.Shape) || hex.EncodeToString(h.Sum(nil)) != w.SHA256 {
			t.Errorf("tensor %s differs from the release's run never stopped", name)
		}
	}
	clean := func(p training.Progress) training.Progress { // clock readings differ between runs
		p.Seconds, p.TrainSeconds = 0, 0
		p.Metrics = append([]training.Row(nil), p.Metrics...)
		for i := range p.Metrics {
			p.Metrics[i].Seconds, p.Metrics[i].TrainSeconds = 0, 0
		}
		return p
	}
	if g, w := clean(gotProgress), clean(want.Progress); !reflect.DeepEqual(g, w) {
		t.Errorf("progress differs:\nresumed  %+v\nstraight %+v", g, w)
	}
}
