package training

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/orthonet/orthonet/optim"
)

// Flags are the flags a training command of one's own usually shares with
// the examples: where run folders go, what to resume, the device, the seed,
// and the settings of the usual two optimizer groups (RSDM on the
// Stiefel-constrained weights, Adam on the rest). Set each field to its
// default, make the flag set (FlagSet, or Define on one's own), add the
// command's own flags, parse, and Apply the values to the Config, its
// Groups from Groups or the command's own.
type Flags struct {
	Out     string  // -out: the folder under which the run folder is made (Config.Out)
	Resume  string  // -resume: latest, a run folder or a .safetensors file (Config.Resume)
	Device  string  // -device: auto, cpu or cuda (Config.Device)
	R       int     // -r: RSDM's submanifold size
	LR      float64 // -lr: RSDM's step size
	LROther float64 // -lr-other: Adam's step size for the parameters on no manifold
	Seed    uint64  // -seed: the seed of the weights, the order and RSDM's samples (Config.Seed)
}

// Define defines the flags on fs, each with the field's value as its
// default.
func (f *Flags) Define(fs *flag.FlagSet) {
	fs.StringVar(&f.Out, "out", f.Out, "folder under which the run folder is made")
	fs.StringVar(&f.Resume, "resume", f.Resume, "go on from a checkpoint: latest, a run folder or a .safetensors file")
	fs.StringVar(&f.Device, "device", f.Device, "auto, cpu or cuda")
	fs.IntVar(&f.R, "r", f.R, "RSDM submanifold size")
	fs.Float64Var(&f.LR, "lr", f.LR, "RSDM step size")
	fs.Float64Var(&f.LROther, "lr-other", f.LROther, "Adam step size of the other parameters")
	fs.Uint64Var(&f.Seed, "seed", f.Seed, "seed of the weights, the order and RSDM's samples")
}

// FlagSet returns the flag set of the command name, with the flags
// defined (Define). Its Parse returns an error rather than exiting
// (flag.ContinueOnError; ParseExitCode gives the exit status) and prints
// on stderr why a flag is refused, or on -h usage (what the command does
// and how to call it) and then the flags.
func (f *Flags) FlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, usage)
		fs.PrintDefaults()
	}
	f.Define(fs)
	return fs
}

// ParseExitCode is a command's exit status when its flags did not parse
// (err from flag.FlagSet.Parse): 0 for -h (flag.ErrHelp), else 2.
func ParseExitCode(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

// Groups returns the usual two optimizer groups of the flags: RSDM (r R,
// step size LR, seeded by Seed) on the constrained parameters, Adam (step
// size LROther) on the rest.
func (f *Flags) Groups() []optim.Group {
	return []optim.Group{
		{Select: optim.Param.Constrained, LR: f.LR, Rule: optim.RSDMConfig{SubmanifoldSize: f.R, Seed: f.Seed}},
		{Rule: optim.AdamConfig{}, LR: f.LROther},
	}
}

// Apply writes the flags into cfg: its Out, Resume, Device and Seed, and
// r, lr, lr-other and seed into its Settings, so that a resumed run refuses
// other values. cfg.Groups are the caller's (Groups).
func (f *Flags) Apply(cfg *Config) {
	cfg.Out, cfg.Resume, cfg.Device, cfg.Seed = f.Out, f.Resume, f.Device, f.Seed
	if cfg.Settings == nil {
		cfg.Settings = map[string]string{}
	}
	for k, v := range map[string]any{"r": f.R, "lr": f.LR, "lr-other": f.LROther, "seed": f.Seed} {
		cfg.Settings[k] = fmt.Sprint(v)
	}
}
