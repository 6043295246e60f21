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
	"github.com/orthonet/orthonet/onnxexport"
)

// Metadata keys of an exported model (ONNX metadata_props).
const (
	metaClasses    = "orthonet.classes"     // JSON list of the class names, by label
	metaInput      = "orthonet.input"       // JSON: the input's name, shape and preprocessing
	metaFlags      = "orthonet.train_flags" // JSON: the run's flags
	metaCheckpoint = "orthonet.checkpoint"  // the checkpoint exported
	metaStep       = "orthonet.step"        // its step
)

// inputInfo describes an exported model's input (metaInput). Its Shape's
// first entry, the batch, is -1: the file takes any number of images
// (Batch says so in words).
type inputInfo struct {
	Name     string `json:"name"`
	Shape    []int  `json:"shape"`
	Batch    string `json:"batch"`
	Layout   string `json:"layout"`
	Channels string `json:"channels"`
	Resize   string `json:"resize"`
	Scale    string `json:"scale"`
}

// runExport runs train export: it writes a checkpoint's model as an ONNX
// file (onnxexport.ExportBatch, opset onnxexport.Opset) whose input is a
// batch of whole images of any size (the symbolic dimension "batch"),
// preprocessed as train's data are, and whose output is the logits; the
// metadata holds the class names, the input's shape and preprocessing, and
// the run's flags.
func runExport(args []string, stdout, stderr io.Writer) error {
	var u useFlags
	var format, output string
	fs := flag.NewFlagSet("train export", flag.ContinueOnError)
	u.register(fs, "")
	fs.StringVar(&format, "format", "onnx", "file format: onnx")
	fs.StringVar(&output, "o", "", "the file to write; an existing file is an error (default: the checkpoint's name with .onnx, beside it)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: train export [flags]\n\nWrites a checkpoint of train as an ONNX model (opset %d) of whole images to logits, for any batch size.\n\n", onnxexport.Opset)
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
	m, err := exportModel(t)
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
	fmt.Fprintf(stdout, "exported %s\nto %s (ONNX opset %d, %.1f MB): input \"images\" float32 (batch, %d, %d, %d), any batch, pixels p scaled to p/127.5 - 1 after resizing to %dx%d; output \"logits\" (batch, %d), classes in the metadata (%s)\n",
		t.describe(), output, onnxexport.Opset, float64(len(b))/1e6, s[0], s[1], s[2], s[1], s[2], t.info.Classes, metaClasses)
	fmt.Fprintf(stdout, "serve it with ONNX Runtime: in Python, onnxruntime.InferenceSession(%q).run([\"logits\"], {\"images\": x}); in Node.js, onnxruntime-node's InferenceSession (see docs/using-trained-models.md)\n", output)
	return nil
}

// exportModel returns the checkpoint's model as an ONNX model for batches
// of any size (onnxexport.ExportBatch builds its network at a few), with
// its metadata.
func exportModel(t *trained) (*onnx.Model, error) {
	var unusable error // the checkpoint's fault, said as eval says it
	m, err := onnxexport.ExportBatch(func(batch int) (*G.ExprGraph, onnxexport.Config, error) {
		net, err := t.network(batch, true)
		if err != nil {
			unusable = err
			return nil, onnxexport.Config{}, err
		}
		return net.logits.Graph(), onnxexport.Config{
			Inputs: []*G.Node{net.x}, InputNames: []string{"images"},
			Outputs: []*G.Node{net.logits}, OutputNames: []string{"logits"},
		}, nil
	})
	if unusable != nil {
		return nil, unusable
	}
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
			Name: "images", Shape: []int{-1, s[0], s[1], s[2]}, Layout: "NCHW, row-major", Channels: channels,
			Batch:  "any: the first dimension (-1 in shape) is the ONNX input's symbolic dimension batch, as many images as are given",
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
	m.DocString = fmt.Sprintf("orthonet %s trained on %s (train %s), checkpoint %s at step %d: images (batch, %d, %d, %d) to logits (batch, %d), for any batch",
		t.c.model, t.c.dataset, flagLine(t.flags), t.path, t.step, s[0], s[1], s[2], t.info.Classes)
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
