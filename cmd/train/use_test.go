package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/internal/datatest"
	"github.com/orthonet/orthonet/internal/foldertest"
	"github.com/orthonet/orthonet/internal/onnxrt"
	"github.com/orthonet/orthonet/onnx"
	"github.com/orthonet/orthonet/training"
)

// tinyRun trains a small FFN (or, with vit, a small ViT on CIFAR-format
// data) for an epoch on generated data, evaluating on the first 250 test
// images, and returns the data folder, the -out folder and the test
// accuracy line the run ended with.
func tinyRun(t *testing.T, model string) (dir, out, accuracy string) {
	t.Helper()
	out = t.TempDir()
	args := []string{"-dataset", "mnist", "-hidden", "32", "-depth", "2", "-r", "8", "-lr", "0.2", "-lr-other", "0.05"}
	if model != "ffn" {
		dir = cifarDir(t, 40, 260)
		args = []string{"-model", "vit", "-dataset", "cifar10", "-dim", "32", "-depth", "1", "-heads", "2", "-mlp", "16", "-patch", "8",
			"-r", "8", "-lr", "0.1", "-other", "adam", "-lr-other", "0.002"}
		switch model {
		case "cnn":
			args = []string{"-model", "cnn", "-dataset", "cifar10", "-channels", "4", "-depth", "2", "-r", "8", "-lr", "0.2", "-other", "adam", "-lr-other", "0.002"}
		case "rnn":
			args = []string{"-model", "rnn", "-dataset", "cifar10", "-hidden", "16", "-r", "8", "-lr", "0.2", "-other", "adam", "-lr-other", "0.002"}
		}
	} else {
		dir = mnistDir(t, 400, 300)
	}
	c, err := parseFlags(append(args, "-data", dir, "-out", out, "-batch", "10", "-epochs", "1", "-limit-test", "250", "-device", "cpu"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := runForAccuracy(t, c, hooks{})
	return dir, out, regexp.MustCompile(`(?m)^test accuracy: [0-9.]+%$`).FindString(o)
}

// tinyCheckpoint makes tinyRun's FFN run and returns its -out and its
// newest checkpoint.
func tinyCheckpoint(t *testing.T) (out, latest string) {
	t.Helper()
	_, out, _ = tinyRun(t, "ffn")
	latest, err := training.ResolveResume("latest", out)
	if err != nil {
		t.Fatal(err)
	}
	return out, latest
}

// TestEvalReproducesRun evaluates a run's newest checkpoint with no model
// flag: the test accuracy must be the run's last one, on both engines; the
// report files must agree with it and be written into a new folder each
// time, never over a run's files.
func TestEvalReproducesRun(t *testing.T) {
	_, out, want := tinyRun(t, "ffn")
	if want == "" {
		t.Fatal("the run printed no test accuracy")
	}
	for _, args := range [][]string{{"-device", "cpu"}, {"-engine", "tape"}} {
		checkEval(t, out, want, args...)
	}
	dirs, _ := filepath.Glob(filepath.Join(out, "run-*", "eval-step-*"))
	if len(dirs) != 2 || !strings.HasSuffix(dirs[1], "-2") {
		t.Fatalf("report folders %v, want two: eval-step-N and eval-step-N-2", dirs)
	}
	// A ViT's checkpoint too (its evaluation cuts the images into patches).
	_, vitOut, vitWant := tinyRun(t, "vit")
	checkEval(t, vitOut, vitWant, "-device", "cpu")
	// The confusion matrix holds the 250 images with the accuracy on its
	// diagonal, and predictions.csv one row per image agreeing with it.
	rows := readCSV(t, filepath.Join(dirs[0], "confusion.csv"))
	var total, right int
	for k, row := range rows[1:] {
		for j, v := range row[1:] {
			n, _ := strconv.Atoi(v)
			total += n
			if j == k {
				right += n
			}
		}
	}
	if acc := strconv.FormatFloat(100*float64(right)/float64(total), 'f', 2, 64); total != 250 || "test accuracy: "+acc+"%" != want {
		t.Errorf("confusion.csv holds %d images, %d on the diagonal: want 250 and %q", total, right, want)
	}
	preds := readCSV(t, filepath.Join(dirs[0], "predictions.csv"))
	agree := 0
	for _, r := range preds[1:] {
		if r[1] == r[2] {
			agree++
		}
	}
	if len(preds) != 251 || agree != right {
		t.Errorf("predictions.csv: %d rows, %d right; want 250 and %d", len(preds)-1, agree, right)
	}
	if b, err := os.ReadFile(filepath.Join(dirs[0], "confusion.png")); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("confusion.png: %v", err)
	}
	// A -report folder that holds the files already is refused before any work.
	if _, stderr, code := trainExit(t, "eval", "-out", out, "-device", "cpu", "-report", dirs[0]); code != 2 || !strings.Contains(stderr, "already holds confusion.csv") {
		t.Errorf("-report over an earlier report: exit %d, %q", code, stderr)
	}
	// So is a report folder eval cannot write in: before the evaluation, not
	// after it (root writes in a read-only folder: /proc stands in for one).
	if runtime.GOOS != "linux" {
		return
	}
	blocked := "/proc/orthonet-eval-report"
	if stdout, stderr, code := trainExit(t, "eval", "-out", out, "-device", "cpu", "-report", blocked); code != 2 ||
		!strings.Contains(stderr, "not a folder eval can write in") || strings.Contains(stdout, "test accuracy") {
		t.Errorf("-report in a folder eval cannot write: exit %d, printed %q, %q", code, stdout, stderr)
	}
}

// checkEval runs train eval -resume latest with args on the run in out:
// the test accuracy it prints must be want, the run's, on the run's own
// engine and device, and at most one of the 250 images apart elsewhere.
func checkEval(t *testing.T, out, want string, args ...string) {
	t.Helper()
	stdout, stderr, code := trainExit(t, append([]string{"eval", "-resume", "latest", "-out", out}, args...)...)
	if code != 0 {
		t.Fatalf("eval %v: exit %d: %s", args, code, stderr)
	}
	got := regexp.MustCompile(`(?m)^test accuracy: [0-9.]+%`).FindString(stdout)
	if args[0] == "-device" && args[1] == "cpu" { // the run's engine and device
		if got != want {
			t.Errorf("eval %v printed %q, the run %q:\n%s", args, got, want, stdout)
		}
	} else if a, b := percent(t, got), percent(t, want); math.Abs(a-b) > 100.0/250+1e-9 {
		// Another engine or device rounds the products otherwise: an image
		// near a tie may change class, no more.
		t.Errorf("eval %v printed %q, the run %q: more than one image apart:\n%s", args, got, want, stdout)
	}
	if !strings.Contains(stdout, " of 250)") {
		t.Errorf("eval %v did not evaluate the run's 250 test images:\n%s", args, stdout)
	}
}

// percent returns the number of a "test accuracy: NN.NN%" line.
func percent(t *testing.T, line string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimPrefix(line, "test accuracy: "), "%"), 64)
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return v
}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestPredictMatchesEval cuts three test images into PNG files: train
// predict must give each the class that the run's evaluation gives it, and
// a file that is not an image among them is refused alone, with one line.
func TestPredictMatchesEval(t *testing.T) {
	dir, out, _ := tinyRun(t, "ffn")
	if _, stderr, code := trainExit(t, "eval", "-out", out, "-device", "cpu"); code != 0 {
		t.Fatalf("eval: %s", stderr)
	}
	reports, _ := filepath.Glob(filepath.Join(out, "run-*", "eval-step-*", "predictions.csv"))
	if len(reports) != 1 {
		t.Fatalf("predictions: %v", reports)
	}
	preds := readCSV(t, reports[0])
	raw, err := os.ReadFile(filepath.Join(dir, "t10k-images-idx3-ubyte"))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	want := map[string]string{}
	classes := map[string]bool{}
	for i := 0; i < 3; i++ {
		img := image.NewGray(image.Rect(0, 0, 28, 28))
		copy(img.Pix, raw[16+i*784:16+(i+1)*784])
		path := filepath.Join(t.TempDir(), "test-"+strconv.Itoa(i)+".png")
		datatest.WritePNG(t, path, img)
		files = append(files, path)
		want[path] = preds[1+i][2]
		classes[preds[1+i][2]] = true
	}
	if len(classes) < 2 {
		t.Fatalf("the evaluation gives the three images one class %v: the check would not tell images apart", classes)
	}
	notImage := filepath.Join(t.TempDir(), "notes.png")
	if err := os.WriteFile(notImage, []byte("not a picture\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []bool{false, true} {
		args := append([]string{"predict", "-out", out, "-device", "cpu", "-json"}, files...)
		if bad {
			args = append(args[:len(args)-1], notImage, files[2])
		}
		stdout, stderr, code := trainExit(t, args...)
		if wantCode := map[bool]int{false: 0, true: 1}[bad]; code != wantCode {
			t.Errorf("predict (a bad file: %v): exit %d, want %d: %s", bad, code, wantCode, stderr)
		}
		if lines := strings.Split(strings.TrimSpace(stderr), "\n"); bad && (len(lines) != 1 || !strings.Contains(lines[0], notImage) || !strings.Contains(lines[0], "not an image")) {
			t.Errorf("predict: stderr %q, want one line refusing %s", stderr, notImage)
		}
		sc := bufio.NewScanner(strings.NewReader(stdout))
		n := 0
		for sc.Scan() {
			var p prediction
			if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
				t.Fatalf("predict -json line %q: %v", sc.Text(), err)
			}
			if p.File != files[n] || len(p.Top) != 3 || strconv.Itoa(p.Top[0].Class) != want[p.File] {
				t.Errorf("predict: %+v, want %s classified as %s (the evaluation's)", p, files[n], want[files[n]])
			}
			n++
		}
		if n != 3 {
			t.Errorf("predict printed %d predictions, want 3:\n%s", n, stdout)
		}
	}
}

