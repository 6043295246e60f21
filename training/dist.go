package training

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/orthonet/orthonet/internal/linalg"
	"github.com/orthonet/orthonet/optim"
)

// Data-parallel training (Config.Comm): every rank builds the same model
// from the same seed, reads the same global batches in the same order and
// trains on its rows [r B/N, (r+1) B/N) of each, its gradients the mean
// over them; optim's Solver (Options.Comm) sums what each step needs
// across the ranks before any weight moves (RSDM: its r x r matrices).
// Everything that decides what the run does next (the loss, a signal, the
// training clock, evaluations) is the same on every rank, so the ranks
// make the same calls in the same order; rank 0 alone writes files and
// prints.

// SharedError is an error that every rank meets at the same step with the
// same cause (a non-finite loss, a diverged test loss, a missed minimum
// accuracy): the ranks end alike, with no need to abort the others.
type SharedError struct{ Err error }

// Error returns the wrapped error's message.
func (e *SharedError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *SharedError) Unwrap() error { return e.Err }

// shared returns the SharedError of format and a.
func shared(format string, a ...any) error {
	return &SharedError{fmt.Errorf(format, a...)}
}

// SameOnEveryRank reports whether err is one that every rank of a
// data-parallel run returns together, so that each can leave the group
// normally; any other error is this rank's alone, and it should abort the
// group (dist.Communicator.Abort).
func SameOnEveryRank(err error) bool {
	var sh *SharedError
	var setting *SettingError
	var interrupted *InterruptedError
	return errors.As(err, &sh) || errors.As(err, &setting) || errors.As(err, &interrupted) ||
		errors.Is(err, optim.ErrNotFinite) || errors.Is(err, optim.ErrDiverged)
}

// maxSettings bounds the bytes of one rank's settings that agree receives.
const maxSettings = 1 << 20

// agreeSettings makes the ranks compare, before anything is loaded or
// written, every setting but those of perRank, the point a resumed run
// goes on from and this build's BLAS. A difference is a SettingError, on
// every rank alike, naming each setting and the ranks' values.
func (t *Trainer) agreeSettings() error {
	c := &t.c
	if c.ranks() == 1 {
		return nil
	}
	s := map[string]string{"BLAS": linalg.Backend(), "resume point": "none (a new run)", "batch": fmt.Sprint(c.Batch),
		"epochs": fmt.Sprint(c.Epochs), "seed": fmt.Sprint(c.Seed)}
	for name, v := range c.Settings {
		if !c.perRank(name) {
			s["-"+name] = v
		}
	}
	if t.resumed != nil {
		var st Progress
		if err := t.resumed.JSON(KeyProgress, &st); err == nil {
			s["resume point"] = fmt.Sprintf("step %d of run %s", st.Step, t.resumed.Meta["run.id"])
		} else {
			s["resume point"] = "a checkpoint without progress"
		}
	}
	return t.agree("settings", s)
}

// perRank reports whether setting name may differ between the ranks.
func (c *Config) perRank(name string) bool { return c.PerRank[name] }

// agreeData makes the ranks compare the data they loaded: the sets' sizes
// and SHA-256 (each rank trains on its rows of the same global batches,
// which must be the same examples).
func (t *Trainer) agreeData() error {
	if t.c.ranks() == 1 {
		return nil
	}
	d := t.dataID
	return t.agree("data", map[string]string{"data": fmt.Sprintf("%d training and %d test examples of %v, %d classes, SHA-256 %.16s", d.Train, d.Test, d.Shape, d.Classes, d.Digest)})
}

