package optflag_test

import (
	"flag"
	"fmt"

	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/optim/optflag"
)

// heavyBall is a user's rule for unconstrained parameters with one setting
// of its own, -beta. It steps as SGD with momentum Beta; a rule of one's
// own with its own stepper is in optim/extend_example_test.go.
type heavyBall struct{ Beta float64 }

var _ optim.Configurable = heavyBall{}

func (heavyBall) String() string    { return "heavyball" }
func (heavyBall) Constrained() bool { return false }
func (h heavyBall) Stepper(p optim.Param, b optim.Binding) (optim.Stepper, error) {
	return optim.SGDConfig{Momentum: h.Beta}.Stepper(p, b)
}

// Settings declares -beta: its default, meaning and range.
func (heavyBall) Settings() []optim.Setting {
	return []optim.Setting{optim.NewSetting("beta", 0.8, "heavy-ball coefficient",
		func(h *heavyBall, beta float64) error {
			if !(beta >= 0 && beta < 1) {
				return fmt.Errorf("beta %v, want 0 <= beta < 1", beta)
			}
			h.Beta = beta
			return nil
		})}
}

// Example registers a rule of one's own: the command's flags then include
// its setting, it is built by name with the flag's value, and a flag of
// another rule given with it is reported.
func Example() {
	if err := optim.Register(heavyBall{}); err != nil {
		fmt.Println(err)
		return
	}
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	optimName := fs.String("optim", "sgd", "rule of the parameters")
	flags, err := optflag.Define(fs, optim.Rules)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := fs.Parse([]string{"-optim", "heavyball", "-beta", "0.5", "-r", "8"}); err != nil {
		fmt.Println(err)
		return
	}
	r, err := optflag.Rule(fs, *optimName)
	fmt.Println(r, r.(heavyBall).Beta, err)
	fmt.Println("-beta:", fs.Lookup("beta").Usage)
	fmt.Println("not for heavyball:", optflag.Inapplicable(fs, flags, *optimName))

	fs.Set("beta", "1")
	_, err = optflag.Rule(fs, "heavyball")
	fmt.Println(err)
	// Output:
	// heavyball 0.5 <nil>
	// -beta: heavy-ball coefficient (rules: heavyball)
	// not for heavyball: [r]
	// optim: -beta 1: beta 1, want 0 <= beta < 1
}
