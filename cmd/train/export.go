package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	G "gorgonia.org/gorgonia"

	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/onnx"
	"github.com/orthonet/orthonet/program"
)

// exportMain runs train export: it writes a checkpoint's model as an ONNX
// file (program.ExportONNX, opset program.ONNXOpset) whose input is a batch
// of whole images, preprocessed as train's data are, and whose output is
// the logits; the metadata holds the class names, the input's shape and
// preprocessing, and the run's flags.
func exportMain(args []string, stdout, stderr io.Writer) int {
	return subExit("train export", runExport(args, stdout, stderr), stderr)
}

// Metadata keys of an exported model (ONNX metadata_props).
const (
	metaClasses    = "orthonet.classes"     // JSON list of the class names, by label
	metaInput      = "orthonet.input"       // JSON: the input's name, shape and preprocessing
	metaFlags      = "orthonet.train_flags" // JSON: the run's flags
	metaCheckpoint = "orthonet.checkpoint"  // the checkpoint exported
	metaStep       = "orthonet.step"        // its step
)

// inputInfo describes an exported model's input (metaInput).
type inputInfo struct {
	Name     string `json:"name"`
	Shape    []int  `json:"shape"`
	Layout   string `json:"layout"`
	Channels string `json:"channels"`
	Resize   string `json:"resize"`
	Scale    string `json:"scale"`
}

func runExport(args []string, stdout, stderr io.Writer) error {
	var u useFlags
	var format, output string
	var batch int
	fs := flag.NewFlagSet("train export", flag.ContinueOnError)
	u.register(fs, "")
	fs.StringVar(&format, "format", "onnx", "file format: onnx")
	fs.StringVar(&output, "o", "", "the file to write; an existing file is an error (default: the checkpoint's name with .onnx, beside it)")
	fs.IntVar(&batch, "batch", 1, "the images the model takes at once: its input is (batch, channels, height, width)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: train export [flags]\n\nWrites a checkpoint of train as an ONNX model (opset %d) of whole images to logits.\n\n", program.ONNXOpset)
		fs.PrintDefaults()
	}
	if err := parseSub(fs, args, stderr); err != nil {
		return &usageError{err}
	}
	switch {
	case fs.NArg() > 0:
		return &usageError{fmt.Errorf("unexpected argument %q (the file is given by -o)", fs.Arg(0))}
	case format != "onnx":
		return &usageError{fmt.Errorf("-format %q: want onnx", format)}
	case batch < 1:
		return &usageError{fmt.Errorf("-batch %d: want at least 1", batch)}
	}
	t, err := loadTrained(u, "")
	if err != nil {
		return err
	}
	if output == "" {
		output = strings.TrimSuffix(t.path, ".safetensors") + ".onnx"
	}
	if _, err := os.Lstat(output); err == nil {
		return &usageError{fmt.Errorf("%s exists: export replaces no file (remove it, or give -o another)", output)}
	}
	m, err := exportModel(t, batch)
	if err != nil {
		return err
	}
	b, err := m.Marshal()
	if err != nil {
		return err
	}
	if err := checkpoint.CreateNew(output, 0o644, func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
		return err
	}
	s := t.info.Shape
	fmt.Fprintf(stdout, "exported %s\nto %s (ONNX opset %d, %.1f MB): input \"images\" float32 (%d, %d, %d, %d), pixels p scaled to p/127.5 - 1 after resizing to %dx%d; output \"logits\" (%d, %d), classes in the metadata (%s)\n",
		t.describe(), output, program.ONNXOpset, float64(len(b))/1e6, batch, s[0], s[1], s[2], s[1], s[2], batch, t.info.Classes, metaClasses)
	fmt.Fprintf(stdout, "serve it with ONNX Runtime: in Python, onnxruntime.InferenceSession(%q).run([\"logits\"], {\"images\": x}); in Node.js, onnxruntime-node's InferenceSession (see docs/using-trained-models.md)\n", output)
	return nil
}

// exportModel returns the checkpoint's model as an ONNX model for batches
// of batch images, with its metadata.
func exportModel(t *trained, batch int) (*onnx.Model, error) {
	net, err := t.network(batch, true)
	if err != nil {
		return nil, err
	}
	m, err := program.ExportONNX(net.logits.Graph(), program.ExportConfig{
		Inputs: []*G.Node{net.x}, InputNames: []string{"images"},
		Outputs: []*G.Node{net.logits}, OutputNames: []string{"logits"},
	})
	if err != nil {
		return nil, err
	}
	s := t.info.Shape
	channels := "one, gray"
	if s[0] == 3 {
		channels = "red, green, blue"
	}
	meta := map[string]any{
		metaClasses: t.classes,
		metaInput: inputInfo{
			Name: "images", Shape: []int{batch, s[0], s[1], s[2]}, Layout: "NCHW, row-major", Channels: channels,
			Resize: fmt.Sprintf("to %dx%d by antialiased bilinear interpolation with pixel centres aligned (PyTorch's interpolate(mode='bilinear', align_corners=False, antialias=True); orthonet's data.Set.Resize)", s[1], s[2]),
			Scale:  "8-bit pixels p become p/127.5 - 1, in [-1, 1] (scaled before resizing)",
		},
		metaFlags: t.flags,
	}
	m.Metadata = map[string]string{metaCheckpoint: t.path, metaStep: strconv.Itoa(t.step)}
	for k, v := range meta {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		m.Metadata[k] = string(b)
	}
	m.DocString = fmt.Sprintf("orthonet %s trained on %s (train %s), checkpoint %s at step %d: images (%d, %d, %d, %d) to logits (%d, %d)",
		t.c.model, t.c.dataset, flagLine(t.flags), t.path, t.step, batch, s[0], s[1], s[2], batch, t.info.Classes)
	m.Graph.Name = "orthonet-" + t.c.model
	return m, nil
}

// flagLine writes the flags that shape the model as a command line.
func flagLine(flags map[string]string) string {
	names := []string{"model", "dataset", "hidden", "depth"}
	switch flags["model"] {
	case "vit":
		names = []string{"model", "dataset", "dim", "depth", "heads", "mlp", "patch"}
	case "cnn":
		names = []string{"model", "dataset", "channels", "depth"}
	case "rnn":
		names = []string{"model", "dataset", "hidden"}
	}
	var parts []string
	for _, name := range names {
		if v, ok := flags[name]; ok {
			parts = append(parts, "-"+name+" "+v)
		}
	}
	return strings.Join(parts, " ")
}
