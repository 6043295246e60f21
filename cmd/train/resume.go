package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/orthonet/orthonet/checkpoint"
)

// Resuming: -resume names a checkpoint, whose saved flags become the run's
// (but those a resumed run may change), and whose run folder the run goes
// on in where it is that run's newest checkpoint.

// parseFlags parses and checks the command line. With -resume it reads the
// checkpoint and returns the configuration saved in it, with the flags of
// resumable (changeable) flags given on the command line applied; any other
// flag that differs from the saved one is an error.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	c, fs, err := parseArgs(args, stderr)
	if err != nil {
		return c, err
	}
	if c.resume == "" {
		return c, checkApplicable(c, fs)
	}
	path, err := resolveResume(c.resume, c.out)
	if err != nil {
		return c, err
	}
	f, err := readResumed(path, c.resume)
	if err != nil {
		return c, err
	}
	merged, err := mergeSaved(path, f, fs)
	if err != nil {
		return c, err
	}
	rc, _, err := parseArgs(merged, stderr)
	if err != nil {
		return c, fmt.Errorf("-resume %s: the saved configuration: %w", path, err)
	}
	rc.resume, rc.resumed, rc.resumeNewest = path, f, path != c.resume
	return rc, nil
}

// readResumed reads the checkpoint at path, which -resume arg named; one
// that does not load is an error naming the checkpoints of its run that do.
func readResumed(path, arg string) (*checkpoint.File, error) {
	f, err := checkpoint.Read(path)
	if err == nil {
		return f, nil
	}
	err = fmt.Errorf("-resume: %w", err)
	if others := checkpoint.OthersThatLoad(path); len(others) > 0 {
		return nil, fmt.Errorf("%w; these checkpoints of its run load, newest first (go on from one with -resume PATH): %s", err, savedList(others))
	} else if path != arg {
		return nil, fmt.Errorf("%w; no other checkpoint of its run loads", err)
	}
	return nil, err
}

// mergeSaved returns the command line of a run resumed from f (at path):
// the flags f saved, but -device and those of the command line fs that a
// resumed run may change; any other flag of fs that differs from the saved
// one is an error.
func mergeSaved(path string, f *checkpoint.File, fs *flag.FlagSet) ([]string, error) {
	var saved map[string]string
	if err := f.JSON(keyFlags, &saved); err != nil {
		return nil, fmt.Errorf("-resume %s: not a checkpoint of cmd/train: %w", path, err)
	}
	names := make([]string, 0, len(saved))
	for name := range saved {
		names = append(names, name)
	}
	sort.Strings(names)
	if _, ok := saved["rgd-momentum"]; !ok && saved["momentum"] != "" {
		// Checkpoints from before -rgd-momentum: -momentum set RGD's too.
		saved["rgd-momentum"] = saved["momentum"]
		names = append(names, "rgd-momentum")
	}
	var merged []string
	for _, name := range names {
		if fs.Lookup(name) == nil || name == "resume" {
			return nil, fmt.Errorf("-resume %s: the checkpoint sets flag -%s, which this build does not have", path, name)
		}
		if name == "device" { // the machine's, not the run's: this command line's (auto by default)
			continue
		}
		merged = append(merged, "-"+name+"="+saved[name])
	}
	var conflict error
	fs.Visit(func(fl *flag.Flag) {
		switch {
		case fl.Name == "resume":
		case resumable[fl.Name]:
			merged = append(merged, "-"+fl.Name+"="+fl.Value.String())
		case fl.Value.String() != saved[fl.Name] && conflict == nil:
			conflict = fmt.Errorf("-%s %s differs from the checkpoint's %q: a resumed run keeps its configuration (it may change only %s)",
				fl.Name, fl.Value, saved[fl.Name], resumableList())
		}
	})
	return merged, conflict
}