// testLogits returns the first n test images of tr's data set and the
// logits tr's model gives them on the evaluation engine of its flags.
func testLogits(t *testing.T, tr *trained, n int) (images, logits []float32) {
	t.Helper()
	c := tr.c
	c.limitTrain, c.limitTest = 1, n
	_, test, err := loadData(context.Background(), c, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	net, err := tr.network(n, false)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := newEvaluator(tr.c, net)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if logits, err = eng.Predict(test.X[:n*test.Dim()]); err != nil {
		t.Fatal(err)
	}
	return test.X, logits
}

// TestExportRunsInONNXRuntime exports a trained FFN, ViT, CNN and RNN with
// train export, once each, and runs the one file in ONNX Runtime on batches
// of 1 and 7 test images: the logits must be orthonet's evaluation's to
// 1e-5. The file depends on no batch: its input and output have the
// symbolic first dimension "batch", and exporting again gives the same
// bytes.
func TestExportRunsInONNXRuntime(t *testing.T) {
	onnxrt.Need(t)
	for _, model := range []string{"ffn", "vit", "cnn", "rnn"} {
		_, out, _ := tinyRun(t, model)
		file := filepath.Join(t.TempDir(), "model.onnx")
		stdout, stderr, code := trainExit(t, "export", "-out", out, "-o", file)
		if code != 0 {
			t.Fatalf("export: exit %d: %s", code, stderr)
		}
		if !strings.Contains(stdout, "onnxruntime.InferenceSession") || !strings.Contains(stdout, "any batch") {
			t.Errorf("export does not say how to serve the file, or that it takes any batch:\n%s", stdout)
		}
		tr, err := loadTrained(useFlags{resume: "latest", out: out, device: "cpu", engine: "program"}, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, batch := range []int{1, 7} {
			checkONNXLogits(t, tr, file, batch)
		}
		m, err := exportModel(tr)
		if err != nil {
			t.Fatal(err)
		}
		again, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(file); err != nil || !bytes.Equal(b, again) {
			t.Errorf("%s: exporting again gives other bytes (%d, the file %d): %v", model, len(again), len(b), err)
		}
		if in, logits := m.Graph.Inputs[0], m.Graph.Outputs[0]; !slices.Equal(in.Params, []string{"batch", "", "", ""}) || !slices.Equal(logits.Params, []string{"batch", ""}) {
			t.Errorf("%s: input %+v, output %+v: want the first dimension of each symbolic, batch", model, in, logits)
		}
		checkExportMetadata(t, tr, m)
	}
}

// checkONNXLogits runs the exported file on the first batch test images of
// tr's data set in ONNX Runtime: the logits must be orthonet's to 1e-5.
func checkONNXLogits(t *testing.T, tr *trained, file string, batch int) {
	t.Helper()
	images, want := testLogits(t, tr, batch)
	s := tr.info.Shape
	res, err := onnxrt.Run(file, map[string]onnxrt.Tensor{"images": {Dims: []int{batch, s[0], s[1], s[2]}, Data: images}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := res["logits"].Data.([]float32)
	if len(got) != len(want) || len(got) != batch*tr.info.Classes || !slices.Equal(res["logits"].Dims, []int{batch, tr.info.Classes}) {
		t.Fatalf("%s at batch %d: ONNX Runtime gives %d logits %v, orthonet %d", tr.c.model, batch, len(got), res["logits"].Dims, len(want))
	}
	var diff, scale float64
	for i := range want {
		diff = max(diff, math.Abs(float64(got[i])-float64(want[i])))
		scale = max(scale, math.Abs(float64(want[i])))
	}
	t.Logf("%s at batch %d: ONNX Runtime's logits within %.2g of orthonet's (largest %.3g)", tr.c.model, batch, diff, scale)
	if !(diff <= 1e-5*max(1, scale)) {
		t.Errorf("%s at batch %d: ONNX Runtime's logits differ from orthonet's by %.3g (largest logit %.3g)", tr.c.model, batch, diff, scale)
	}
}

// checkExportMetadata checks an exported model's metadata: the classes,
// the input (its batch -1, any) and its preprocessing, the flags.
func checkExportMetadata(t *testing.T, tr *trained, m *onnx.Model) {
	t.Helper()
	var names []string
	var in inputInfo
	var flags map[string]string
	for k, v := range map[string]any{metaClasses: &names, metaInput: &in, metaFlags: &flags} {
		if err := json.Unmarshal([]byte(m.Metadata[k]), v); err != nil {
			t.Fatalf("metadata %s: %v", k, err)
		}
	}
	s := tr.info.Shape
	if len(names) != tr.info.Classes || names[3] != tr.classes[3] || !slices.Equal(in.Shape, []int{-1, s[0], s[1], s[2]}) || !strings.HasPrefix(in.Batch, "any") ||
		!strings.Contains(in.Scale, "p/127.5 - 1") || flags["model"] != tr.c.model {
		t.Errorf("metadata: classes %v, input %+v, flags %v", names, in, flags)
	}
	if !strings.Contains(m.DocString, "for any batch") {
		t.Errorf("doc string %q does not say the model takes any batch", m.DocString)
	}
}

// TestUseRefusals gives the subcommands bad flags, checkpoints that are not
// usable and a file that is not an image: each exits 2 or 1 with one line
// saying why, and writes nothing.
func TestUseRefusals(t *testing.T) {
	out, latest := tinyCheckpoint(t)
	elsewhere := t.TempDir()
	// A safetensors file of another program: tensors, no train flags.
	foreign := checkpoint.New()
	foreign.Tensors["w"] = checkpoint.Tensor{Shape: []int{2}, Data: []float32{1, 2}}
	foreignPath := filepath.Join(elsewhere, "foreign.safetensors")
	if err := checkpoint.Write(foreignPath, foreign); err != nil {
		t.Fatal(err)
	}
	// A damaged copy of the run's checkpoint.
	b, err := os.ReadFile(latest)
	if err != nil {
		t.Fatal(err)
	}
	damaged := filepath.Join(elsewhere, "damaged.safetensors")
	if err := os.WriteFile(damaged, b[:len(b)-100], 0o644); err != nil {
		t.Fatal(err)
	}
	// The run's weights under the flags of another model (a wider FFN).
	other := filepath.Join(elsewhere, "other.safetensors")
	withFlags(t, latest, other, func(flags map[string]string) { flags["hidden"] = "48" })
	// The run's weights with a NaN in one, under a valid checksum.
	f, err := checkpoint.Read(latest)
	if err != nil {
		t.Fatal(err)
	}
	w, ok := f.Tensors[training.PrefixModel+"fc1.W"]
	if !ok {
		t.Fatal("no fc1.W in the checkpoint")
	}
	w.Data.([]float32)[7] = float32(math.NaN())
	nanPath := filepath.Join(elsewhere, "nan.safetensors")
	if err := checkpoint.Write(nanPath, f); err != nil {
		t.Fatal(err)
	}
	notImage := filepath.Join(elsewhere, "image.png")
	if err := os.WriteFile(notImage, []byte("GIF89a, not really\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	existing := filepath.Join(elsewhere, "model.onnx")
	if err := os.WriteFile(existing, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	fine := filepath.Join(elsewhere, "fine.png")
	datatest.WritePNG(t, fine, image.NewGray(image.Rect(0, 0, 28, 28)))
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"eval", "-resume", foreignPath}, 2, "not a checkpoint of cmd/train"},
		{[]string{"predict", "-resume", foreignPath, fine}, 2, "not a checkpoint of cmd/train"},
		{[]string{"export", "-resume", foreignPath}, 2, "not a checkpoint of cmd/train"},
		{[]string{"eval", "-resume", damaged}, 2, "damaged"},
		{[]string{"export", "-resume", damaged}, 2, "damaged"},
		{[]string{"eval", "-resume", other}, 2, `has shape [1024 32], the model's (1024, 48)`},
		{[]string{"predict", "-resume", other, fine}, 2, "has shape [1024 32]"},
		{[]string{"export", "-resume", other}, 2, "has shape [1024 32]"},
		{[]string{"eval", "-resume", filepath.Join(elsewhere, "missing.safetensors")}, 2, "no such file"},
		{[]string{"eval", "-resume", nanPath}, 2, `parameter "fc1.W" has a non-finite entry at 7`},
		{[]string{"predict", "-resume", nanPath, fine}, 2, `parameter "fc1.W" has a non-finite entry at 7`},
		{[]string{"export", "-resume", nanPath}, 2, `parameter "fc1.W" has a non-finite entry at 7`},
		{[]string{"predict", "-resume", latest, notImage}, 1, "not an image"},
		{[]string{"predict", "-resume", latest}, 2, "no image files given"},
		{[]string{"predict", "-resume", latest, "-top", "0", fine}, 2, "-top 0"},
		{[]string{"eval", "-resume", latest, "-split", "validation"}, 2, `-split "validation"`},
		{[]string{"eval", "-resume", latest, "-hidden", "64"}, 2, "flag provided but not defined: -hidden"},
		{[]string{"eval", "-resume", latest, "-limit-train", "5"}, 2, "-limit-train does not apply"},
		{[]string{"eval", "-resume", latest, "stray"}, 2, `unexpected argument "stray"`},
		{[]string{"eval", "-resume", latest, "-engine", "tape", "-device", "cuda"}, 2, "-device cuda needs -engine program"},
		{[]string{"eval", "-resume", filepath.Join(elsewhere, "missing.safetensors"), "-device", "gpu"}, 2, `-device "gpu": want one of auto, cpu, cuda`},
		{[]string{"predict", "-resume", filepath.Join(elsewhere, "missing.safetensors"), "-device", "gpu", fine}, 2, `-device "gpu": want one of auto, cpu, cuda`},
		{[]string{"export", "-resume", latest, "-format", "tflite"}, 2, `-format "tflite"`},
		{[]string{"export", "-resume", latest, "-batch", "4"}, 2, "flag provided but not defined: -batch"},
		{[]string{"export", "-resume", latest, "-o", existing}, 2, "exists: export replaces no file"},
	} {
		before, beforeElsewhere := foldertest.Snapshot(t, out), foldertest.Snapshot(t, elsewhere)
		_, stderr, code := trainExit(t, append([]string{tc.args[0], "-out", out}, tc.args[1:]...)...)
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		if code != tc.code || len(lines) != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and one line saying %q", tc.args, code, stderr, tc.code, tc.want)
		}
		foldertest.Same(t, fmt.Sprintf("%v under -out", tc.args), out, before)
		foldertest.Same(t, fmt.Sprintf("%v elsewhere", tc.args), elsewhere, beforeElsewhere)
	}
}

// TestLoadCheckpointPyTorch runs scripts/load_checkpoint.py, which builds
// the FFN in PyTorch from a checkpoint and preprocesses images as train
// does: its logits on test images must be orthonet's. It needs PyTorch
// (Debian's python3-torch) and is skipped without it; the ONNX export is
// checked without PyTorch.
func TestLoadCheckpointPyTorch(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import torch").Run(); err != nil {
		t.Skipf("PyTorch is not importable by /usr/bin/python3: %v", err)
	}
	dir, out, _ := tinyRun(t, "ffn")
	tr, err := loadTrained(useFlags{resume: "latest", out: out, device: "cpu", engine: "program"}, "")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/python3", filepath.Join("..", "..", "scripts", "load_checkpoint.py"), tr.path,
		"--images", filepath.Join(dir, "t10k-images-idx3-ubyte"), "--first", "5", "--json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("load_checkpoint.py: %v: %s", err, stderr.String())
	}
	var res struct{ Logits [][]float64 }
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	_, want := testLogits(t, tr, 5)
	if len(res.Logits) != 5 {
		t.Fatalf("PyTorch gave %d rows of logits, want 5", len(res.Logits))
	}
	k := tr.info.Classes
	for i, row := range res.Logits {
		for j, v := range row {
			if w := float64(want[i*k+j]); math.Abs(v-w) > 1e-4*max(1, math.Abs(w)) {
				t.Errorf("image %d, class %d: PyTorch %v, orthonet %v", i, j, v, w)
			}
		}
	}
}
