package main

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/data"
)

// perRank names the flags whose values may differ between the ranks of a
// data-parallel run, and why: each is a place on the rank's own machine or
// what the rank alone prints or writes. Every other flag (this build's
// whole flag set, so that a new flag is compared unless it is added here)
// decides the steps, the collective calls or their sizes, and must agree.
var perRank = map[string]string{
	"data":           "the data set's folder on the rank's machine (the data itself is compared)",
	"download":       "whether the rank fetches the files into its -data first (the data itself is compared)",
	"out":            "rank 0 alone writes the run folder",
	"cpuprofile":     "each rank's own profile file",
	"device":         "-dist mpi trains on the CPU whatever it says",
	"kernel-profile": "what the rank measures of its own kernels (rank 0 alone prints)",
}

// maxSettings bounds the bytes of one rank's settings that agree receives
// (flags and short descriptions: a few KiB).
const maxSettings = 1 << 20

// agreeSettings makes the ranks of a data-parallel run compare, before
// anything is loaded or written, every flag but those of perRank, the
// point a resumed run goes on from and this build's BLAS. A difference is
// a usage error, on every rank alike, naming each setting and the ranks'
// values.
func agreeSettings(c config) error {
	if c.ranks() == 1 {
		return nil
	}
	s := map[string]string{"BLAS": blasName, "resume point": "none (a new run)"}
	for name, v := range c.flags {
		if _, ok := perRank[name]; !ok {
			s["-"+name] = v
		}
	}
	if c.resumed != nil {
		var st progress
		if err := c.resumed.JSON(keyProgress, &st); err == nil {
			s["resume point"] = fmt.Sprintf("step %d of run %s", st.Step, c.resumed.Meta[checkpoint.KeyRun])
		} else {
			s["resume point"] = "a checkpoint without progress"
		}
	}
	return agree(c, "settings", s)
}

// agreeData makes the ranks compare the data they loaded: the sets' sizes
// and a SHA-256 of their pixels and labels (each rank trains on its rows
// of the same global batches, which must be the same images).
func agreeData(c config, train, test *data.Set) error {
	if c.ranks() == 1 {
		return nil
	}
	digest := func(s *data.Set) string {
		h := sha256.New()
		buf := make([]byte, 0, 1<<16)
		for i, x := range s.X {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(x))
			if len(buf) == cap(buf) || i == len(s.X)-1 {
				h.Write(buf)
				buf = buf[:0]
			}
		}
		h.Write(s.Y)
		return fmt.Sprintf("%d images of %dx%dx%d, %d classes, SHA-256 %x", s.N, s.C, s.H, s.W, s.Classes, h.Sum(nil)[:8])
	}
	return agree(c, "data", map[string]string{"training set": digest(train), "test set": digest(test)})
}

// agree compares s across the ranks (what names it in messages). Every
// collective call it makes has a size that does not depend on s: rank 0's
// SHA-256 of s (32 bytes) goes to every rank, whose verdicts are summed;
// only where they differ does each rank in turn send the length of its s
// (one number), then s itself into buffers of that length, so that every
// rank can name the differences.
func agree(c config, what string, s map[string]string) error {
	mine, err := json.Marshal(s) // sorted keys: equal maps, equal bytes
	if err != nil {
		return fmt.Errorf("comparing the ranks' %s: %w", what, err)
	}
	sum := sha256.Sum256(mine)
	root := sum
	if err := c.comm.BroadcastBytes(root[:], 0); err != nil {
		return fmt.Errorf("comparing the ranks' %s: %w", what, err)
	}
	differ := []float64{0}
	if root != sum {
		differ[0] = 1
	}
	if err := c.comm.AllReduceSum64(differ); err != nil {
		return fmt.Errorf("comparing the ranks' %s: %w", what, err)
	}
	if differ[0] == 0 {
		return nil
	}
	all := make([]map[string]string, c.ranks())
	for k := range all {
		n := []float64{float64(len(mine))}
		if err := c.comm.Broadcast64(n, k); err != nil {
			return fmt.Errorf("comparing the ranks' %s: %w", what, err)
		}
		if !(n[0] >= 0 && n[0] <= maxSettings) {
			return &usageError{fmt.Errorf("-dist mpi: rank %d's %s take %v bytes, more than %d", k, what, n[0], maxSettings)}
		}
		b := make([]byte, int(n[0]))
		if k == c.rank() {
			copy(b, mine)
		}
		if err := c.comm.BroadcastBytes(b, k); err != nil {
			return fmt.Errorf("comparing the ranks' %s: %w", what, err)
		}
		if err := json.Unmarshal(b, &all[k]); err != nil {
			return &usageError{fmt.Errorf("-dist mpi: rank %d's %s do not read: %v", k, what, err)}
		}
	}
	return &usageError{differences(what, all)}
}

// differences names each setting whose value differs between the ranks,
// with each value and the ranks that hold it.
func differences(what string, all []map[string]string) error {
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
	for name := range perRank {
		allowed = append(allowed, "-"+name)
	}
	slices.Sort(allowed)
	return fmt.Errorf("-dist mpi: the ranks' %s differ, and every rank must train alike (only %s may differ): %s",
		what, strings.Join(allowed, ", "), strings.Join(diffs, "; "))
}

// fromRank0 makes a refusal that rank 0 alone can see (a run folder that
// another process holds) every rank's: rank 0 sends whether err is a
// usage error, and the other ranks return one too, which rank 0's message
// explains. Any other error of rank 0's is returned as it is (the command
// then aborts the group).
func fromRank0(c config, err error) error {
	if c.ranks() == 1 {
		return err
	}
	var usage *usageError
	if c.rank() == 0 && err != nil && !errors.As(err, &usage) {
		return err
	}
	b := []byte{0}
	if err != nil {
		b[0] = 1
	}
	if berr := c.comm.BroadcastBytes(b, 0); berr != nil {
		return errors.Join(err, fmt.Errorf("broadcast of rank 0's verdict: %w", berr))
	}
	if c.rank() == 0 || b[0] == 0 {
		return err
	}
	return &usageError{errors.New("rank 0 refused the run (its message says why)")}
}