// agree compares s across the ranks (what names it in messages). Every
// collective call it makes has a size that does not depend on s: rank 0's
// SHA-256 of s goes to every rank, whose verdicts are summed; only where
// they differ does each rank in turn send the length of its s, then s
// itself, so that every rank can name the differences.
func (t *Trainer) agree(what string, s map[string]string) error {
	comm := t.c.Comm
	mine, err := json.Marshal(s) // sorted keys: equal maps, equal bytes
	if err != nil {
		return fmt.Errorf("comparing the ranks' %s: %w", what, err)
	}
	sum := sha256.Sum256(mine)
	root := sum
	if err := comm.BroadcastBytes(root[:], 0); err != nil {
		return fmt.Errorf("comparing the ranks' %s: %w", what, err)
	}
	differ := []float64{0}
	if root != sum {
		differ[0] = 1
	}
	if err := comm.AllReduceSum64(differ); err != nil {
		return fmt.Errorf("comparing the ranks' %s: %w", what, err)
	}
	if differ[0] == 0 {
		return nil
	}
	all := make([]map[string]string, t.c.ranks())
	for k := range all {
		n := []float64{float64(len(mine))}
		if err := comm.Broadcast64(n, k); err != nil {
			return fmt.Errorf("comparing the ranks' %s: %w", what, err)
		}
		if !(n[0] >= 0 && n[0] <= maxSettings) {
			return &SettingError{fmt.Errorf("-dist mpi: rank %d's %s take %v bytes, more than %d", k, what, n[0], maxSettings)}
		}
		b := make([]byte, int(n[0]))
		if k == t.c.rank() {
			copy(b, mine)
		}
		if err := comm.BroadcastBytes(b, k); err != nil {
			return fmt.Errorf("comparing the ranks' %s: %w", what, err)
		}
		if err := json.Unmarshal(b, &all[k]); err != nil {
			return &SettingError{fmt.Errorf("-dist mpi: rank %d's %s do not read: %v", k, what, err)}
		}
	}
	return &SettingError{t.differences(what, all)}
}

// differences names each setting whose value differs between the ranks,
// with each value and the ranks that hold it.
func (t *Trainer) differences(what string, all []map[string]string) error {
	names := map[string]bool{}
	for _, s := range all {
		for k := range s {
			names[k] = true
		}
	}
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(names)) {
		ranks := map[string][]string{} // value: the ranks that hold it
		var order []string
		for r, s := range all {
			v, ok := s[k]
			if !ok {
				v = "(no such setting: another build)"
			} else {
				v = fmt.Sprintf("%q", v)
			}
			if ranks[v] == nil {
				order = append(order, v)
			}
			ranks[v] = append(ranks[v], fmt.Sprint(r))
		}
		if len(order) == 1 {
			continue
		}
		var vals []string
		for _, v := range order {
			word := "rank"
			if len(ranks[v]) > 1 {
				word = "ranks"
			}
			vals = append(vals, fmt.Sprintf("%s on %s %s", v, word, strings.Join(ranks[v], ", ")))
		}
		diffs = append(diffs, fmt.Sprintf("%s is %s", k, strings.Join(vals, ", ")))
	}
	if len(diffs) == 0 { // equal maps hash alike: a hash collision, or a rank's JSON that changed on the way
		return errors.New("-dist mpi: the ranks' " + what + " hash differently but read alike")
	}
	if what == "data" {
		return fmt.Errorf("-dist mpi: the ranks' data differ, and every rank must train on the same images (from a -data folder of its own, if need be): %s", strings.Join(diffs, "; "))
	}
	var allowed []string
	for name := range t.c.PerRank {
		allowed = append(allowed, "-"+name)
	}
	slices.Sort(allowed)
	return fmt.Errorf("-dist mpi: the ranks' %s differ, and every rank must train alike (only %s may differ): %s",
		what, strings.Join(allowed, ", "), strings.Join(diffs, "; "))
}

