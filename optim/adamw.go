package optim

// AdamW, the rule "adamw" of unconstrained parameters: Adam (adam.go) with
// a default weight decay, described once (AdamWConfig.Describe):
// optim/device steps it from its description.

// AdamWConfig is Adam with decoupled weight decay (Loshchilov and Hutter
// 2019) as a Rule: the group's WeightDecay, 0.01 when it is 0.
type AdamWConfig AdamConfig

var _ Rule = AdamWConfig{}

// String returns "adamw".
func (AdamWConfig) String() string { return "adamw" }

// Constrained returns false.
func (AdamWConfig) Constrained() bool { return false }

// WeightDecay returns the decoupled weight decay AdamW applies in a group
// whose WeightDecay is group: group, or 0.01 when it is 0.
func (AdamWConfig) WeightDecay(group float64) float64 {
	if group == 0 {
		return 0.01
	}
	return group
}

// Stepper returns Adam for p with the group's weight decay (0.01 when it
// is 0); LR is ignored. Its States are Adam's (Kind "adam").
func (c AdamWConfig) Stepper(p Param, b Binding) (Stepper, error) {
	c.LR = 0
	if err := (*AdamConfig)(&c).defaults(); err != nil {
		return nil, err
	}
	return BindDescribed(p, b, c)
}

var _ Described = AdamWConfig{}

// Describe writes AdamW's step: Adam's (AdamConfig.Describe) with the
// weight decay WeightDecay of the group's.
func (c AdamWConfig) Describe(b StepBlocks) error {
	return AdamConfig(c).describe(b, c.WeightDecay(b.WeightDecay()))
}

// stateKind returns "adam": AdamW's States are Adam's.
func (AdamWConfig) stateKind() string { return AdamConfig{}.String() }
