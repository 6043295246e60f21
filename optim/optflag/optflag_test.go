package optflag

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/orthonet/orthonet/optim"
)

// clash is a rule whose setting "r" has another default than RSDM's.
type clash struct{ optim.RGDConfig }

func (clash) String() string { return "clash" }
func (clash) Settings() []optim.Setting {
	return []optim.Setting{optim.NewSetting("r", 4, "another r", func(*clash, int) error { return nil })}
}

// TestTable checks the flags of the built-in rules, each once with the
// rules that take it, and refuses one flag for two defaults.
func TestTable(t *testing.T) {
	flags, err := Table(optim.Rules)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range flags {
		got = append(got, f.Setting.Name+":"+strings.Join(f.Rules, ","))
	}
	if want := []string{"r:rsdm", "sampling:rsdm", "seed:rsdm", "rgd-momentum:rgd", "momentum:sgd"}; !slices.Equal(got, want) {
		t.Errorf("Table(optim.Rules) = %v, want %v", got, want)
	}
	shared, err := Table([]optim.Rule{optim.SGDConfig{}, optim.AdamConfig{}, sgdToo{}})
	if err != nil || len(shared) != 1 || !slices.Equal(shared[0].Rules, []string{"sgd", "sgd2"}) {
		t.Errorf("a setting two rules share: %+v, %v; want one flag of both", shared, err)
	}
	if _, err := Table(append(slices.Clip(optim.Rules), clash{})); err == nil || !strings.Contains(err.Error(), "-r is a setting of rsdm with default 300") {
		t.Errorf("two defaults of -r: error %v", err)
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
}
