package main

import (
	"flag"
	"fmt"
	"io"
	"sort"

	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/training"
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
	path, err := training.ResolveResume(c.resume, c.out)
	if err != nil {
		return c, err
	}
	f, err := training.ReadResume(path, c.resume)
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
	rc.resume, rc.resumed, rc.resumeArg = path, f, c.resume
	return rc, nil
}

// mergeSaved returns the command line of a run resumed from f (at path):
// the flags f saved, but -device and those of the command line fs that a
// resumed run may change; any other flag of fs that differs from the saved
// one is an error.
func mergeSaved(path string, f *checkpoint.File, fs *flag.FlagSet) ([]string, error) {
	saved, err := training.SavedSettings(f)
	if err != nil {
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
		if name == "device" || unsaved[name] { // the machine's, not the run's: this command line's (auto by default)
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
