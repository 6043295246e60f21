package main

import (
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestRNNDefaults checks -model rnn's own defaults: -hidden 128, r the
// hidden size (at most 300), and Adam at 0.003 on the plain parameters
// where the command line leaves them unset, recorded as given; and the
// flags that do not apply to it refused.
func TestRNNDefaults(t *testing.T) {
	for _, c := range []struct {
		args      []string
		hidden, r int
	}{
		{[]string{"-model", "rnn"}, defaultRNNHidden, defaultRNNHidden},
		{[]string{"-model", "rnn", "-hidden", "64"}, 64, 64},
		{[]string{"-model", "rnn", "-hidden", "512"}, 512, 300},
		{[]string{"-model", "rnn", "-r", "16"}, defaultRNNHidden, 16},
		{[]string{"-model", "ffn"}, 1024, 300},
	} {
		cfg, _, err := parseArgs(c.args, io.Discard)
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
			continue
		}
		if cfg.hidden != c.hidden || cfg.r != c.r || cfg.flags["hidden"] != strconv.Itoa(c.hidden) || cfg.flags["r"] != strconv.Itoa(c.r) {
			t.Errorf("%v: hidden %d, r %d (recorded %q, %q); want %d, %d", c.args, cfg.hidden, cfg.r, cfg.flags["hidden"], cfg.flags["r"], c.hidden, c.r)
		}
		wantOther, wantLR := defaultRNNOther, defaultRNNAdamLR
		if cfg.model == "ffn" {
			wantOther, wantLR = "sgd", 0.05
		}
		if cfg.other != wantOther || cfg.lrOther != wantLR || cfg.flags["other"] != wantOther {
			t.Errorf("%v: -other %s -lr-other %v (recorded %q), want %s %v", c.args, cfg.other, cfg.lrOther, cfg.flags["other"], wantOther, wantLR)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-model", "rnn", "-depth", "2"}, "-depth does not apply: -model rnn has one recurrent layer"},
		{[]string{"-model", "rnn", "-channels", "8"}, "-channels does not apply: -model rnn has no channels"},
		{[]string{"-model", "rnn", "-dim", "8"}, "-dim does not apply: -model rnn"},
	} {
		if _, err := parseFlags(c.args, io.Discard); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.args, err, c.want)
		}
	}
}

// TestRNNLearns trains a small orthogonal RNN (hidden 32) reading the
// generated MNIST-format images row by row, its recurrent weight stepped by
// RSDM-P: the test accuracy must clearly beat chance (10%) and the weight
// stay on O(32) to 1e-5.
func TestRNNLearns(t *testing.T) {
	dir := mnistDir(t, 400, 100)
	c := parsed(t, "-model", "rnn", "-dataset", "mnist", "-data", dir, "-out", t.TempDir(), "-hidden", "32",
		"-lr", "0.2", "-other", "adam", "-lr-other", "0.01", "-batch", "10", "-epochs", "5")
	if c.r != 32 {
		t.Errorf("-r by default %d, want 32 (the recurrent weight's side)", c.r)
	}
	out, acc := runForAccuracy(t, c, hooks{})
	t.Logf("RNN test accuracy on the generated set: %.2f%%", acc)
	if acc < 50 {
		t.Errorf("RNN test accuracy %.2f%%, want >= 50%% (chance is 10%%)", acc)
	}
	m := regexp.MustCompile(`\|\|W\^T W - I\|\|_F of recurrent.W: ([0-9.e+-]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no feasibility line for recurrent.W:\n%s", out)
	}
	if v, _ := strconv.ParseFloat(m[1], 64); !(v < 1e-5) {
		t.Errorf("recurrent.W: ||W^T W - I||_F = %s, want under 1e-5", m[1])
	}
}

// TestRNNResumeBitExact trains an RNN on CIFAR-format images (32 steps of
// 96 values) straight, and again stopped before step k and resumed: the
// final weights, optimizer states and metrics agree bit for bit, for
// RSDM-P, RGD with momentum and Riemannian Adam.
func TestRNNResumeBitExact(t *testing.T) {
	cifar := cifarDir(t, 12, 20)
	base := []string{"-model", "rnn", "-dataset", "cifar10", "-data", cifar, "-hidden", "12", "-other", "adam", "-lr-other", "0.002",
		"-batch", "10", "-epochs", "2", "-eval-every", "5"}
	for _, tc := range []struct {
		name string
		args []string
		k    []int
	}{
		{"rsdm-p", append(base, "-r", "6", "-lr", "0.2"), []int{1, 8}},
		{"rgd-momentum", append(base, "-optim", "rgd", "-lr", "0.05"), []int{7}},
		{"radam", append(base, "-optim", "radam", "-lr", "0.01"), []int{9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pieces []piece
			for _, k := range tc.k {
				pieces = append(pieces, piece{fmt.Sprintf("%s k=%d", tc.name, k), stopThenResume(t, k, tc.args...)})
			}
			straightThenResumed(t, trainArgs(t, tc.args...), pieces...)
		})
	}
}
