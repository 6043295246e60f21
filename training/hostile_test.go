package training

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/data"
	"github.com/orthonet/orthonet/optim"
)

// faulty serves a Set but, from example bad on, a label out of range, an
// error, or a panic-free wrong answer as asked.
type faulty struct {
	*data.Set
	bad   int
	label int
	err   error
}

func (f *faulty) Example(i int, x []float32) (int, error) {
	y, err := f.Set.Example(i, x)
	if i != f.bad {
		return y, err
	}
	if f.err != nil {
		return 0, f.err
	}
	return f.label, nil
}

// TestHostileRuns checks that a data set or callback that fails mid-run
// ends the run with an error naming the fault, and that the newest
// checkpoint written before still loads.
func TestHostileRuns(t *testing.T) {
	train, test := blobs(96, 12, 4, 2), blobs(24, 12, 4, 2)
	for _, tc := range []struct {
		name string
		set  func(c *Config)
		want string
	}{
		{"label out of range", func(c *Config) { c.Train = &faulty{Set: train, bad: 50, label: 9} }, "label 9"},
		{"negative label", func(c *Config) { c.Train = &faulty{Set: train, bad: 50, label: -1} }, "label -1"},
		{"example error", func(c *Config) { c.Train = &faulty{Set: train, bad: 50, err: errors.New("disk gone")} }, "disk gone"},
		{"test example error", func(c *Config) { c.Test = &faulty{Set: test, bad: 3, err: errors.New("bad test file")} }, "bad test file"},
		{"callback error", func(c *Config) {
			c.Callbacks.OnStep = func(s StepInfo) error {
				if s.Step == 9 {
					return errors.New("stop here")
				}
				return nil
			}
		}, "callback OnStep: stop here"},
		{"callback panic", func(c *Config) {
			c.Callbacks.OnEval = func(e Eval) error {
				if e.Step == 10 {
					panic("boom")
				}
				return nil
			}
		}, "callback OnEval panicked: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			c := smallConfig(out, train, test)
			c.SaveEvery = 4
			tc.set(&c)
			_, err := Run(context.Background(), classifier(t, 8, 12, 16, 4), c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
			if path, bad, err := checkpoint.LatestUnder(out); path != "" && (bad != nil || err != nil) {
				t.Errorf("newest checkpoint %s after the failure: %v %v", path, bad, err)
			}
		})
	}
}

// TestRefusals checks settings and models that cannot train: each is an
// error naming the fault, before anything is written.
func TestRefusals(t *testing.T) {
	train, test := blobs(96, 12, 4, 2), blobs(24, 12, 4, 2)
	for _, tc := range []struct {
		name  string
		model func(m *Model)
		set   func(c *Config)
		want  string
	}{
		{"no train set", nil, func(c *Config) { c.Train = nil }, "Config.Train is nil"},
		{"batch 0", nil, func(c *Config) { c.Batch = 0 }, "batch 0"},
		{"negative threads", nil, func(c *Config) { c.Threads = -1 }, "Threads -1"},
		{"bad device", nil, func(c *Config) { c.Device = "tpu" }, `device "tpu"`},
		{"tape on cuda", nil, func(c *Config) { c.Engine, c.Device = "tape", "cuda" }, "tape engine runs on the CPU"},
		{"wrong example size", nil, func(c *Config) { c.Train = blobs(96, 10, 4, 2); c.Test = nil }, "takes 96 values"},
		{"test shape", nil, func(c *Config) { c.Test = blobs(24, 10, 4, 2) }, "test examples of shape"},
		{"no loss", func(m *Model) { m.Loss = nil }, nil, "Model.Loss is nil"},
		{"no params", func(m *Model) { m.Params = nil }, nil, "Model.Params is empty"},
		{"r too big", nil, func(c *Config) { c.Groups[0].Rule = optim.RSDMConfig{SubmanifoldSize: 40} }, "-r 40"},
		{"fewer examples than a batch", nil, func(c *Config) { c.Train = blobs(4, 12, 4, 2); c.Batch = 8 }, "fewer than one batch"},
		{"program over memory", nil, func(c *Config) { c.MaxBytes = 2000 }, `more than the 2.0 kB available (Config.MaxBytes); the largest:`},
		{"tape over memory", nil, func(c *Config) { c.MaxBytes, c.Engine = 2000, "tape" }, `tape machine's values of the training graph take about`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			c := smallConfig(out, train, test)
			if tc.set != nil {
				tc.set(&c)
			}
			m := classifier(t, 8, 12, 16, 4)
			if tc.model != nil {
				tc.model(&m)
			}
			_, err := Run(context.Background(), m, c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
			if c.MaxBytes != 0 && (!errors.Is(err, ErrMemory) || !errors.As(err, new(*SettingError))) {
				t.Errorf("error %v: want a SettingError wrapping ErrMemory", err)
			}
			if path, _, _ := checkpoint.LatestUnder(out); path != "" {
				t.Errorf("a refused run wrote %s", path)
			}
		})
	}
}