// fromRank0 makes a refusal that rank 0 alone can see (a run folder that
// another process holds) every rank's: rank 0 sends whether err is a
// SettingError, and the other ranks return one too, which rank 0's message
// explains. Any other error of rank 0's is returned as it is (the caller
// then aborts the group).
func (t *Trainer) fromRank0(err error) error {
	c := &t.c
	if c.ranks() == 1 {
		return err
	}
	var setting *SettingError
	if c.rank() == 0 && err != nil && !errors.As(err, &setting) {
		return err
	}
	b := []byte{0}
	if err != nil {
		b[0] = 1
	}
	if berr := c.Comm.BroadcastBytes(b, 0); berr != nil {
		return errors.Join(err, fmt.Errorf("broadcast of rank 0's verdict: %w", berr))
	}
	if c.rank() == 0 || b[0] == 0 {
		return err
	}
	return &SettingError{errors.New("rank 0 refused the run (its message says why)")}
}

// anyRank reports whether stop is set on any rank, so that a signal one
// rank saw stops every rank at the same step.
func (t *Trainer) anyRank(stop bool) (bool, error) {
	if t.c.ranks() == 1 {
		return stop, nil
	}
	t.sync[0] = 0
	if stop {
		t.sync[0] = 1
	}
	if err := t.c.Comm.AllReduceSum64(t.sync[:1]); err != nil {
		return false, fmt.Errorf("all-reduce of the stop flag: %w", err)
	}
	return t.sync[0] > 0, nil
}

// batchMean returns the global batch's mean loss and accuracy from this
// rank's means over its shard (equal shards: the mean of the means).
func (t *Trainer) batchMean(lv, acc float64) (float64, float64, error) {
	n := t.c.ranks()
	if n == 1 {
		return lv, acc, nil
	}
	t.sync[0], t.sync[1] = lv, acc
	if err := t.c.Comm.AllReduceSum64(t.sync[:2]); err != nil {
		return 0, 0, fmt.Errorf("all-reduce of the loss: %w", err)
	}
	return t.sync[0] / float64(n), t.sync[1] / float64(n), nil
}

// syncCreated tells every rank whether rank 0 created the run folder in
// this session.
func (t *Trainer) syncCreated() error {
	if t.c.ranks() == 1 {
		return nil
	}
	b := []byte{0}
	if t.created {
		b[0] = 1
	}
	if err := t.c.Comm.BroadcastBytes(b, 0); err != nil {
		return fmt.Errorf("broadcast of the run folder: %w", err)
	}
	t.created = b[0] == 1
	return nil
}

// syncClock sets every rank's training clock to rank 0's, which TimeLimit
// and EvalInterval read: the ranks evaluate and stop at the same step.
func (t *Trainer) syncClock() error {
	if t.c.ranks() == 1 {
		return nil
	}
	t.sync[0] = t.st.TrainSeconds
	if err := t.c.Comm.Broadcast64(t.sync[:1], 0); err != nil {
		return fmt.Errorf("broadcast of the training clock: %w", err)
	}
	t.st.TrainSeconds = t.sync[0]
	return nil
}

// writes reports whether this rank writes the run's files and output.
func (t *Trainer) writes() bool { return t.c.rank() == 0 }

// trafficLine is the line a data-parallel run ends with: what each step
// all-reduced against a full-gradient all-reduce, and this session's
// samples per second of training time.
func (t *Trainer) trafficLine(w io.Writer) {
	if t.c.Comm == nil {
		return
	}
	tr := t.solver.Traffic()
	sent := tr.Constrained + tr.Plain + tr.Flags
	rate := 0.0
	if s := t.st.TrainSeconds - t.clock0; s > 0 {
		rate = float64(t.taken*t.c.Batch) / s
	}
	fmt.Fprintf(w, "data-parallel: %d ranks, each step all-reduced %d bytes (constrained %d, plain %d, flags %d) against %d for a full-gradient all-reduce (%.2fx less); %.1f samples/s\n",
		t.c.ranks(), sent, tr.Constrained, tr.Plain, tr.Flags, tr.FullGradient, float64(tr.FullGradient)/float64(max(sent, 1)), rate)
}
