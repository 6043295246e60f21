package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/orthonet/orthonet/data"
)

// predictMain runs train predict: it classifies image files with a
// checkpoint's model, printing the top classes of each image with their
// probabilities, one line per image (JSON with -json). Each file is read
// and resized as the training data were (data.ReadImageFile, Set.Resize); a
// file that cannot be read is refused with a line on stderr and the others
// are still classified; the exit status is 1 when any was refused.
func predictMain(args []string, stdout, stderr io.Writer) int {
	return subExit("train predict", runPredict(args, stdout, stderr), stderr)
}

// predictBatch is how many images one run of the network classifies.
const predictBatch = 32

// prediction is one image's top classes, as -json prints it.
type prediction struct {
	File  string       `json:"file"`
	Index int          `json:"index"` // the image's place in its file (IDX files and CIFAR-10 batches hold several)
	Top   []classScore `json:"top"`
}

// classScore is a class and its probability.
type classScore struct {
	Class       int     `json:"class"`
	Name        string  `json:"name"`
	Probability float64 `json:"probability"`
}

func runPredict(args []string, stdout, stderr io.Writer) error {
	var u useFlags
	var top int
	var asJSON bool
	fs := flag.NewFlagSet("train predict", flag.ContinueOnError)
	u.register(fs, "cpu") // a few images: quicker than starting a GPU
	fs.IntVar(&top, "top", 3, "print the N most probable classes of each image")
	fs.BoolVar(&asJSON, "json", false, `print one JSON object per image: {"file", "index", "top": [{"class", "name", "probability"}]}`)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: train predict [flags] FILE...\n\nClassifies images (PNG, JPEG, IDX files of images, CIFAR-10 batches) with a checkpoint of train.\n\n")
		fs.PrintDefaults()
	}
	if err := parseSub(fs, args, stderr); err != nil {
		return &usageError{err}
	}
	switch {
	case fs.NArg() == 0:
		return &usageError{errors.New("no image files given (train predict [flags] FILE...)")}
	case top < 1:
		return &usageError{fmt.Errorf("-top %d: want at least 1", top)}
	case u.device != "auto" && u.device != "cpu" && u.device != "cuda":
		return &usageError{fmt.Errorf("-device %q: want one of auto, cpu, cuda", u.device)}
	}
	t, err := loadTrained(u, "")
	if err != nil {
		return err
	}
	top = min(top, t.info.Classes)
	net, err := t.network(predictBatch, false)
	if err != nil {
		return err
	}
	eng, err := t.startEngine(net, stderr)
	if err != nil {
		return err
	}
	defer eng.close()
	want := t.set()
	enc := json.NewEncoder(stdout)
	failed := 0
	for _, path := range fs.Args() {
		set, err := data.ReadImageFile(path, want.C)
		if err == nil {
			set, err = set.Resize(want.H, want.W, 0)
		}
		if err != nil {
			fmt.Fprintf(stderr, "train predict: %v\n", err)
			failed++
			continue
		}
		d, k := set.Dim(), want.Classes
		for lo := 0; lo < set.N; lo += predictBatch {
			n := min(predictBatch, set.N-lo)
			net.fill(set.X[lo*d:(lo+n)*d], n)
			z, err := eng.evaluate()
			if err != nil {
				return fmt.Errorf("classifying %s: %w", path, err)
			}
			for i := 0; i < n; i++ {
				p := prediction{File: path, Index: lo + i, Top: topClasses(z[i*k:(i+1)*k], top, t.classes)}
				if asJSON {
					if err := enc.Encode(p); err != nil {
						return err
					}
					continue
				}
				name := path
				if set.N > 1 {
					name = fmt.Sprintf("%s[%d]", path, lo+i)
				}
				parts := make([]string, len(p.Top))
				for j, s := range p.Top {
					parts[j] = fmt.Sprintf("%s %.2f%%", s.Name, 100*s.Probability)
				}
				fmt.Fprintf(stdout, "%s: %s\n", name, strings.Join(parts, ", "))
			}
		}
	}
	if failed > 0 {
		return errReported // each refused file has had its line
	}
	return nil
}

// topClasses returns the n most probable classes of one image's logits,
// the probabilities their softmax (computed in float64, the largest logit
// subtracted).
func topClasses(logits []float32, n int, names []string) []classScore {
	m := float64(logits[argmax(logits)])
	var sum float64
	p := make([]float64, len(logits))
	for j, v := range logits {
		p[j] = math.Exp(float64(v) - m)
		sum += p[j]
	}
	order := make([]int, len(p))
	for j := range order {
		order[j] = j
	}
	sort.SliceStable(order, func(a, b int) bool { return p[order[a]] > p[order[b]] })
	out := make([]classScore, n)
	for j := range out {
		c := order[j]
		out[j] = classScore{Class: c, Name: names[c], Probability: p[c] / sum}
	}
	return out
}
