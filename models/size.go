package models

import (
	"errors"
	"fmt"
	"math"
)

// The sizes of a model, told from its Config before anything is built, so
// that a caller can check a configuration against the memory it has: each
// Config's ParamCount is the number of values its model's parameters hold
// (exactly what the builder allocates), and Activations roughly how many
// values one forward pass over a batch holds (every op's output and the
// buffers its kernels need, as the compiled program keeps them; a
// backward pass holds about as many again, as gradients). Both are
// computed in int64 with every product and sum checked, never by a loop
// over a size, and fail on a configuration the builder refuses or whose
// figures overflow an int64 (ErrTooLarge).

// ErrTooLarge reports a configuration whose sizes do not fit in an int64.
var ErrTooLarge = errors.New("models: sizes overflow an int64")

// tally sums products of sizes in an int64, remembering an overflow or a
// negative factor.
type tally struct {
	n    int64
	over bool
}

// add adds the product of the factors.
func (t *tally) add(factors ...int) {
	p := int64(1)
	for _, f := range factors {
		switch {
		case f < 0:
			t.over = true
			return
		case f == 0:
			return
		case p > math.MaxInt64/int64(f):
			t.over = true
			return
		}
		p *= int64(f)
	}
	if t.n > math.MaxInt64-p {
		t.over = true
		return
	}
	t.n += p
}

// result returns the sum, or an error wrapping ErrTooLarge that names
// what was counted of which model.
func (t tally) result(what, model string, cfg any) (int64, error) {
	if t.over {
		return 0, fmt.Errorf("%w: the %s of the %s %+v", ErrTooLarge, what, model, cfg)
	}
	return t.n, nil
}

// params returns the values of the parameters of the model cfg
// configures, which add tallies, once check accepts cfg.
func params(model string, cfg any, check func() error, add func(t *tally)) (int64, error) {
	if err := check(); err != nil {
		return 0, err
	}
	var t tally
	add(&t)
	return t.result("parameters", model, cfg)
}

