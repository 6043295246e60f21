// Package optflag gives the settings of optim's rules (optim.Setting) as
// flags of a flag.FlagSet, from the table optim.Rules, so that a command's
// flags for a rule, its own included, come from the rule: each setting is
// one flag, whose usage names the rules that take it, and a flag given
// where the chosen rule does not take it can be refused (Inapplicable).
//
// It is a package of its own, not part of optim, because optim knows update
// rules and nothing of command lines; cmd/train and cmd/bench import it.
package optflag

import (
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/orthonet/orthonet/optim"
)

// Flag is the flag of one setting name, shared by every rule that declares
// a setting of that name.
type Flag struct {
	// Setting is the setting as the first rule that declares it gives it:
	// the flag's name, default and meaning.
	Setting optim.Setting
	// Rules are the names of the rules that take the flag, in table order.
	Rules []string
}

// Usage returns the setting's usage followed by the rules that take it:
// "RSDM submanifold size r (...) (rules: rsdm)".
func (f Flag) Usage() string {
	return fmt.Sprintf("%s (rules: %s)", f.Setting.Usage, strings.Join(f.Rules, ", "))
}

// Define defines the flag on fs as a flag of its default's type, with its
// default and Usage.
func (f Flag) Define(fs *flag.FlagSet) {
	s, usage := f.Setting, f.Usage()
	switch d := s.Default.(type) {
	case int:
		fs.Int(s.Name, d, usage)
	case uint64:
		fs.Uint64(s.Name, d, usage)
	case float64:
		fs.Float64(s.Name, d, usage)
	case string:
		fs.String(s.Name, d, usage)
	case bool:
		fs.Bool(s.Name, d, usage)
	}
}

// Table returns the flags of the settings of rules, each name once, in the
// order the rules list them. Settings of one name in two rules must have
// defaults of one type and value, since one flag gives both; a setting
// that optim.Register would refuse is refused here too.
func Table(rules []optim.Rule) ([]Flag, error) {
	var flags []Flag
	for _, r := range rules {
		for _, s := range optim.SettingsOf(r) {
			if _, err := s.Parse(fmt.Sprint(s.Default)); err != nil {
				return nil, fmt.Errorf("optflag: rule %s: setting -%s: %w", r, s.Name, err)
			}
			i := slices.IndexFunc(flags, func(f Flag) bool { return f.Setting.Name == s.Name })
			if i < 0 {
				flags = append(flags, Flag{Setting: s, Rules: []string{r.String()}})
				continue
			}
			if f := flags[i]; fmt.Sprintf("%T %v", f.Setting.Default, f.Setting.Default) != fmt.Sprintf("%T %v", s.Default, s.Default) {
				return nil, fmt.Errorf("optflag: -%s is a setting of %s with default %v (%T) and of %s with default %v (%T): one flag cannot give both",
					s.Name, strings.Join(f.Rules, ", "), f.Setting.Default, f.Setting.Default, r, s.Default, s.Default)
			}
			flags[i].Rules = append(flags[i].Rules, r.String())
		}
	}
	return flags, nil
}

// Define defines on fs the flags of Table(rules), but for those whose
// names fs defines already (a command's own -seed, which a rule's setting
// "seed" then reads), and returns those it defined.
func Define(fs *flag.FlagSet, rules []optim.Rule) ([]Flag, error) {
	flags, err := Table(rules)
	if err != nil {
		return nil, err
	}
	var defined []Flag
	for _, f := range flags {
		if fs.Lookup(f.Setting.Name) == nil {
			f.Define(fs)
			defined = append(defined, f)
		}
	}
	return defined, nil
}

// Rule returns the rule of optim.Rules named name, each of its settings
// from the flag of that name where fs defines one, checked by
// optim.ParseRuleFlags, whose errors name the flag.
func Rule(fs *flag.FlagSet, name string) (optim.Rule, error) {
	values := map[string]string{}
	for _, r := range optim.Rules {
		if r.String() != name {
			continue
		}
		for _, s := range optim.SettingsOf(r) {
			if f := fs.Lookup(s.Name); f != nil {
				values[s.Name] = f.Value.String()
			}
		}
	}
	return optim.ParseRuleFlags(name, values)
}

// Inapplicable returns the names of the flags, of those given, that were
// set on fs's command line although none of the chosen rules takes them: a
// setting that would be silently ignored, which a command refuses.
func Inapplicable(fs *flag.FlagSet, flags []Flag, chosen ...string) []string {
	var out []string
	fs.Visit(func(fl *flag.Flag) {
		for _, f := range flags {
			if f.Setting.Name == fl.Name && !slices.ContainsFunc(f.Rules, func(r string) bool { return slices.Contains(chosen, r) }) {
				out = append(out, fl.Name)
			}
		}
	})
	return out
}
