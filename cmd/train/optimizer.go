package main

import (
	"errors"
	"fmt"

	G "gorgonia.org/gorgonia"

	"github.com/orthonet/orthonet/optim"
)

// Wiring the flags to optim: the rules, the sampler, the schedule and the
// two groups of parameters, and the checks of the settings against the
// network built.

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

// buildEngine builds the networks and the engine that trains them with its
// optimizer. A setting the device's optimizer does not run makes -device
// auto train on the CPU, saying why, and is a usage error for -device
// cuda, as settings the network or data-parallel training cannot take are.
func (t *trainer) buildEngine() error {
	c := t.c
	net, loss, y, yb, ev, err := buildNetworks(c, t.train, t.test)
	if err != nil {
		return err
	}
	t.net, t.yb, t.evNet = net, yb, ev
	if err := checkR(c, net.Constrained()); err != nil {
		return &usageError{err}
	}
	steps := c.epochs * (t.train.N / c.batch)
	t.eng, err = newEngine(c, net, loss, y, ev, steps)
	if errors.Is(err, optim.ErrNotOnDevice) && c.asked == "auto" { // -clip-norm, -sampling orth, -optim radam
		fmt.Fprintf(t.w, "train: device cpu instead: %v; -device auto trains on the CPU what the device's optimizer does not run\n", err)
		c.device, t.c.device = "cpu", "cpu"
		t.eng, err = newEngine(c, net, loss, y, ev, steps)
	}
	switch {
	case errors.Is(err, optim.ErrNotDistributed): // -clip-norm, -sampling orth with -dist mpi
		return &usageError{fmt.Errorf("-dist %s: %w", c.dist, err)}
	case errors.Is(err, optim.ErrNotOnDevice):
		return &usageError{fmt.Errorf("-device %s: %w (-device cpu or auto trains with it)", c.device, err)}
	}
	return err
}

// checkR refuses an RSDM submanifold size r above the rows of any
// orthogonal weight (of an n x p weight, max(n, p): one with fewer rows
// than columns is stepped as its transpose; a convolution kernel is the
// matrix of its first axis by the rest), naming the first such weight and
// the largest r the network takes.
func checkR(c config, weights G.Nodes) error {
	rsdm, ok := c.rule.(optim.RSDMConfig)
	if !ok || len(weights) == 0 {
		return nil
	}
	r := rsdm.SubmanifoldSize
	rows := func(n *G.Node) int { // of the matrix view (optim.MatrixOf)
		r, c, _ := optim.MatrixOf(n.Shape())
		return max(r, c)
	}
	smallest := weights[0]
	for _, n := range weights {
		if rows(n) < rows(smallest) {
			smallest = n
		}
	}
	for _, n := range weights {
		if r > rows(n) {
			return fmt.Errorf("-r %d: RSDM's submanifold size exceeds the %d rows of weight %q (this network takes 2 <= r <= %d, the rows of %q)",
				r, rows(n), n.Name(), rows(smallest), smallest.Name())
		}
	}
	return nil
}
