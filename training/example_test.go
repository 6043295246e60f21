package training_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/checkpoint"
	"github.com/orthonet/orthonet/data"
	"github.com/orthonet/orthonet/fused"
	"github.com/orthonet/orthonet/nn"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/training"
)

// points is a data set of one's own held in memory: 2-D points labelled by
// the quadrant they lie in.
type points struct {
	xy     []float32
	labels []int
}

func (p *points) Len() int        { return len(p.labels) }
func (p *points) Shape() []int    { return []int{2} }
func (p *points) NumClasses() int { return 4 }
func (p *points) Example(i int, x []float32) (int, error) {
	copy(x, p.xy[2*i:2*i+2])
	return p.labels[i], nil
}

// quadrants returns n random points and their quadrants.
func quadrants(n int, seed uint64) *points {
	rng := rand.New(rand.NewPCG(seed, 1))
	p := &points{xy: make([]float32, 2*n), labels: make([]int, n)}
	for i := range n {
		x, y := 2*rng.Float64()-1, 2*rng.Float64()-1
		p.xy[2*i], p.xy[2*i+1] = float32(x), float32(y)
		switch {
		case x >= 0 && y >= 0:
			p.labels[i] = 0
		case x < 0 && y >= 0:
			p.labels[i] = 1
		case x < 0:
			p.labels[i] = 2
		default:
			p.labels[i] = 3
		}
	}
	return p
}

// A classifier of one's own, written in Gorgonia, trained by the package:
// its hidden weight on the Stiefel manifold stepped by RSDM-P, the rest by
// Adam, with run folders, checkpoints and metrics under a temporary folder.
func Example() {
	const batch = 16
	m, err := classifier(batch)
	if err != nil {
		fmt.Println(err)
		return
	}
	out, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(out)
	final, err := training.Run(context.Background(), m,
		training.Config{Train: quadrants(1024, 1), Test: quadrants(256, 2), Batch: batch, Epochs: 3, Seed: 1, Out: out, Device: "cpu",
			Groups: []optim.Group{
				{Select: optim.Param.Constrained, LR: 0.5, Rule: optim.RSDMConfig{SubmanifoldSize: 8, Seed: 1}},
				{Rule: optim.AdamConfig{}, LR: 0.01},
			}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("test accuracy above 90%:", final.Accuracy > 0.9)
	fmt.Println("||W^T W - I||_F below 1e-5:", final.Feasibility < 1e-5)
	// Output:
	// test accuracy above 90%: true
	// ||W^T W - I||_F below 1e-5: true
}

// classifier is the quadrants' classifier in Gorgonia for batches of
// batch points, with its gradients: 2 -> 32 (its weight with orthonormal
// rows, ReLU) -> 4.
func classifier(batch int) (training.Model, error) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(batch, 2), G.WithName("x"), G.WithInit(G.Zeroes()))
	y := G.NewMatrix(g, tensor.Float32, G.WithShape(batch, 4), G.WithName("y"), G.WithInit(G.Zeroes()))
	rng := rand.New(rand.NewPCG(1, 2))
	fc1, err1 := nn.NewOrthoLinear(g, "fc1", 2, 32, tensor.Float32, true, rng)
	fc2, err2 := nn.NewLinear(g, "fc2", 32, 4, tensor.Float32, true, rng)
	if err := errors.Join(err1, err2); err != nil {
		return training.Model{}, err
	}
	logits := G.Must(fc2.Forward(G.Must(fc1.ForwardAct(x, fused.ReLU))))
	loss := G.Must(nn.CrossEntropy(logits, y))
	params := append(fc1.Params(), fc2.Params()...)
	if _, err := G.Grad(loss, param.Nodes(params)...); err != nil {
		return training.Model{}, err
	}
	return training.Model{Loss: loss, Logits: logits, Input: x, Labels: y, Params: params}, nil
}

// A trained model used rather than trained: the run's last checkpoint
// loaded into a model of another batch size, which an Evaluator measures
// and runs forward on new points.
func ExampleEvaluator() {
	m, err := classifier(16)
	if err != nil {
		fmt.Println(err)
		return
	}
	out, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(out)
	test := quadrants(256, 2)
	final, err := training.Run(context.Background(), m, training.Config{Train: quadrants(1024, 1), Test: test, Batch: 16, Epochs: 3,
		Seed: 1, Out: out, Device: "cpu", Groups: []optim.Group{
			{Select: optim.Param.Constrained, LR: 0.5, Rule: optim.RSDMConfig{SubmanifoldSize: 8, Seed: 1}},
			{Rule: optim.AdamConfig{}, LR: 0.01},
		}})
	if err != nil {
		fmt.Println(err)
		return
	}
	path, _, err := checkpoint.LatestUnder(out)
	if err != nil {
		fmt.Println(err)
		return
	}
	f, err := checkpoint.Read(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	fwd, err := classifier(64) // the same layers' names, another batch
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := f.LoadNodes(training.PrefixModel, param.Nodes(fwd.Params)); err != nil {
		fmt.Println(err)
		return
	}
	ev, err := training.NewEvaluator(training.Model{Logits: fwd.Logits, Input: fwd.Input, Params: fwd.Params},
		training.EvaluatorConfig{Shape: test.Shape(), Classes: test.NumClasses(), Device: "cpu"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ev.Close()
	e, err := ev.Evaluate(context.Background(), test)
	if err != nil {
		fmt.Println(err)
		return
	}
	logits, err := ev.Predict([]float32{0.5, 0.5, -0.5, -0.5}) // two points: quadrants 0 and 2
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("the run's test accuracy:", e.Accuracy == final.Accuracy)
	p0, p1 := logits[:4], logits[4:]
	fmt.Println("classes:", slices.Index(p0, slices.Max(p0)), slices.Index(p1, slices.Max(p1)))
	// Output:
	// the run's test accuracy: true
	// classes: 0 2
}

var _ data.Dataset = (*points)(nil)

// A training command of one's own defines the shared flags with its
// defaults, adds its own, and applies the parsed values to its Config:
// the usual two optimizer groups, and the settings a resumed run keeps.
func ExampleFlags() {
	f := training.Flags{Out: "runs/mytrain", Device: "auto", R: 16, LR: 0.2, LROther: 0.003, Seed: 1}
	fs := f.FlagSet("mytrain", "mytrain trains my model.\n\nUsage: mytrain [flags]", os.Stderr)
	hidden := fs.Int("hidden", 64, "width of the hidden layer") // a flag of the command's own
	if err := fs.Parse([]string{"-device", "cpu", "-lr", "0.1", "-hidden", "32"}); err != nil {
		fmt.Println("exit status", training.ParseExitCode(err)) // 0 after -h, 2 for a bad flag
		return
	}
	cfg := training.Config{Groups: f.Groups(), Settings: map[string]string{"hidden": fmt.Sprint(*hidden)}}
	f.Apply(&cfg)
	fmt.Println(cfg.Out, cfg.Device, cfg.Seed)
	fmt.Println(cfg.Settings)
	for _, g := range cfg.Groups {
		fmt.Printf("%T lr %g\n", g.Rule, g.LR)
	}
	// Output:
	// runs/mytrain cpu 1
	// map[hidden:32 lr:0.1 lr-other:0.003 r:16 seed:1]
	// optim.RSDMConfig lr 0.1
	// optim.AdamConfig lr 0.003
}