// TestResumeRefusesOtherData trains, then resumes with data of the same
// sizes but other labels, and with another setting: both refused, naming
// why, with SettingError (a command's exit 2).
func TestResumeRefusesOtherData(t *testing.T) {
	train, test := blobs(96, 12, 4, 2), blobs(24, 12, 4, 2)
	out := t.TempDir()
	c := smallConfig(out, train, test)
	c.Epochs = 1
	c.Settings = map[string]string{"lr": "0.2"}
	if _, err := Run(context.Background(), classifier(t, 8, 12, 16, 4), c); err != nil {
		t.Fatal(err)
	}
	other := blobs(96, 12, 4, 2)
	copy(other.Y, other.Y[1:]) // the same images, labels shifted
	for _, tc := range []struct {
		name string
		set  func(c *Config)
		want string
	}{
		{"other labels", func(c *Config) { c.Train = other }, "other data of the same sizes"},
		{"other size", func(c *Config) { c.Train = blobs(88, 12, 4, 2) }, "was trained on 96/24"},
		{"other setting", func(c *Config) { c.Settings = map[string]string{"lr": "0.3"} }, `setting lr is "0.3"`},
		{"other size, allowed", func(c *Config) { c.Train, c.AllowOtherData = blobs(88, 12, 4, 2), true }, "was trained on 96/24"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := smallConfig(out, train, test)
			rc.Epochs, rc.Resume, rc.Settings = 2, "latest", c.Settings
			tc.set(&rc)
			_, err := Run(context.Background(), classifier(t, 8, 12, 16, 4), rc)
			var se *SettingError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.want) || ExitCode(err) != 2 {
				t.Fatalf("error %v, want a SettingError naming %q", err, tc.want)
			}
		})
	}
}

// TestResumeAllowOtherData resumes on data of the same sizes but other
// labels with AllowOtherData: the run goes on, and its progress records
// the change.
func TestResumeAllowOtherData(t *testing.T) {
	train, test := blobs(96, 12, 4, 2), blobs(24, 12, 4, 2)
	out := t.TempDir()
	c := smallConfig(out, train, test)
	c.Epochs = 1
	if _, err := Run(context.Background(), classifier(t, 8, 12, 16, 4), c); err != nil {
		t.Fatal(err)
	}
	other := blobs(96, 12, 4, 2)
	copy(other.Y, other.Y[1:])
	rc := smallConfig(out, other, test)
	rc.Epochs, rc.Resume, rc.AllowOtherData = 2, "latest", true
	var log strings.Builder
	rc.Log = &log
	tr, _ := fit(t, classifier(t, 8, 12, 16, 4), rc)
	if ch := tr.Progress().DataChanges; len(ch) != 1 || !strings.Contains(ch[0], "step 12: resumed on other data") || !strings.Contains(log.String(), "warning:") {
		t.Errorf("data changes %q, log %q: want the resume at step 12 recorded and warned of", ch, log.String())
	}
}
