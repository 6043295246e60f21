package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/optim/optflag"
)

// TestFlagTable checks the flag table from which parseArgs, resumable and
// checkApplicable are derived: every flag is defined once, and every
// condition of when a flag applies reads a flag of fixed choices and
// names some of them. For each flag with a condition, parseFlags refuses it
// (at its default value) where a choice fails the condition, naming the
// flag and that choice, and takes it where the condition holds.
func TestFlagTable(t *testing.T) {
	table := flagTable(new(config))
	_, fs, err := parseArgs(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]flagDef{}
	for _, d := range table {
		if _, dup := byName[d.name]; dup {
			t.Errorf("-%s is in the table twice", d.name)
		}
		byName[d.name] = d
	}
	for _, d := range table {
		k := d.when
		if k == nil {
			continue
		}
		on, ok := byName[k.on]
		if !ok || len(k.in) == 0 || slices.ContainsFunc(k.in, func(v string) bool { return !slices.Contains(on.choices, v) }) || k.or != nil {
			t.Errorf("-%s applies when -%s is one of %q (or %v), not all of which are its choices %v", d.name, k.on, k.in, k.or, on.choices)
			continue
		}
		given := "-" + d.name + "=" + fs.Lookup(d.name).DefValue
		for _, v := range on.choices {
			_, err := parseFlags([]string{"-" + k.on + "=" + v, given}, io.Discard)
			if holds := k.holds(v); holds && err != nil {
				t.Errorf("%s with -%s %s: %v, want it taken", given, k.on, v, err)
			} else if want := "-" + d.name + " does not apply: -" + k.on + " " + v + " "; !holds && (err == nil || !strings.HasPrefix(err.Error(), want)) {
				t.Errorf("%s with -%s %s: %v, want an error starting %q", given, k.on, v, err, want)
			}
		}
	}
}

// TestModelDefaults checks the models' own defaults: the CNN's r, -lr,
// -other and -lr-other, and the RNN's -hidden 128, r the hidden size (at
// most 300) and Adam at 0.003 on the plain parameters, taken where the
// command line leaves a flag unset and the optimizers use it, never over a
// value given, and recorded as given so that a resumed run keeps them.
func TestModelDefaults(t *testing.T) {
	for _, c := range []struct {
		args        []string
		hidden, r   int
		lr, lrOther float64
		other       string
	}{
		{[]string{"-model", "cnn"}, 1024, defaultCNNChannels, defaultCNNLR, defaultCNNAdamLR, defaultCNNOther},
		{[]string{"-model", "cnn", "-channels", "16"}, 1024, 16, defaultCNNLR, defaultCNNAdamLR, defaultCNNOther},
		{[]string{"-model", "cnn", "-dataset", "cifar10", "-channels", "8"}, 1024, 27, defaultCNNLR, defaultCNNAdamLR, defaultCNNOther},
		{[]string{"-model", "cnn", "-optim", "rgd"}, 1024, defaultCNNChannels, defaultCNNLR, defaultCNNAdamLR, defaultCNNOther},
		{[]string{"-model", "cnn", "-optim", "radam"}, 1024, defaultCNNChannels, 0.1, defaultCNNAdamLR, defaultCNNOther},
		{[]string{"-model", "cnn", "-other", "sgd"}, 1024, defaultCNNChannels, defaultCNNLR, 0.05, "sgd"},
		{[]string{"-model", "cnn", "-r", "20", "-lr", "0.2", "-lr-other", "0.01"}, 1024, 20, 0.2, 0.01, defaultCNNOther},
		{[]string{"-model", "rnn"}, defaultRNNHidden, defaultRNNHidden, 0.1, defaultRNNAdamLR, defaultRNNOther},
		{[]string{"-model", "rnn", "-hidden", "64"}, 64, 64, 0.1, defaultRNNAdamLR, defaultRNNOther},
		{[]string{"-model", "rnn", "-hidden", "512"}, 512, 300, 0.1, defaultRNNAdamLR, defaultRNNOther},
		{[]string{"-model", "rnn", "-r", "16"}, defaultRNNHidden, 16, 0.1, defaultRNNAdamLR, defaultRNNOther},
		{[]string{"-model", "ffn"}, 1024, 300, 0.1, 0.05, "sgd"},
	} {
		cfg, _, err := parseArgs(c.args, io.Discard)
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
			continue
		}
		if cfg.hidden != c.hidden || cfg.r != c.r || cfg.lr != c.lr || cfg.lrOther != c.lrOther || cfg.other != c.other {
			t.Errorf("%v: hidden %d, r %d, lr %g, -other %s lr %g; want hidden %d, r %d, lr %g, -other %s lr %g",
				c.args, cfg.hidden, cfg.r, cfg.lr, cfg.other, cfg.lrOther, c.hidden, c.r, c.lr, c.other, c.lrOther)
		}
		if cfg.flags["other"] != c.other || cfg.flags["lr"] != fmtFloat(c.lr) || cfg.flags["r"] != strconv.Itoa(c.r) || cfg.flags["hidden"] != strconv.Itoa(c.hidden) {
			t.Errorf("%v: recorded -other %q, -lr %q, -r %q, -hidden %q", c.args, cfg.flags["other"], cfg.flags["lr"], cfg.flags["r"], cfg.flags["hidden"])
		}
	}
}

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

