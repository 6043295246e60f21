package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"path/filepath"
	"strconv"

	"github.com/orthonet/orthonet/checkpoint"
)

// metric is one row of metrics.csv.
type metric struct {
	Kind        string   `json:"kind"` // train or test
	Epoch       int      `json:"epoch"`
	Step        int      `json:"step"`
	Seconds     float64  `json:"seconds"`
	Loss        float64  `json:"loss"`
	Accuracy    float64  `json:"accuracy"`
	Feasibility *float64 `json:"feasibility,omitempty"` // largest ||W^T W - I||_F where measured (test rows)
	Examples    int      `json:"examples,omitempty"`    // test images evaluated (test rows)
	Skipped     int      `json:"skipped,omitempty"`     // batches skipped for a non-finite loss or gradient (train rows)
	// NoLoss marks a training row whose batches were all skipped: it has no
	// loss or accuracy (empty in metrics.csv).
	NoLoss bool `json:"no_loss,omitempty"`
	// TrainSeconds is the training time so far: Seconds without the
	// evaluations and checkpoints (-time-limit and -eval-interval count it).
	TrainSeconds float64 `json:"train_seconds"`
}

// window accumulates training loss and accuracy between two log lines.
type window struct {
	Loss     float64 `json:"loss"`
	Accuracy float64 `json:"accuracy"`
	Count    int     `json:"count"`
	Skipped  int     `json:"skipped,omitempty"`
}

// tally adds a step to the training window and, every logEvery steps,
// writes the window's means as a training row of the metrics and shows
// them (showProgress).
func (t *trainer) tally(epoch int, lv, acc float64, bad error) {
	win := &t.st.Window
	if bad != nil {
		win.Skipped++
	} else {
		win.Loss += lv
		win.Accuracy += acc
		win.Count++
	}
	// A skipped batch is recorded in the row of its own step when that
	// step writes one, else in the next row; the epoch's last step writes
	// the skips of its window, so that none is lost.
	due := t.st.Step%t.logEvery == 0 || (win.Skipped > 0 && (t.st.Batch == t.steps || t.st.SkipRun >= maxSkipRun))
	if !due || win.Count+win.Skipped == 0 {
		return
	}
	m := metric{Kind: "train", Epoch: epoch + 1, Step: t.st.Step, Seconds: t.seconds(), Skipped: win.Skipped, TrainSeconds: t.st.TrainSeconds}
	if win.Count == 0 {
		m.NoLoss = true // every batch of the row was skipped
		t.st.Metrics = append(t.st.Metrics, m)
		*win = window{}
		return
	}
	m.Loss, m.Accuracy = win.Loss/float64(win.Count), win.Accuracy/float64(win.Count)
	t.st.Metrics = append(t.st.Metrics, m)
	t.showProgress(epoch, *win)
	*win = window{}
}

// writeOutputs writes metrics.csv and metrics.png into the run folder,
// each replaced atomically; a failure is a warning on w. Without a run
// folder (the ranks but 0 of data-parallel training) it writes nothing.
func writeOutputs(run *checkpoint.Run, metrics []metric, w io.Writer) {
	if run == nil {
		return
	}
	if err := run.WriteFile("metrics.csv", func(f io.Writer) error { return writeCSV(f, metrics) }); err != nil {
		fmt.Fprintln(w, "warning: writing metrics:", err)
	}
	if err := run.WriteFile("metrics.png", func(f io.Writer) error { return plotMetrics(f, metrics) }); err != nil {
		fmt.Fprintln(w, "warning: plotting metrics:", err)
	}
	fmt.Fprintf(w, "metrics: %s, %s\n", filepath.Join(run.Dir(), "metrics.csv"), filepath.Join(run.Dir(), "metrics.png"))
}

// writeCSV writes metrics as CSV; max_feasibility is empty where it was not
// measured.
func writeCSV(f io.Writer, metrics []metric) error {
	cw := csv.NewWriter(f)
	_ = cw.Write([]string{"kind", "epoch", "step", "seconds", "loss", "accuracy", "max_feasibility", "test_examples", "skipped", "train_seconds"})
	for _, m := range metrics {
		feas := ""
		if m.Feasibility != nil {
			feas = strconv.FormatFloat(*m.Feasibility, 'g', 3, 64)
		}
		examples, skipped := "", ""
		if m.Kind == "test" && m.Examples > 0 {
			examples = strconv.Itoa(m.Examples)
		}
		if m.Kind == "train" {
			skipped = strconv.Itoa(m.Skipped)
		}
		loss, acc := strconv.FormatFloat(m.Loss, 'g', 6, 64), strconv.FormatFloat(m.Accuracy, 'g', 6, 64)
		if m.NoLoss {
			loss, acc = "", ""
		}
		_ = cw.Write([]string{m.Kind, strconv.Itoa(m.Epoch), strconv.Itoa(m.Step), strconv.FormatFloat(m.Seconds, 'f', 3, 64),
			loss, acc, feas, examples, skipped,
			strconv.FormatFloat(m.TrainSeconds, 'f', 3, 64)})
	}
	cw.Flush()
	return cw.Error()
}
