package models

import (
	"fmt"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/fused"
	"github.com/orthonet/orthonet/nn"
	"github.com/orthonet/orthonet/param"
)

// ViTConfig sizes an orthogonal vision transformer. The paper's (section 6):
// Image 32, Patch 4, Channels 3, Dim 1024, Depth 6, Heads 4, MLP 256,
// Dropout 0.1, Classes 10.
type ViTConfig struct {
	Image, Patch, Channels int
	Dim, Depth, Heads, MLP int
	Classes                int
	Dropout                float64
}

// Tokens returns the number of patches, Patch^2 * Channels values each.
func (c ViTConfig) Tokens() int { return (c.Image / c.Patch) * (c.Image / c.Patch) }

// PatchDim returns the length of one flattened patch.
func (c ViTConfig) PatchDim() int { return c.Patch * c.Patch * c.Channels }

// check refuses a configuration NewViT cannot build (NewViT's layers
// refuse the rest: a Dim the Heads do not divide, a Dim below 1).
func (cfg ViTConfig) check() error {
	switch {
	case cfg.Patch < 1 || cfg.Image%cfg.Patch != 0:
		return fmt.Errorf("models: ViT patch %d does not divide image %d", cfg.Patch, cfg.Image)
	case cfg.Depth < 1 || cfg.Classes < 2 || cfg.MLP < 1 || cfg.Channels < 1:
		return fmt.Errorf("models: ViT %+v: want Depth >= 1, Classes >= 2, MLP >= 1", cfg)
	}
	return nil
}

// block is one pre-LayerNorm transformer block.
type block struct {
	ln1, ln2 *nn.LayerNorm
	attn     *nn.Attention
	fc1, fc2 *nn.Linear
}

// ViT is a pre-LayerNorm vision transformer whose attention projections
// Wq, Wk, Wv are on the Stiefel manifold. Its input is a batch of images cut
// into patches (see Patchify): shape (batch, Tokens, PatchDim).
type ViT struct {
	Cfg    ViTConfig
	embed  *nn.Linear
	cls    param.Param // (1, 1, Dim)
	pos    param.Param // (1, Tokens+1, Dim)
	blocks []block
	norm   *nn.LayerNorm
	head   *nn.Linear
	// Drop holds the dropout masks of a training graph, to be redrawn by
	// FillMasks before each step; it has none when Dropout is 0 or the graph
	// is for evaluation.
	Drop *nn.Dropout
}

// NewViT builds a ViT for a batch of the given size on g; train adds
// dropout masks.
func NewViT(g *G.ExprGraph, cfg ViTConfig, dt tensor.Dtype, rng *rand.Rand) (*ViT, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	m := &ViT{Cfg: cfg}
	var err error
	if m.Drop, err = nn.NewDropout(cfg.Dropout); err != nil {
		return nil, err
	}
	if m.embed, err = nn.NewLinear(g, "embed", cfg.PatchDim(), cfg.Dim, dt, true, rng); err != nil {
		return nil, err
	}
	// Drawn from rng, not G.Gaussian, which draws from math/rand's global
	// source: the same seed must give the same model.
	small := func(name string, shape ...int) (param.Param, error) {
		n, err := nn.NewTensor(g, name, dt, shape, func(int) float64 { return 0.02 * rng.NormFloat64() })
		return param.Plain(n), err
	}
	if m.cls, err = small("cls", 1, 1, cfg.Dim); err != nil {
		return nil, err
	}
	if m.pos, err = small("pos", 1, cfg.Tokens()+1, cfg.Dim); err != nil {
		return nil, err
	}
	for i := 0; i < cfg.Depth; i++ {
		var b block
		name := fmt.Sprintf("block%d", i+1)
		if b.ln1, err = nn.NewLayerNorm(g, name+".ln1", cfg.Dim, dt); err != nil {
			return nil, err
		}
		if b.attn, err = nn.NewAttention(g, name+".attn", cfg.Dim, cfg.Heads, dt, rng); err != nil {
			return nil, err
		}
		if b.ln2, err = nn.NewLayerNorm(g, name+".ln2", cfg.Dim, dt); err != nil {
			return nil, err
		}
		if b.fc1, err = nn.NewLinear(g, name+".fc1", cfg.Dim, cfg.MLP, dt, true, rng); err != nil {
			return nil, err
		}
		if b.fc2, err = nn.NewLinear(g, name+".fc2", cfg.MLP, cfg.Dim, dt, true, rng); err != nil {
			return nil, err
		}
		m.blocks = append(m.blocks, b)
	}
	if m.norm, err = nn.NewLayerNorm(g, "norm", cfg.Dim, dt); err != nil {
		return nil, err
	}
	if m.head, err = nn.NewLinear(g, "head", cfg.Dim, cfg.Classes, dt, true, rng); err != nil {
		return nil, err
	}
	return m, nil
}

