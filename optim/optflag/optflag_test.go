package optflag

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/optim"
)

// clash is a rule whose setting name has another default (of another
// type) than the built-in rule's setting of that name.
type clash struct {
	optim.RGDConfig
	name string
}

func (clash) String() string { return "clash" }
func (c clash) Settings() []optim.Setting {
	return []optim.Setting{optim.NewSetting(c.name, "another", "another default", func(*clash, string) error { return nil })}
}

// TestTable checks Table(optim.Rules) against the rules' own Settings: a
// flag for each setting name, in the order the table first gives it, with
// the setting of the first rule that declares it and the rules that take
// it in table order; that each rule is built from the flags' defaults;
// that a flag takes every sampler of optim.Samplers by name; and that one
// flag for two defaults is refused.
func TestTable(t *testing.T) {
	flags, err := Table(optim.Rules)
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, f := range flags {
		got = append(got, f.Setting.Name)
	}
	for _, r := range optim.Rules {
		for _, s := range optim.SettingsOf(r) {
			if !slices.Contains(want, s.Name) {
				want = append(want, s.Name)
			}
		}
	}
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Fatalf("Table(optim.Rules) gives the flags %q, want the rules' settings %q", got, want)
	}
	for _, f := range flags {
		var takers []string
		var first optim.Setting
		for _, r := range optim.Rules {
			if i := slices.IndexFunc(optim.SettingsOf(r), func(s optim.Setting) bool { return s.Name == f.Setting.Name }); i >= 0 {
				if takers == nil {
					first = optim.SettingsOf(r)[i]
				}
				takers = append(takers, r.String())
			}
		}
		if !slices.Equal(f.Rules, takers) {
			t.Errorf("-%s: rules %v, want those that declare it, %v", f.Setting.Name, f.Rules, takers)
		}
		if f.Setting.Default != first.Default || f.Setting.Usage != first.Usage {
			t.Errorf("-%s: default %v and usage %q, want %s's, %v and %q", f.Setting.Name, f.Setting.Default, f.Setting.Usage, takers[0], first.Default, first.Usage)
		}
	}

	fs := flag.NewFlagSet("cmd", flag.ContinueOnError)
	if _, err := Define(fs, optim.Rules); err != nil {
		t.Fatal(err)
	}
	for _, r := range optim.Rules {
		if got, err := Rule(fs, r.String()); err != nil || got.String() != r.String() {
			t.Errorf("rule %s from the flags' defaults: %v, %v", r, got, err)
		}
	}
	samplers := 0
	for _, f := range flags {
		if !slices.ContainsFunc(optim.Samplers, func(s optim.Sampler) bool { return s.String() == f.Setting.Default }) {
			continue
		}
		samplers++
		for _, s := range optim.Samplers {
			if err := fs.Set(f.Setting.Name, s.String()); err != nil {
				t.Fatal(err)
			}
			for _, name := range f.Rules {
				if _, err := Rule(fs, name); err != nil {
					t.Errorf("-%s %s with rule %s: %v", f.Setting.Name, s, name, err)
				}
			}
		}
	}
	if samplers == 0 {
		t.Errorf("no flag's default is a sampler of optim.Samplers: no command can choose one")
	}

	shared, err := Table([]optim.Rule{optim.SGDConfig{}, optim.AdamConfig{}, sgdToo{}})
	if err != nil || len(shared) != 1 || !slices.Equal(shared[0].Rules, []string{"sgd", "sgd2"}) {
		t.Errorf("a setting two rules share: %+v, %v; want one flag of both", shared, err)
	}
	first := flags[0]
	clashMsg := fmt.Sprintf("-%s is a setting of %s with default %v", first.Setting.Name, strings.Join(first.Rules, ", "), first.Setting.Default)
	if _, err := Table(append(slices.Clip(optim.Rules), clash{name: first.Setting.Name})); err == nil || !strings.Contains(err.Error(), clashMsg) {
		t.Errorf("two defaults of -%s: error %v, want one saying %q", first.Setting.Name, err, clashMsg)
	}
}

// sgdToo shares SGD's setting "momentum", with the same default.
type sgdToo struct{ optim.SGDConfig }

func (sgdToo) String() string { return "sgd2" }
func (sgdToo) Settings() []optim.Setting {
	return []optim.Setting{optim.NewSetting("momentum", 0.9, "momentum", func(*sgdToo, float64) error { return nil })}
}

// TestInapplicable gives built-in rules' flags with rules that take them
// and with rules that do not: only the latter are reported, by name, and
// a command's own flag of a setting's name (-seed) is neither defined
// again nor reported.
func TestInapplicable(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		chosen []string
		want   []string
	}{
		{[]string{"-r", "8", "-sampling", "orth"}, []string{"rsdm"}, nil},
		{[]string{"-r", "8", "-sampling", "orth"}, []string{"rgd"}, []string{"r", "sampling"}},
		{[]string{"-rgd-momentum", "0.5", "-momentum", "0"}, []string{"rgd", "adam"}, []string{"momentum"}},
		{[]string{"-rgd-momentum", "0.5", "-momentum", "0"}, []string{"radam", "sgd"}, []string{"rgd-momentum"}},
		{[]string{"-seed", "3"}, []string{"radam"}, nil},
	} {
		fs := flag.NewFlagSet("cmd", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Uint64("seed", 1, "the command's own seed")
		flags, err := Define(fs, optim.Rules)
		if err != nil {
			t.Fatal(err)
		}
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if got := Inapplicable(fs, flags, tc.chosen...); !slices.Equal(got, tc.want) {
			t.Errorf("%q with %v: inapplicable %v, want %v", tc.args, tc.chosen, got, tc.want)
		}
		if tc.want == nil {
			for _, name := range tc.chosen {
				if _, err := Rule(fs, name); err != nil {
					t.Errorf("%q: rule %s: %v", tc.args, name, err)
				}
			}
		}
	}
	// Every flag, set to its default, against every rule alone: it is
	// inapplicable exactly when the rule declares no setting of its name.
	all, err := Table(optim.Rules)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range optim.Rules {
		for _, f := range all {
			fs := flag.NewFlagSet("cmd", flag.ContinueOnError)
			flags, err := Define(fs, optim.Rules)
			if err != nil {
				t.Fatal(err)
			}
			name := f.Setting.Name
			if err := fs.Parse([]string{fmt.Sprintf("-%s=%v", name, f.Setting.Default)}); err != nil {
				t.Fatal(err)
			}
			var want []string
			if !slices.ContainsFunc(optim.SettingsOf(r), func(s optim.Setting) bool { return s.Name == name }) {
				want = []string{name}
			}
			if got := Inapplicable(fs, flags, r.String()); !slices.Equal(got, want) {
				t.Errorf("-%s with %v: inapplicable %v, want %v", name, r, got, want)
			}
		}
	}
}
