package training

import (
	"bytes"
	"strings"
	"testing"
)

// TestFlagSetExits checks the exit status of each way parsing ends, what
// the flag set prints on stderr, and that the parsed values reach Flags.
func TestFlagSetExits(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		ok     bool
		code   int    // where !ok
		stderr string // a part of what is printed
	}{
		{args: []string{"-lr", "0.5", "-device", "cpu"}, ok: true},
		{args: []string{"-h"}, code: 0, stderr: "mytrain trains.\n"},
		{args: []string{"-lr", "fast"}, code: 2, stderr: `invalid value "fast" for flag -lr`},
		{args: []string{"-bogus"}, code: 2, stderr: "flag provided but not defined: -bogus"},
	} {
		var stderr bytes.Buffer
		f := Flags{LR: 0.2, Device: "auto"}
		err := f.FlagSet("mytrain", "mytrain trains.", &stderr).Parse(tc.args)
		switch {
		case tc.ok && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.ok && (f.LR != 0.5 || f.Device != "cpu"):
			t.Errorf("%q: parsed -lr %g -device %s", tc.args, f.LR, f.Device)
		case !tc.ok && (err == nil || ParseExitCode(err) != tc.code):
			t.Errorf("%q: error %v, want exit status %d", tc.args, err, tc.code)
		}
		if !strings.Contains(stderr.String(), tc.stderr) || (tc.code == 0 && !tc.ok && !strings.Contains(stderr.String(), "-lr-other")) {
			t.Errorf("%q: stderr %q, want it to say %q (and list the flags after -h)", tc.args, stderr.String(), tc.stderr)
		}
	}
}