// activations returns the values a forward pass over batch examples
// holds in the model cfg configures, which add tallies, once check accepts
// cfg and the batch is at least 1.
func activations(model string, cfg any, check func() error, batch int, add func(t *tally) error) (int64, error) {
	if err := check(); err != nil {
		return 0, err
	}
	if batch < 1 {
		return 0, fmt.Errorf("models: %s activations of a batch of %d: want at least 1", model, batch)
	}
	var t tally
	if err := add(&t); err != nil {
		return 0, err
	}
	return t.result("activations", model, cfg)
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ParamCount returns the number of values the FFN's parameters hold: its
// orthogonal layers' In x Hidden and Hidden x Hidden weights, the output
// layer's Hidden x Classes, and their biases.
func (c FFNConfig) ParamCount() (int64, error) {
	return params("FFN", c, c.check, func(t *tally) {
		bias := b2i(c.Bias)
		t.add(c.In, c.Hidden)
		t.add(c.Depth-1, c.Hidden, c.Hidden)
		t.add(bias, c.Depth, c.Hidden)
		t.add(c.Hidden, c.Classes)
		t.add(bias, c.Classes)
	})
}

// Activations returns roughly the values a forward pass over batch
// examples holds: the input, each layer's product and activation, the
// logits.
func (c FFNConfig) Activations(batch int) (int64, error) {
	return activations("FFN", c, c.check, batch, func(t *tally) error {
		t.add(batch, c.In)
		t.add(batch, 2, c.Depth, c.Hidden)
		t.add(batch, 2, c.Classes)
		return nil
	})
}

// cnnLayer is one convolution of a CNN: its channels, the side of the
// image it reads, and whether a pooling follows it.
type cnnLayer struct {
	in, out, h, w int
	pool          bool
}

// layers returns the CNN's convolutions as NewCNN builds them, and the
// channels and sides of the last block's output (the head's input). c has
// been checked: at most 16 blocks of at most 8 convolutions.
func (c CNNConfig) layers() (ls []cnnLayer, in, h, w int) {
	convs := max(c.Convs, 1)
	in, h, w = c.InChannels, c.Height, c.Width
	for i := 0; i < c.Depth; i++ {
		out := c.Channels << i
		for j := 0; j < convs; j++ {
			ls = append(ls, cnnLayer{in: in, out: out, h: h, w: w, pool: j == convs-1 && h >= 2 && w >= 2})
			in = out
		}
		if h >= 2 && w >= 2 {
			h, w = h/2, w/2
		}
	}
	return ls, in, h, w
}

// ParamCount returns the number of values the CNN's parameters hold: its
// Out x In x 3 x 3 kernels, their biases, and the head's weight and bias.
func (c CNNConfig) ParamCount() (int64, error) {
	return params("CNN", c, c.check, func(t *tally) {
		ls, in, h, w := c.layers()
		for _, l := range ls {
			t.add(l.out, l.in, 9)
			t.add(b2i(c.Bias), l.out)
		}
		t.add(in, h, w, c.Classes)
		t.add(c.Classes)
	})
}

// Activations returns roughly the values a forward pass over batch
// images holds: the input, each convolution's unfolded windows (In x 9
// values a pixel), output and ReLU, each pooling's output, the logits.
func (c CNNConfig) Activations(batch int) (int64, error) {
	return activations("CNN", c, c.check, batch, func(t *tally) error {
		ls, _, _, _ := c.layers()
		t.add(batch, c.InChannels, c.Height, c.Width)
		for _, l := range ls {
			t.add(batch, l.in, 9, l.h, l.w)
			t.add(batch, 2, l.out, l.h, l.w)
			if l.pool {
				t.add(batch, l.out, l.h/2, l.w/2)
			}
		}
		t.add(batch, 2, c.Classes)
		return nil
	})
}

// checkSizes refuses, besides what check refuses, the sizes NewViT's
// layers refuse: a Dim below 1 or that Heads does not divide.
func (c ViTConfig) checkSizes() error {
	if err := c.check(); err != nil {
		return err
	}
	if c.Dim < 1 || c.Heads < 1 || c.Dim%c.Heads != 0 {
		return fmt.Errorf("models: ViT of width %d and %d heads: want heads dividing a positive width", c.Dim, c.Heads)
	}
	return nil
}

// ParamCount returns the number of values the ViT's parameters hold: the
// patch embedding, the class token and the position embeddings, each
// block's layer norms, attention (Wq, Wk, Wv, and the output projection
// with its bias) and MLP, the last layer norm and the head.
func (c ViTConfig) ParamCount() (int64, error) {
	return params("ViT", c, c.checkSizes, func(t *tally) {
		per, d := c.Image/c.Patch, c.Dim
		t.add(c.Patch, c.Patch, c.Channels, d) // embed
		t.add(d)                               // its bias
		t.add(d)                               // cls
		t.add(per, per, d)                     // pos, the patches'
		t.add(d)                               // pos, the class token's
		t.add(c.Depth, 4, d)                   // ln1, ln2
		t.add(c.Depth, 4, d, d)                // Wq, Wk, Wv, out
		t.add(c.Depth, d)                      // out's bias
		t.add(c.Depth, 2, d, c.MLP)            // fc1, fc2
		t.add(c.Depth, c.MLP)                  // fc1's bias
		t.add(c.Depth, d)                      // fc2's bias
		t.add(2, d)                            // norm
		t.add(d, c.Classes)                    // head
		t.add(c.Classes)                       // its bias
	})
}

// Activations returns roughly the values a forward pass over batch
// images holds: per image the patches, the embedded tokens, and per block
// about 16 token-wide and 4 MLP-wide values a token (layer norms,
// projections, residuals, dropout masks) and the attention's Heads x
// tokens^2 scores; and for the batch the (batch, batch x tokens) selector
// of the class tokens, which grows with the square of the batch.
func (c ViTConfig) Activations(batch int) (int64, error) {
	return activations("ViT", c, c.checkSizes, batch, func(t *tally) error {
		per, d := c.Image/c.Patch, c.Dim
		t.add(batch, per, per, c.Patch, c.Patch, c.Channels) // patches
		for _, k := range [][]int{{6}, {16, c.Depth}} {      // the embedding's, the blocks'
			t.add(append([]int{batch, per, per, d}, k...)...) // the patches' tokens
			t.add(append([]int{batch, d}, k...)...)           // the class token
		}
		t.add(batch, c.Depth, 4, per, per, c.MLP)
		t.add(batch, c.Depth, 4, c.MLP)
		var tokens tally
		tokens.add(per, per)
		tokens.add(1)
		if tokens.over || tokens.n > math.MaxInt {
			return fmt.Errorf("%w: the tokens of the ViT %+v", ErrTooLarge, c)
		}
		tk := int(tokens.n)
		t.add(batch, c.Depth, c.Heads, tk, tk) // attention scores
		t.add(batch, batch, tk)                // the class tokens' selector
		t.add(batch, 4, d)                     // selected, normed
		t.add(batch, 2, c.Classes)
		return nil
	})
}

// ParamCount returns the number of values the RNN's parameters hold: U
// (In x Hidden) and b, W (Hidden x Hidden), V (Hidden x Classes) and c.
func (c RNNConfig) ParamCount() (int64, error) {
	return params("RNN", c, c.check, func(t *tally) {
		t.add(c.In, c.Hidden)
		t.add(c.Hidden)
		t.add(c.Hidden, c.Hidden)
		t.add(c.Hidden, c.Classes)
		t.add(c.Classes)
	})
}

// Activations returns roughly the values a forward pass over batch
// examples holds: the input and its step-major copy, and per step the
// input product, the recurrent product, their sum and its tanh.
func (c RNNConfig) Activations(batch int) (int64, error) {
	return activations("RNN", c, c.check, batch, func(t *tally) error {
		t.add(batch, 2, c.Steps, c.In)
		t.add(batch, 4, c.Steps, c.Hidden)
		t.add(batch, 2, c.Classes)
		return nil
	})
}
