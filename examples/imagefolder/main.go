package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"

	G "gorgonia.org/gorgonia"

	"github.com/orthonet/orthonet/data"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/training"
)

// options are the command's flags.
type options struct {
	training.Flags        // -out, -resume, -device, -r, -lr, -lr-other, -seed
	data                  string
	size, channels, batch int
	steps, epochs         int
	skip                  bool
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run parses args, trains, and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	o := options{Flags: training.Flags{Out: "checkpoints/imagefolder", Device: "auto", R: 32, LR: 0.2, LROther: 0.003, Seed: 1}}
	fs := o.FlagSet("imagefolder", "imagefolder trains a small convolutional network written in plain Gorgonia on a folder of images,\nDIR/train/CLASS/*.png|jpg and DIR/test/CLASS/*, through package training: its dense hidden weight\non the Stiefel manifold stepped by RSDM, the rest by Adam. scripts/idx2folder writes such a folder.\n\nUsage: go run ./examples/imagefolder -data DIR [flags]", stderr)
	fs.StringVar(&o.data, "data", "", "the image folder: DIR/train/CLASS/* and DIR/test/CLASS/* (required)")
	fs.IntVar(&o.size, "size", 28, "side every image is resized to")
	fs.IntVar(&o.channels, "channels", 1, "1 (grayscale) or 3 (RGB)")
	fs.IntVar(&o.batch, "batch", 32, "batch size")
	fs.IntVar(&o.steps, "steps", 0, "stop after this many steps in all (0: -epochs decides)")
	fs.IntVar(&o.epochs, "epochs", 1, "passes over the training images")
	fs.BoolVar(&o.skip, "skip", false, "skip faulty image files (counted) instead of refusing the folder")
	if err := fs.Parse(args); err != nil {
		return training.ParseExitCode(err)
	}
	if o.data == "" {
		fmt.Fprintln(stderr, "imagefolder: -data DIR is required (DIR/train/CLASS/* and DIR/test/CLASS/*)")
		return 2
	}
	ctx, stop := training.NotifySignals()
	defer stop()
	_, err := train(ctx, o, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "imagefolder:", err)
	}
	return training.ExitCode(err)
}

// train reads the folder, builds the model and trains it.
func train(ctx context.Context, o options, log io.Writer) (training.Eval, error) {
	trainSet, testSet, err := data.ReadImageFolderSplit(o.data, data.FolderOptions{C: o.channels, H: o.size, W: o.size, Skip: o.skip})
	if err != nil {
		return training.Eval{}, &training.SettingError{Err: err}
	}
	if n := len(trainSet.Skipped) + len(testSet.Skipped); n > 0 {
		fmt.Fprintf(log, "skipped %d faulty files (-skip), the first: %s\n", n, append(trainSet.Skipped, testSet.Skipped...)[0])
	}
	g := G.NewGraph()
	loss, logits, x, y, params, err := buildModel(g, o.batch, o.channels, o.size, o.size, trainSet.Classes, rand.New(rand.NewPCG(o.Seed, 0x696d67)))
	if err != nil {
		return training.Eval{}, &training.SettingError{Err: err}
	}
	if _, err := G.Grad(loss, param.Nodes(params)...); err != nil {
		return training.Eval{}, err
	}
	cfg := training.Config{Train: trainSet, Test: testSet, Batch: o.batch, Epochs: o.epochs, MaxSteps: o.steps,
		Groups:    o.Groups(), // RSDM on the Stiefel weight, Adam on the rest
		SaveEvery: 50, Log: log, Bar: true,
		Settings:  map[string]string{"size": fmt.Sprint(o.size), "channels": fmt.Sprint(o.channels), "batch": fmt.Sprint(o.batch)},
		MayChange: map[string]bool{},
		Describe: fmt.Sprintf("imagefolder's convnet on %s (%d classes, %d training and %d test images of %dx%dx%d), batch %d",
			o.data, trainSet.Classes, trainSet.N, testSet.N, o.channels, o.size, o.size, o.batch)}
	o.Apply(&cfg) // -out, -resume, -device and -seed, and the flags a resumed run must keep
	return training.Run(ctx, training.Model{Loss: loss, Logits: logits, Input: x, Labels: y, Params: params}, cfg)
}
