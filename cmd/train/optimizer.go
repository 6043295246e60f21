package main

import (
	"github.com/orthonet/orthonet/optim"
)

// Wiring the flags to optim: the rules, the sampler, the schedule and the
// two groups of parameters.

// solverGroups returns the optimizer's groups for a run of totalSteps
// steps: the orthogonal weights (the rule of -optim, -lr) and the rest
// (the rule of -other, -lr-other), both scaled by the -schedule.
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
	constrained := optim.Group{Select: optim.Param.Constrained, Rule: c.rule, LR: c.lr, Schedule: sched}
	rest := optim.Group{Rule: c.otherRule, LR: c.lrOther, Schedule: sched, WeightDecay: c.weightDecay}
	return []optim.Group{constrained, rest}, optim.Options{ClipNorm: c.clipNorm}
}
