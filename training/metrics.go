package training

import (
	"encoding/csv"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
)

// Row is one row of metrics.csv: a window of training steps or an
// evaluation on the test set.
type Row struct {
	Kind        string   `json:"kind"` // train or test
	Epoch       int      `json:"epoch"`
	Step        int      `json:"step"`
	Seconds     float64  `json:"seconds"`
	Loss        float64  `json:"loss"`
	Accuracy    float64  `json:"accuracy"`
	Feasibility *float64 `json:"feasibility,omitempty"` // largest ||W^T W - I||_F where measured (test rows)
	Examples    int      `json:"examples,omitempty"`    // test examples evaluated (test rows)
	Skipped     int      `json:"skipped,omitempty"`     // batches skipped for a non-finite loss or gradient (train rows)
	// NoLoss marks a training row whose batches were all skipped: it has no
	// loss or accuracy (empty in metrics.csv).
	NoLoss bool `json:"no_loss,omitempty"`
	// TrainSeconds is the training time so far: Seconds without the
	// evaluations and checkpoints (TimeLimit and EvalInterval count it).
	TrainSeconds float64 `json:"train_seconds"`
	// Extra holds Config.Metrics' values (test rows).
	Extra map[string]float64 `json:"extra,omitempty"`
}

// eval returns a test row as an Eval.
func (m Row) eval() Eval {
	e := Eval{Epoch: m.Epoch, Step: m.Step, Loss: m.Loss, Accuracy: m.Accuracy, Examples: m.Examples, Metrics: m.Extra}
	if m.Feasibility != nil {
		e.Feasibility = *m.Feasibility
	}
	return e
}

// Window accumulates training loss and accuracy between two rows.
type Window struct {
	Loss     float64 `json:"loss"`
	Accuracy float64 `json:"accuracy"`
	Count    int     `json:"count"`
	Skipped  int     `json:"skipped,omitempty"`
}

// tally adds a step to the training window and, every logEvery steps,
// writes the window's means as a training row of the metrics and shows
// them.
func (t *Trainer) tally(epoch int, lv, acc float64, bad error) {
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
	due := t.st.Step%t.logEvery == 0 || (win.Skipped > 0 && (t.st.Batch == t.steps || t.st.SkipRun >= MaxSkipRun))
	if !due || win.Count+win.Skipped == 0 {
		return
	}
	m := Row{Kind: "train", Epoch: epoch + 1, Step: t.st.Step, Seconds: t.seconds(), Skipped: win.Skipped, TrainSeconds: t.st.TrainSeconds}
	if win.Count == 0 {
		m.NoLoss = true // every batch of the row was skipped
		t.st.Metrics = append(t.st.Metrics, m)
		*win = Window{}
		return
	}
	m.Loss, m.Accuracy = win.Loss/float64(win.Count), win.Accuracy/float64(win.Count)
	t.st.Metrics = append(t.st.Metrics, m)
	t.showProgress(epoch, *win)
	*win = Window{}
}

// writeOutputs writes metrics.csv and metrics.png into the run folder,
// each replaced atomically; a failure is a warning. Without a run folder
// (the ranks but 0 of data-parallel training) it writes nothing.
func (t *Trainer) writeOutputs() {
	run, w := t.dir, t.c.Log
	if run == nil {
		return
	}
	if err := run.WriteFile("metrics.csv", func(f io.Writer) error { return WriteCSV(f, t.st.Metrics) }); err != nil {
		fmt.Fprintln(w, "warning: writing metrics:", err)
	}
	if err := run.WriteFile("metrics.png", func(f io.Writer) error { return PlotMetrics(f, t.st.Metrics) }); err != nil {
		fmt.Fprintln(w, "warning: plotting metrics:", err)
	}
	fmt.Fprintf(w, "metrics: %s, %s\n", filepath.Join(run.Dir(), "metrics.csv"), filepath.Join(run.Dir(), "metrics.png"))
}

// WriteCSV writes rows as metrics.csv: kind, epoch, step, seconds, loss,
// accuracy, max_feasibility (empty where not measured), test_examples,
// skipped, train_seconds, then one column for each metric of one's own.
func WriteCSV(f io.Writer, rows []Row) error {
	extra := map[string]bool{}
	for _, m := range rows {
		for k := range m.Extra {
			extra[k] = true
		}
	}
	names := slices.Sorted(maps.Keys(extra))
	cw := csv.NewWriter(f)
	_ = cw.Write(append([]string{"kind", "epoch", "step", "seconds", "loss", "accuracy", "max_feasibility", "test_examples", "skipped", "train_seconds"}, names...))
	for _, m := range rows {
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
		rec := []string{m.Kind, strconv.Itoa(m.Epoch), strconv.Itoa(m.Step), strconv.FormatFloat(m.Seconds, 'f', 3, 64),
			loss, acc, feas, examples, skipped, strconv.FormatFloat(m.TrainSeconds, 'f', 3, 64)}
		for _, k := range names {
			v, ok := m.Extra[k]
			if ok {
				rec = append(rec, strconv.FormatFloat(v, 'g', 6, 64))
			} else {
				rec = append(rec, "")
			}
		}
		_ = cw.Write(rec)
	}
	cw.Flush()
	return cw.Error()
}