// Forward returns the logits of patches of shape (batch, Tokens, PatchDim).
// With train and Dropout > 0 it adds dropout masks to m.Drop.
//
// The residual stream is kept as a (batch*(Tokens+1), Dim) matrix and only
// freshly computed tensors are reshaped: gorgonia v0.9.18's tape machine
// writes in place through a Reshape view, so reshaping a node that is used
// again (the residual stream) corrupts it (TestViTGradient catches this).
func (m *ViT) Forward(patches *G.Node, train bool) (*G.Node, error) {
	c := m.Cfg
	s := patches.Shape()
	if patches.Dims() != 3 || s[1] != c.Tokens() || s[2] != c.PatchDim() {
		return nil, fmt.Errorf("models: ViT input %v, want (batch, %d, %d)", s, c.Tokens(), c.PatchDim())
	}
	b, t := s[0], c.Tokens()+1
	g := patches.Graph()
	dt := patches.Dtype()
	dropout := func(x *G.Node) *G.Node {
		if !train {
			return x
		}
		return G.Must(m.Drop.Apply(x))
	}
	emb := G.Must(m.embed.Forward(G.Must(G.Reshape(patches, tensor.Shape{b * c.Tokens(), c.PatchDim()}))))
	emb = G.Must(G.Reshape(emb, tensor.Shape{b, c.Tokens(), c.Dim}))
	zeros := G.NewTensor(g, dt, 3, G.WithShape(b, 1, c.Dim), G.WithName("cls.zeros"), G.WithInit(G.Zeroes()))
	cls := G.Must(G.BroadcastAdd(zeros, m.cls.Node, nil, []byte{0}))
	tokens := G.Must(G.BroadcastAdd(G.Must(G.Concat(1, cls, emb)), m.pos.Node, nil, []byte{0}))
	x := dropout(G.Must(G.Reshape(tokens, tensor.Shape{b * t, c.Dim})))
	for _, bl := range m.blocks {
		h := G.Must(bl.ln1.Forward(x))
		x = G.Must(G.Add(x, dropout(G.Must(bl.attn.Forward(h, t)))))
		h = G.Must(bl.ln2.Forward(x))
		h = dropout(G.Must(bl.fc1.ForwardAct(h, fused.GELUTanh)))
		x = G.Must(G.Add(x, dropout(G.Must(bl.fc2.Forward(h)))))
	}
	// The class tokens' rows (0, t, 2t, ...): token 0 of the stream seen as
	// (batch, t, Dim), a slice whose size follows the batch alone (a product
	// with a (batch, batch*t) one-hot selector, exact too, held batch^2*t
	// constants). The last residual sum x is read by nothing else, so it
	// may be reshaped.
	first := G.Must(G.Slice(G.Must(G.Reshape(x, tensor.Shape{b, t, c.Dim})), nil, G.S(0)))
	if first.Dims() != 2 { // a batch of one loses its axis too
		first = G.Must(G.Reshape(first, tensor.Shape{b, c.Dim}))
	}
	return m.head.Forward(G.Must(m.norm.Forward(first)))
}

// FillMasks draws fresh dropout masks from rng.
func (m *ViT) FillMasks(rng *rand.Rand) { m.Drop.Fill(rng) }

func (m *ViT) layers() []*nn.Linear {
	ls := []*nn.Linear{m.embed}
	for _, b := range m.blocks {
		ls = append(ls, b.fc1, b.fc2)
	}
	return append(ls, m.head)
}

// Params returns every parameter; Wq, Wk, Wv are marked as points of the
// Stiefel manifold.
func (m *ViT) Params() []param.Param {
	ps := []param.Param{m.cls, m.pos}
	for _, l := range m.layers() {
		ps = append(ps, l.Params()...)
	}
	for _, b := range m.blocks {
		ps = append(ps, b.ln1.Params()...)
		ps = append(ps, b.ln2.Params()...)
		ps = append(ps, b.attn.Params()...)
	}
	return append(ps, m.norm.Params()...)
}

// Nodes returns every parameter node, in the order of Params.
func (m *ViT) Nodes() G.Nodes { return param.Nodes(m.Params()) }

// Patchify writes image (channels, side, side), channel-major, as a
// sequence of (side/patch)^2 patches of patch*patch*channels values, row by
// row of patches, each patch channel-major.
func Patchify(dst, img []float32, channels, side, patch int) {
	per := side / patch
	k := 0
	for pr := 0; pr < per; pr++ {
		for pc := 0; pc < per; pc++ {
			for ch := 0; ch < channels; ch++ {
				for r := 0; r < patch; r++ {
					row := img[ch*side*side+(pr*patch+r)*side+pc*patch:]
					k += copy(dst[k:k+patch], row[:patch])
				}
			}
		}
	}
}