// resolveResume turns -resume's value into a checkpoint file: a file as it
// is, a run folder's newest checkpoint (checkpoint.NewestIn), or for
// "latest" the newest checkpoint of the run folder under out that saved
// last (checkpoint.LatestUnder). A newest checkpoint that is damaged (or
// another file put in its place) is an error naming it and the run's
// checkpoints that load: going on from an older one silently would drop
// the steps after it.
func resolveResume(arg, out string) (string, error) {
	if arg == "latest" {
		path, bad, err := checkpoint.LatestUnder(out)
		switch {
		case errors.Is(err, filepath.ErrBadPattern):
			return "", fmt.Errorf("-resume latest: %w", err)
		case err != nil:
			return "", fmt.Errorf("-resume: %w", err)
		case path == "":
			return "", fmt.Errorf("-resume latest: no checkpoint under %s (looked for %s)", out, filepath.Join(out, checkpoint.RunPrefix+"*", "step-*.safetensors"))
		case bad != nil:
			return "", damagedNewest("latest", path, bad)
		}
		return path, nil
	}
	fi, err := os.Stat(arg)
	if err != nil {
		return "", fmt.Errorf("-resume: %w", err)
	}
	if !fi.IsDir() {
		return arg, nil
	}
	path, bad, err := checkpoint.NewestIn(arg)
	switch {
	case err != nil:
		return "", fmt.Errorf("-resume: %w", err)
	case path == "":
		return "", fmt.Errorf("-resume %s: the folder holds no step-*.safetensors checkpoint", arg)
	case bad != nil:
		return "", damagedNewest(arg, path, bad)
	}
	return path, nil
}

// damagedNewest is resolveResume's error for a run whose newest checkpoint
// path is not the run's (bad says why), with the run's checkpoints that
// load.
func damagedNewest(arg, path string, bad error) error {
	err := fmt.Errorf("-resume %s: the newest checkpoint of run %s does not load: %w", arg, filepath.Dir(path), bad)
	if others := checkpoint.OthersThatLoad(path); len(others) > 0 {
		return fmt.Errorf("%w; these checkpoints of its run load, newest first (go on from one with -resume PATH, in a new run folder): %s", err, savedList(others))
	}
	return fmt.Errorf("%w; no other checkpoint of its run loads", err)
}

// savedList lists checkpoints as "PATH (step N)", comma-separated.
func savedList(saved []checkpoint.Saved) string {
	var s []string
	for _, c := range saved {
		s = append(s, fmt.Sprintf("%s (step %d)", c.Path, c.Step))
	}
	return strings.Join(s, ", ")
}

// resumeFolder settles, before a resumed run loads anything, where it
// writes (checkpoint.OpenRunOf): the newest checkpoint of a run goes on in
// that run's folder, whose lock it returns in held, and a folder that
// another process holds is a usage error naming that process; any other
// checkpoint goes on in a new run folder, for the reason why, its own
// folder neither locked nor touched. A finished run (nothing to train)
// writes nothing and holds nothing.
func resumeFolder(c config) (held *checkpoint.Run, why string, err error) {
	var st progress
	if err := c.resumed.JSON(keyProgress, &st); err != nil || st.Epoch >= c.epochs {
		return nil, "", nil // restore says what is wrong; a finished run writes nothing
	}
	held, why, err = checkpoint.OpenRunOf(c.resume, st.Step, c.resumeNewest)
	if err != nil {
		return nil, "", &usageError{fmt.Errorf("-resume %s: %w", c.resume, err)}
	}
	return held, why, nil
}

// resumeRun returns the run folder a resumed run writes to: held, the
// folder of the run whose newest checkpoint it goes on from, or else a new
// run folder under -out that records the checkpoint as its parent and
// carries its metrics (why: resumeFolder's reason). created reports
// whether the folder is new.
func resumeRun(c config, held *checkpoint.Run, why string, step int, w io.Writer) (r *checkpoint.Run, created bool, err error) {
	if held != nil {
		return held, false, nil
	}
	r, err = checkpoint.CreateRunIn(c.out, &checkpoint.Origin{Path: c.resume, Step: step, Run: c.resumed.Meta[checkpoint.KeyRun]})
	if err != nil {
		return nil, false, err
	}
	fmt.Fprintf(w, "%s is not the newest checkpoint of its run (%s): going on in a new run folder %s, leaving %s as it is\n", c.resume, why, r.Dir(), filepath.Dir(c.resume))
	return r, true, nil
}
