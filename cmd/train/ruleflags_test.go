package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/optim"
)

// oldFlags is train's flags as `name type default`, listed from the
// command before the rules' flags came from optim.Rules (flag.UnquoteUsage's
// type, DefValue). A checkpoint stores every flag's value by name and a
// resumed run reparses them, so the names, types and defaults must stay.
const oldFlags = `batch int "16";channels int "64";clip-norm float "0";cpuprofile string "";data string "";` +
	`dataset string "fashion-mnist";decay-every int "1000";depth int "0";device string "auto";dim int "1024";` +
	`dist string "single";download  "false";dropout float "0.1";engine string "program";epochs int "1";` +
	`eval-every int "0";eval-interval duration "0s";eval-subset int "2000";heads int "4";hidden int "1024";` +
	`keep int "3";kernel-profile  "false";limit-test int "0";limit-train int "0";lr float "0.1";` +
	`lr-other float "0.05";max-memory string "auto";min-accuracy float "0";mlp int "256";model string "ffn";momentum float "0.9";` +
	`nonfinite string "stop";optim string "rsdm";other string "sgd";out string "checkpoints";patch int "4";` +
	`r int "300";resume string "";resume-other-data  "false";rgd-momentum float "0.9";sampling string "perm";save-every int "1000";` +
	`schedule string "cosine";seed uint "1";time-limit duration "0s";warmup int "500";weight-decay float "0";`

// TestRuleFlagsUnchanged checks that the flags defined from the rule
// table, with train's own, have the names, types and defaults train had
// before (and -resume-other-data and -max-memory, added since), and that each rule flag's usage names the rules that take it.
func TestRuleFlagsUnchanged(t *testing.T) {
	_, fs, err := parseArgs(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		name, _ := flag.UnquoteUsage(f)
		fmt.Fprintf(&got, "%s %s %q;", f.Name, name, f.DefValue)
	})
	if got.String() != oldFlags {
		t.Errorf("train's flags are now\n%s\nwant\n%s", strings.ReplaceAll(got.String(), ";", "\n"), strings.ReplaceAll(oldFlags, ";", "\n"))
	}
	for name, rules := range map[string]string{"r": "rsdm", "sampling": "rsdm", "rgd-momentum": "rgd", "momentum": "sgd"} {
		if u := fs.Lookup(name).Usage; !strings.Contains(u, "(rules: "+rules+")") {
			t.Errorf("-%s: usage %q does not name its rules %s", name, u, rules)
		}
	}
}

// TestRuleFlagValues checks the rules parseArgs builds from the flags: the
// values reach the rule's settings, -seed (train's own flag) seeds RSDM,
// and a value out of range is refused naming the flag.
func TestRuleFlagValues(t *testing.T) {
	var samplers []string // the names -sampling's message lists, from the table
	for _, s := range optim.Samplers {
		samplers = append(samplers, s.String())
	}
	for _, tc := range []struct {
		args       []string
		rule, want string
	}{
		{[]string{"-r", "8", "-sampling", "blocks", "-seed", "5"}, "", "optim.RSDMConfig{LR:0, SubmanifoldSize:8, Sampling:optim.blocks{}, Retraction:0, Momentum:0, InnerSteps:0, Seed:0x5, ReorthEvery:0}"},
		{[]string{"-optim", "rgd", "-rgd-momentum", "0.25"}, "", "optim.RGDConfig{LR:0, Momentum:0.25}"},
		{[]string{"-momentum", "0.5"}, "other", "optim.SGDConfig{LR:0, Momentum:0.5}"},
		{[]string{"-rgd-momentum", "0.5"}, "", "optim.RSDMConfig{LR:0, SubmanifoldSize:300, Sampling:optim.permutation{}, Retraction:0, Momentum:0, InnerSteps:0, Seed:0x1, ReorthEvery:0}"},
		{[]string{"-optim", "rgd", "-rgd-momentum", "1"}, "error", "-rgd-momentum 1: momentum 1, want 0 <= momentum < 1"},
		{[]string{"-sampling", "sobol"}, "error", "-sampling sobol: unknown sampler, want one of " + strings.Join(samplers, ", ")},
		{[]string{"-r", "1"}, "error", "-r 1: RSDM's submanifold size must be at least 2"},
	} {
		c, err := parseFlags(tc.args, io.Discard)
		var got string
		switch {
		case tc.rule == "error":
			got = fmt.Sprint(err)
		case err != nil:
			t.Errorf("%q: %v", tc.args, err)
			continue
		case tc.rule == "other":
			got = fmt.Sprintf("%#v", c.otherRule)
		default:
			got = fmt.Sprintf("%#v", c.rule)
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("%q: %s, want %s", tc.args, got, tc.want)
		}
	}
}
