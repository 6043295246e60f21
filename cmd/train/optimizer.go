package main

import (
	"github.com/orthonet/orthonet/optim"
)

// Wiring the flags to optim: the rules, the sampler, the schedule and the
// two groups of parameters.

// solverGroups returns the optimizer's groups for a run of totalSteps
// steps: the orthogonal weights (RSDM, RGD or Riemannian Adam, -lr) and the
// rest (SGD, Adam or AdamW, -lr-other), both scaled by the -schedule.
func solverGroups(c config, totalSteps int) ([]optim.Group, optim.Options) {
	var sched optim.Schedule
	switch c.schedule {
	case "cosine":
		sched = optim.Cosine{Steps: totalSteps}
	case "warmup-cosine":
		sched = optim.WarmupCosine{Warmup: min(c.warmup, max(totalSteps-1, 1)), Steps: max(totalSteps, 2)}
	case "step":
		sched = optim.StepDecay{Every: c.decayEvery, Gamma: 0.5}
	}
	// The flags were checked against optim's names: parsing cannot fail.
	sampling, _ := optim.ParseSampler(c.sampling)
	rule, _ := optim.ParseRule(c.optim, optim.RuleSettings{SubmanifoldSize: c.r, Sampling: sampling, Seed: c.seed, Momentum: c.rgdMomentum})
	other, _ := optim.ParseRule(c.other, optim.RuleSettings{Momentum: c.momentum})
	constrained := optim.Group{Select: optim.Param.Constrained, Rule: rule, LR: c.lr, Schedule: sched}
	rest := optim.Group{Rule: other, LR: c.lrOther, Schedule: sched, WeightDecay: c.weightDecay}
	return []optim.Group{constrained, rest}, optim.Options{ClipNorm: c.clipNorm}
}
