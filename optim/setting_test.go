package optim

import (
	"slices"
	"strings"
	"testing"
)

// TestParseRuleFlags builds orthonet's rules from flag values: a value
// reaches its field, a missing one takes the default, and a value out of
// range, unparsable or of a setting the rule lacks is refused naming the
// flag.
func TestParseRuleFlags(t *testing.T) {
	var samplers []string // the names the -sampling message lists, from the table
	for _, s := range Samplers {
		samplers = append(samplers, s.String())
	}
	for _, tc := range []struct {
		name   string
		values map[string]string
		want   Rule
		err    string
	}{
		{"rsdm", nil, RSDMConfig{SubmanifoldSize: 300, Sampling: Permutation, Seed: 1}, ""},
		{"rsdm", map[string]string{"r": "7", "sampling": "blocks", "seed": "9"}, RSDMConfig{SubmanifoldSize: 7, Sampling: Blocks, Seed: 9}, ""},
		{"rgd", map[string]string{"rgd-momentum": "0.4"}, RGDConfig{Momentum: 0.4}, ""},
		{"sgd", nil, SGDConfig{Momentum: 0.9}, ""},
		{"radam", nil, RiemannianAdamConfig{}, ""},
		{"rsdm", map[string]string{"r": "1"}, nil, "optim: -r 1: RSDM's submanifold size must be at least 2"},
		{"rsdm", map[string]string{"r": "x"}, nil, `optim: -r "x": strconv.Atoi`},
		{"rsdm", map[string]string{"sampling": "sobol"}, nil, "optim: -sampling sobol: unknown sampler, want one of " + strings.Join(samplers, ", ")},
		{"sgd", map[string]string{"momentum": "1"}, nil, "optim: -momentum 1: momentum 1, want 0 <= momentum < 1"},
		{"rgd", map[string]string{"rgd-momentum": "-0.1"}, nil, "optim: -rgd-momentum -0.1: momentum -0.1"},
		{"radam", map[string]string{"r": "8"}, nil, "optim: -r does not apply to rule radam (a setting of rsdm)"},
		{"lbfgs", nil, nil, "unknown rule"},
	} {
		got, err := ParseRuleFlags(tc.name, tc.values)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s %v: error %v, want %q", tc.name, tc.values, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s %v: %#v, %v; want %#v", tc.name, tc.values, got, err, tc.want)
		}
	}
}

// settingSign is signConfig (extend_rule_test.go) with its momentum as a
// setting of its own, -sign-momentum.
type settingSign struct{ signConfig }

func (settingSign) Settings() []Setting {
	return []Setting{NewSetting("sign-momentum", 0.5, "momentum of sign descent", func(c *settingSign, m float64) error {
		c.Momentum = m
		return checkMomentumSetting(m)
	})}
}

// badSettings is a rule whose settings a command could not give.
type badSettings struct {
	signConfig
	settings []Setting
}

func (badSettings) String() string        { return "bad" }
func (b badSettings) Settings() []Setting { return b.settings }

// TestRegister registers a rule of one's own: it is then named like
// orthonet's and built with its own setting; a taken name and settings a
// command cannot give are refused, leaving Rules as it was.
func TestRegister(t *testing.T) {
	saved := Rules
	t.Cleanup(func() { Rules = saved })
	if err := Register(settingSign{}); err != nil {
		t.Fatal(err)
	}
	if names := RuleNames(false); !slices.Contains(names, "signsgd") {
		t.Errorf("RuleNames(false) = %v, want signsgd among them", names)
	}
	r, err := ParseRuleFlags("signsgd", map[string]string{"sign-momentum": "0.25"})
	if err != nil || r != Rule(settingSign{signConfig{Momentum: 0.25}}) {
		t.Errorf("ParseRuleFlags(signsgd) = %#v, %v", r, err)
	}
	if _, err := ParseRuleFlags("rgd", map[string]string{"sign-momentum": "0.25"}); err == nil || !strings.Contains(err.Error(), "-sign-momentum does not apply to rule rgd (a setting of signsgd)") {
		t.Errorf("-sign-momentum with rgd: error %v", err)
	}
	ok := NewSetting("x", 1, "x", func(*badSettings, int) error { return nil })
	for _, tc := range []struct {
		r    Rule
		want string
	}{
		{settingSign{}, "the name is taken"},
		{RGDConfig{}, "the name is taken"},
		{badSettings{settings: []Setting{ok, ok}}, `setting "x" given twice`},
		{badSettings{settings: []Setting{{Name: "-y", Default: 1, Apply: ok.Apply}}}, "without its dash"},
		{badSettings{settings: []Setting{{Name: "y", Default: 1}}}, "has no Apply"},
		{badSettings{settings: []Setting{{Name: "y", Default: 1.5i, Apply: ok.Apply}}}, "want an int, uint64, float64, string or bool"},
		{badSettings{settings: []Setting{NewSetting("y", 0, "y", func(*badSettings, int) error { return errNoZero })}}, "refuses its default 0"},
	} {
		n := len(Rules)
		if err := Register(tc.r); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Register(%#v): error %v, want %q", tc.r, err, tc.want)
		}
		if len(Rules) != n {
			t.Errorf("Register(%#v) failed but changed Rules", tc.r)
		}
	}
}

var errNoZero = errorString("zero")

type errorString string

func (e errorString) Error() string { return string(e) }