// TestRuleFlagsUnchanged checks that train's flags keep the names, types
// and defaults they had before the rules' flags came from optim.Rules (and
// -resume-other-data and -max-memory, added since), that a flag beyond
// those is a setting's flag of optim.Rules (optflag.Table: a rule added to
// the table brings its own, with no edit here), and that each rule flag's
// usage names the rules that take it.
func TestRuleFlagsUnchanged(t *testing.T) {
	_, fs, err := parseArgs(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	show := func(f *flag.Flag) string {
		name, _ := flag.UnquoteUsage(f)
		return fmt.Sprintf("%s %s %q", f.Name, name, f.DefValue)
	}
	now, had := map[string]string{}, map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { now[f.Name] = show(f) })
	for _, old := range strings.Split(strings.TrimSuffix(oldFlags, ";"), ";") {
		name := strings.Fields(old)[0]
		if now[name] != old {
			t.Errorf("-%s is now %q, want %q (a checkpoint reparses it)", name, now[name], old)
		}
		delete(now, name)
		had[name] = true
	}
	table, err := optflag.Table(optim.Rules)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range table {
		name := f.Setting.Name
		own := flag.NewFlagSet("rule", flag.ContinueOnError)
		f.Define(own)
		if got, ok := now[name]; ok && got != show(own.Lookup(name)) {
			t.Errorf("-%s, a flag added since: %q, want the setting's %q", name, got, show(own.Lookup(name)))
		}
		delete(now, name)
		if u := fs.Lookup(name).Usage; !strings.Contains(u, "(rules: "+strings.Join(f.Rules, ", ")+")") &&
			(!had[name] || strings.Contains(u, "(rules: ")) { // but train's own flag of that name (-seed)
			t.Errorf("-%s: usage %q does not name its rules %s", name, u, f.Rules)
		}
	}
	for _, got := range now {
		t.Errorf("flag %q: added since, and not a setting of optim.Rules", got)
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

// TestParseFlagsErrors gives parseFlags values it cannot take, and flags
// that the chosen optimizer, schedule or model does not use: each is
// refused, naming the flag; the same flags where they apply are taken.
func TestParseFlagsErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-dataset", "svhn"}, `-dataset "svhn": want one of mnist, fashion-mnist, cifar10`},
		{[]string{"-optim", "adam"}, `-optim "adam": want one of ` + strings.Join(optim.RuleNames(true), ", ")},
		{[]string{"-model", "vit", "-dim", "10", "-heads", "4"}, "-heads 4 must divide -dim 10"},
		{[]string{"-dropout", "1"}, "-dropout 1: want 0 <= p < 1"},
		{[]string{"-engine", "tape", "-device", "cuda"}, "the tape engine runs on the CPU only; -device cuda needs -engine program"},
		{[]string{"-epochs", "0"}, "-epochs 0 and -batch 16 must be at least 1"},
		{[]string{"-limit-train", "-5"}, "must not be negative"},
		{[]string{"-download"}, "dataset-fashion-mnist"},
		{[]string{"-lr", "fast"}, "invalid value"},
		{[]string{"stray"}, `unexpected argument "stray"`},
		{[]string{"-optim", "rgd", "-r", "8"}, "-r does not apply: -optim rgd"},
		{[]string{"-optim", "rgd", "-sampling", "orth"}, "-sampling does not apply: -optim rgd"},
		{[]string{"-optim", "radam", "-r", "8"}, "-r does not apply: -optim radam"},
		{[]string{"-optim", "radam", "-rgd-momentum", "0.5"}, "-rgd-momentum does not apply: -optim radam"},
		{[]string{"-other", "adam", "-momentum", "0.5"}, "-momentum does not apply: -other adam"},
		{[]string{"-schedule", "cosine", "-warmup", "10"}, "-warmup does not apply: -schedule cosine"},
		{[]string{"-schedule", "const", "-decay-every", "10"}, "-decay-every does not apply"},
		{[]string{"-model", "ffn", "-dim", "64"}, "-dim does not apply: -model ffn"},
		{[]string{"-model", "vit", "-hidden", "64"}, "-hidden does not apply: -model vit"},
		{[]string{"-model", "rnn", "-depth", "2"}, "-depth does not apply: -model rnn has one recurrent layer"},
		{[]string{"-model", "rnn", "-channels", "8"}, "-channels does not apply: -model rnn has no channels"},
		{[]string{"-model", "rnn", "-dim", "8"}, "-dim does not apply: -model rnn"},
		{[]string{"-engine", "tape", "-kernel-profile"}, "-kernel-profile does not apply: -engine tape"},
	} {
		if _, err := parseFlags(tc.args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.args, err, tc.want)
		}
	}
	for _, args := range [][]string{
		{"-optim", "rsdm", "-r", "8", "-sampling", "orth"},
		{"-optim", "rgd", "-rgd-momentum", "0.5"},
		{"-other", "sgd", "-momentum", "0.5"},
		{"-schedule", "warmup-cosine", "-warmup", "10"},
		{"-schedule", "step", "-decay-every", "10"},
		{"-model", "vit", "-dim", "64", "-heads", "2"},
	} {
		if _, err := parseFlags(args, io.Discard); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
}

// TestResumableFlagsDocumented checks that docs/checkpoints.md's list of the flags
// a resumed run may change is the command's list, flag for flag, and that
// every flag in the list exists.
func TestResumableFlagsDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/checkpoints.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(b)), " ")
	m := regexp.MustCompile(`A resumed run keeps the saved configuration\. It may change only (.*?); any other flag`).FindStringSubmatch(text)
	if m == nil {
		t.Fatal("docs/checkpoints.md: no sentence listing the flags a resumed run may change")
	}
	var documented []string
	for _, f := range regexp.MustCompile("`-([a-z-]+)`").FindAllStringSubmatch(m[1], -1) {
		documented = append(documented, f[1])
	}
	var binary []string
	for name := range resumable {
		binary = append(binary, name)
	}
	sort.Strings(documented)
	sort.Strings(binary)
	if !slices.Equal(documented, binary) {
		t.Errorf("docs/checkpoints.md lists %v as changeable on resume, the command %v", documented, binary)
	}
	_, fs, err := parseArgs(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range binary {
		if fs.Lookup(name) == nil {
			t.Errorf("resumable flag -%s does not exist", name)
		}
	}
	var _ *flag.FlagSet = fs
}
