package models

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// sized is what a Config tells of its model's size.
type sized interface {
	ParamCount() (int64, error)
	Activations(batch int) (int64, error)
}

// built returns the values the parameters of the model of cfg hold once
// built: the sum of their nodes' sizes.
func built(t *testing.T, cfg sized) int64 {
	t.Helper()
	g := G.NewGraph()
	rng := rand.New(rand.NewPCG(3, 4))
	dt := tensor.Float32
	if _, ok := cfg.(RNNConfig); ok {
		dt = tensor.Float64
	}
	m, err := build(g, cfg, dt, rng)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, p := range m.Params() {
		n += int64(reflect.ValueOf(p.Node.Value().Data()).Len()) // the backing slice's length
	}
	return n
}

// TestParamCountIsBuilt builds small models of every family and checks
// that ParamCount is exactly the values their parameters hold, and that
// Activations grows with the batch.
func TestParamCountIsBuilt(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  sized
	}{
		{"ffn", FFNConfig{In: 12, Hidden: 8, Classes: 3, Depth: 3, Bias: true}},
		{"ffn-no-bias", FFNConfig{In: 9, Hidden: 9, Classes: 2, Depth: 1}},
		{"cnn", CNNConfig{InChannels: 3, Height: 8, Width: 6, Channels: 2, Depth: 2, Classes: 4, Bias: true}},
		{"cnn-convs-1px", CNNConfig{InChannels: 1, Height: 5, Width: 3, Channels: 3, Depth: 3, Classes: 2, Convs: 2}},
		{"vit", ViTConfig{Image: 8, Patch: 4, Channels: 3, Dim: 8, Depth: 2, Heads: 2, MLP: 5, Classes: 3}},
		{"vit-one-patch", ViTConfig{Image: 4, Patch: 4, Channels: 1, Dim: 6, Depth: 1, Heads: 3, MLP: 2, Classes: 2, Dropout: 0.1}},
		{"rnn", RNNConfig{In: 7, Hidden: 5, Steps: 4, Classes: 3}},
		{"rnn-channels", RNNConfig{In: 6, Hidden: 4, Steps: 3, Classes: 2, Channels: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.cfg.ParamCount()
			if err != nil {
				t.Fatal(err)
			}
			if want := built(t, tc.cfg); got != want {
				t.Errorf("ParamCount %d, the built model's parameters hold %d", got, want)
			}
			one, err1 := tc.cfg.Activations(1)
			ten, err10 := tc.cfg.Activations(10)
			if err1 != nil || err10 != nil || !(one > 0 && ten >= 10*one) {
				t.Errorf("Activations(1) = %d, %v; Activations(10) = %d, %v: want positive, growing with the batch", one, err1, ten, err10)
			}
			if _, err := tc.cfg.Activations(0); err == nil {
				t.Error("Activations(0): no error")
			}
		})
	}
}

// TestSizesOverflow checks that sizes whose figures overflow an int64
// are refused with ErrTooLarge, quickly (no loop over a size), and that
// configurations the builders refuse are refused as they refuse them.
func TestSizesOverflow(t *testing.T) {
	huge := math.MaxInt / 2
	for _, tc := range []struct {
		name string
		cfg  sized
		want string // "" for ErrTooLarge
	}{
		{"ffn-hidden", FFNConfig{In: huge, Hidden: huge, Classes: 10, Depth: 5}, ""},
		{"ffn-depth", FFNConfig{In: 1 << 20, Hidden: 1 << 20, Classes: 10, Depth: huge}, ""},
		{"vit-dim", ViTConfig{Image: 32, Patch: 4, Channels: 3, Dim: 1 << 40, Depth: 6, Heads: 4, MLP: 256, Classes: 10}, ""},
		{"vit-depth", ViTConfig{Image: 32, Patch: 4, Channels: 3, Dim: 1 << 20, Depth: huge, Heads: 4, MLP: 256, Classes: 10}, ""},
		{"vit-image", ViTConfig{Image: 1 << 40, Patch: 1, Channels: 3, Dim: 8, Depth: 1, Heads: 4, MLP: 2, Classes: 10}, ""},
		{"rnn-hidden", RNNConfig{In: 28, Hidden: 1 << 40, Steps: 28, Classes: 10}, ""},
		{"cnn-image", CNNConfig{InChannels: 3, Height: 1 << 40, Width: 1 << 40, Channels: 64, Depth: 2, Classes: 10}, ""},
		{"cnn-shift", CNNConfig{InChannels: 1, Height: 28, Width: 28, Channels: 1 << 62, Depth: 2, Classes: 10}, "at most 65536"},
		{"ffn-narrow", FFNConfig{In: 10, Hidden: 20, Classes: 10, Depth: 1}, "input 10 < hidden 20"},
		{"vit-heads", ViTConfig{Image: 32, Patch: 4, Channels: 3, Dim: 10, Depth: 1, Heads: 4, MLP: 2, Classes: 10}, "heads dividing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cfg.ParamCount()
			if err == nil {
				_, err = tc.cfg.Activations(1 << 30)
			}
			switch {
			case tc.want == "" && !errors.Is(err, ErrTooLarge):
				t.Errorf("error %v, want ErrTooLarge", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// TestCNNChannelsShift checks that NewCNN refuses first-block channels
// whose last block's count overflows a shift, as ParamCount does.
func TestCNNChannelsShift(t *testing.T) {
	cfg := CNNConfig{InChannels: 1, Height: 4, Width: 4, Channels: 1 << 62, Depth: 3, Classes: 2}
	if _, err := NewCNN(G.NewGraph(), cfg, tensor.Float32, rand.New(rand.NewPCG(1, 1))); err == nil || !strings.Contains(err.Error(), "at most 65536") {
		t.Errorf("NewCNN %+v: error %v, want the channels refused", cfg, err)
	}
}
