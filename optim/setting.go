package optim

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Setting is one setting of a rule that a command line gives, as the flag
// Name: its default, what it means, and how a value reaches the rule.
// A rule lists its settings by a method Settings (Configurable);
// ParseRuleFlags reads them, and optim/optflag defines their flags.
type Setting struct {
	// Name is the flag's name without its dash, e.g. "r" or "sampling".
	Name string
	// Default is the value taken where none is given. Its type, int,
	// uint64, float64, string or bool, is the type of every value.
	Default any
	// Usage says what the setting means, for a command's -h.
	Usage string
	// Apply returns the rule r with the setting's value v, of Default's
	// type, or an error saying why v is out of range (ParseRuleFlags
	// prefixes the flag and the value). r is the rule whose Settings
	// returned this Setting.
	Apply func(r Rule, v any) (Rule, error)
}

// Configurable is a Rule that takes settings from a command line: the
// rules of Rules that train's -optim or -other name list theirs here, and
// a rule of one's own does the same to be given flags (Register).
type Configurable interface {
	Rule
	// Settings returns the rule's settings, each Name once.
	Settings() []Setting
}

// FactoredRule is a Rule that can step a weight along its gradient's
// factors (Factored) instead of the formed gradient: a caller that can
// keep the factors (program.Config.Groups) asks it whether to.
type FactoredRule interface {
	Rule
	// FactorsGradients returns the size r that a factored step's cost
	// grows with (RSDM's submanifold size) and true when the rule steps
	// factored gradients.
	FactorsGradients() (r int, ok bool)
}

// settingValue is the types a Setting's Default may have.
type settingValue interface {
	int | uint64 | float64 | string | bool
}

// NewSetting returns the Setting name of rules of type C, whose value of
// type V set gives to a copy of the rule; an error of set says why the
// value is out of range. Its Apply takes a C only: a type that embeds C
// declares settings of its own (Register refuses it otherwise).
func NewSetting[C Rule, V settingValue](name string, def V, usage string, set func(c *C, v V) error) Setting {
	return Setting{Name: name, Default: def, Usage: usage, Apply: func(r Rule, v any) (Rule, error) {
		c, ok := r.(C)
		if !ok {
			return r, fmt.Errorf("a setting of %T given to %T", *new(C), r)
		}
		x, ok := v.(V)
		if !ok {
			return r, fmt.Errorf("value %v of %T, want %T", v, v, def)
		}
		if err := set(&c, x); err != nil {
			return r, err
		}
		return c, nil
	}}
}

// Parse returns text, a flag's String, as a value of the type of
// s.Default.
func (s Setting) Parse(text string) (any, error) {
	switch s.Default.(type) {
	case int:
		return strconv.Atoi(text)
	case uint64:
		return strconv.ParseUint(text, 10, 64)
	case float64:
		return strconv.ParseFloat(text, 64)
	case string:
		return text, nil
	case bool:
		return strconv.ParseBool(text)
	}
	return nil, fmt.Errorf("default %v of %T, want an int, uint64, float64, string or bool", s.Default, s.Default)
}

// SettingsOf returns the settings of r: those of its Settings method, or
// none.
func SettingsOf(r Rule) []Setting {
	if c, ok := r.(Configurable); ok {
		return c.Settings()
	}
	return nil
}

// checkSettings checks the settings of r: each has a name, given once, a
// default of a type Parse reads and which Apply takes, and an Apply.
func checkSettings(r Rule) error {
	var seen []string
	for _, s := range SettingsOf(r) {
		switch {
		case s.Name == "" || s.Name[0] == '-':
			return fmt.Errorf("optim: rule %s: setting name %q, want a flag's name without its dash", r, s.Name)
		case slices.Contains(seen, s.Name):
			return fmt.Errorf("optim: rule %s: setting %q given twice", r, s.Name)
		case s.Apply == nil:
			return fmt.Errorf("optim: rule %s: setting %q has no Apply", r, s.Name)
		}
		seen = append(seen, s.Name)
		if _, err := s.Parse(fmt.Sprint(s.Default)); err != nil {
			return fmt.Errorf("optim: rule %s: setting %q: %w", r, s.Name, err)
		}
		if _, err := s.Apply(r, s.Default); err != nil {
			return fmt.Errorf("optim: rule %s: setting %q refuses its default %v: %w", r, s.Name, s.Default, err)
		}
	}
	return nil
}

// Register adds r to Rules, after the rules there, so that it is a rule
// a command names like orthonet's own: RuleNames lists it, ParseRuleFlags
// builds it by name with the values of its Settings (Configurable), and
// optim/optflag gives it flags. It refuses a rule whose name is empty or
// taken, and settings that a command could not give. Register is not safe
// to call while another goroutine reads Rules: call it from an init
// function or main, before the flags are defined.
func Register(r Rule) error {
	if r == nil || r.String() == "" {
		return fmt.Errorf("optim: registering rule %#v: a rule needs a name (String)", r)
	}
	for _, have := range Rules {
		if have.String() == r.String() {
			return fmt.Errorf("optim: registering rule %s (%T): the name is taken by %T", r, r, have)
		}
	}
	if err := checkSettings(r); err != nil {
		return err
	}
	Rules = append(slices.Clip(Rules), r)
	return nil
}

// ParseRuleFlags returns the rule of Rules named name with the values of
// its settings (Configurable) given in values, by setting Name, as the
// text of a flag (its String); a setting without a value takes its
// Default. Each value is parsed and checked, and an error names the flag:
// "optim: -r 1: RSDM's submanifold size must be at least 2 ...". A value
// of a setting the rule lacks is refused, naming the rules that take it.
func ParseRuleFlags(name string, values map[string]string) (Rule, error) {
	r, err := parse("rule", name, Rules)
	if err != nil {
		return nil, err
	}
	settings := SettingsOf(r)
	for _, k := range slices.Sorted(maps.Keys(values)) {
		if !slices.ContainsFunc(settings, func(s Setting) bool { return s.Name == k }) {
			return nil, fmt.Errorf("optim: -%s does not apply to rule %s%s", k, name, takers(k))
		}
	}
	for _, s := range settings {
		text, given := values[s.Name]
		v := s.Default
		if given {
			if v, err = s.Parse(text); err != nil {
				return nil, fmt.Errorf("optim: -%s %q: %w", s.Name, text, err)
			}
		}
		if r, err = s.Apply(r, v); err != nil {
			return nil, fmt.Errorf("optim: -%s %v: %w", s.Name, v, err)
		}
	}
	return r, nil
}

// takers returns ", a setting of rule1, rule2" for the rules of Rules
// that take setting name, or "" where none does.
func takers(name string) string {
	var names []string
	for _, r := range Rules {
		if slices.ContainsFunc(SettingsOf(r), func(s Setting) bool { return s.Name == name }) {
			names = append(names, r.String())
		}
	}
	if names == nil {
		return ""
	}
	return fmt.Sprintf(" (a setting of %s)", strings.Join(names, ", "))
}

// checkMomentumSetting is the range check of a momentum flag.
func checkMomentumSetting(beta float64) error {
	if !(beta >= 0 && beta < 1) {
		return fmt.Errorf("momentum %v, want 0 <= momentum < 1", beta)
	}
	return nil
}
