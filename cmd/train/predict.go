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
	"github.com/orthonet/orthonet/training"
)

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

// predictFlags are train predict's flags.
type predictFlags struct {
	useFlags
	top    int
	asJSON bool
	files  []string
}

func parsePredict(args []string, stderr io.Writer) (predictFlags, error) {
	var p predictFlags
	fs := flag.NewFlagSet("train predict", flag.ContinueOnError)
	p.register(fs, "cpu") // a few images: quicker than starting a GPU
	fs.IntVar(&p.top, "top", 3, "print the N most probable classes of each image")
	fs.BoolVar(&p.asJSON, "json", false, `print one JSON object per image: {"file", "index", "top": [{"class", "name", "probability"}]}`)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: train predict [flags] FILE...\n\nClassifies images (PNG, JPEG, IDX files of images, CIFAR-10 batches) with a checkpoint of train.\n\n")
		fs.PrintDefaults()
	}
	if err := parseSub(fs, args, stderr); err != nil {
		return p, &usageError{err}
	}
	switch {
	case fs.NArg() == 0:
		return p, &usageError{errors.New("no image files given (train predict [flags] FILE...)")}
	case p.top < 1:
		return p, &usageError{fmt.Errorf("-top %d: want at least 1", p.top)}
	}
	p.files = fs.Args()
	return p, p.check()
}

// runPredict runs train predict: it classifies image files with a
// checkpoint's model, printing the top classes of each image with their
// probabilities, one line per image (JSON with -json). Each file is read
// and resized as the training data were (data.ReadImageFile, Set.Resize); a
// file that cannot be read is refused with a line on stderr and the others
// are still classified; the exit status is 1 when any was refused.
func runPredict(args []string, stdout, stderr io.Writer) error {
	p, err := parsePredict(args, stderr)
	if err != nil {
		return err
	}
	t, err := loadTrained(p.useFlags, "")
	if err != nil {
		return err
	}
	p.top = min(p.top, t.info.Classes)
	eng, _, err := t.startEngine(predictBatch, stderr)
	if err != nil {
		return err
	}
	defer eng.Close()
	want := t.set()
	failed := 0
	for _, path := range p.files {
		set, err := data.ReadImageFile(path, want.C) // within data.MaxImagePixels and data.DefaultMaxBytes
		if err == nil {
			set, err = set.Resize(want.H, want.W, dataBudget(t.c.budget()))
		}
		if err != nil {
			fmt.Fprintf(stderr, "train predict: %v\n", err)
			failed++
			continue
		}
		if err := p.classify(eng, t, path, set, stdout); err != nil {
			return err
		}
	}
	if failed > 0 {
		return errReported // each refused file has had its line
	}
	return nil
}

// classify prints the top classes of every image of set, read from path.
func (p predictFlags) classify(eng *training.Evaluator, t *trained, path string, set *data.Set, stdout io.Writer) error {
	d, k := set.Dim(), t.info.Classes
	enc := json.NewEncoder(stdout)
	for lo := 0; lo < set.N; lo += predictBatch {
		n := min(predictBatch, set.N-lo)
		z, err := eng.Predict(set.X[lo*d : (lo+n)*d])
		if err != nil {
			return fmt.Errorf("classifying %s: %w", path, err)
		}
		for i := 0; i < n; i++ {
			pr := prediction{File: path, Index: lo + i, Top: topClasses(z[i*k:(i+1)*k], p.top, t.classes)}
			if p.asJSON {
				if err := enc.Encode(pr); err != nil {
					return err
				}
				continue
			}
			name := path
			if set.N > 1 {
				name = fmt.Sprintf("%s[%d]", path, lo+i)
			}
			parts := make([]string, len(pr.Top))
			for j, s := range pr.Top {
				parts[j] = fmt.Sprintf("%s %.2f%%", s.Name, 100*s.Probability)
			}
			fmt.Fprintf(stdout, "%s: %s\n", name, strings.Join(parts, ", "))
		}
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
