package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/data"
	"github.com/orthonet/orthonet/manifold"
	"github.com/orthonet/orthonet/models"
	"github.com/orthonet/orthonet/nn"
	"github.com/orthonet/orthonet/optim"
)

// interruptedError reports a run stopped by a signal at a step boundary.
type interruptedError struct {
	epoch, step int
	dir         string
}

func (e *interruptedError) Error() string {
	return fmt.Sprintf("interrupted at epoch %d, step %d; metrics so far are in %s", e.epoch+1, e.step, e.dir)
}

// metric is one row of metrics.csv.
type metric struct {
	kind           string // train or test
	epoch, step    int
	seconds        float64
	loss, accuracy float64
	feasibility    float64 // largest ||W^T W - I||_F, test rows only
}

// imageSize is the side the paper resizes each data set to: 32 for the ViT,
// and for the FFN 32 (MNIST, 1024 inputs) or 20 (CIFAR-10, 1200 inputs).
func imageSize(model, dataset string) int {
	if model == "ffn" && dataset == "cifar10" {
		return 20
	}
	return 32
}

func loadData(ctx context.Context, c config, w io.Writer) (train, test *data.Set, err error) {
	dir := c.dataDir
	if dir == "" {
		dir = data.DefaultDir(c.dataset)
	}
	if c.download {
		fmt.Fprintf(w, "downloading %s into %s\n", c.dataset, dir)
		if err := data.Download(ctx, nil, c.dataset, dir); err != nil {
			return nil, nil, err
		}
	}
	if train, err = data.Load(c.dataset, dir, true); err != nil {
		return nil, nil, fmt.Errorf("%w (use -data DIR, or -download for mnist and cifar10)", err)
	}
	if test, err = data.Load(c.dataset, dir, false); err != nil {
		return nil, nil, err
	}
	side := imageSize(c.model, c.dataset)
	train = train.Limit(c.limitTrain).Resize(side, side)
	test = test.Limit(c.limitTest).Resize(side, side)
	return train, test, nil
}

// newRunDir creates a fresh folder under out, never reusing an earlier run's.
func newRunDir(out string) (string, error) {
	base := filepath.Join(out, "run-"+time.Now().Format("20060102-150405"))
	dir := base
	for k := 2; ; k++ {
		err := os.MkdirAll(filepath.Dir(dir), 0o755)
		if err == nil {
			err = os.Mkdir(dir, 0o755)
		}
		if err == nil {
			return dir, nil
		}
		if !os.IsExist(err) {
			return "", fmt.Errorf("creating run folder: %w", err)
		}
		dir = fmt.Sprintf("%s-%d", base, k)
	}
}

func solverConfig(c config) optim.SolverConfig {
	sc := optim.SolverConfig{
		RSDM:  optim.RSDMConfig{LR: c.lr, SubmanifoldSize: c.r, Seed: c.seed},
		RGD:   optim.RGDConfig{LR: c.lr, Momentum: c.momentum},
		Other: optim.OtherConfig{LR: c.lrOther, Momentum: c.momentum},
	}
	if c.optim == "rgd" {
		sc.Method = optim.MethodRGD
	}
	if c.sampling == "orth" {
		sc.RSDM.Sampling = optim.Orthogonal
	}
	if c.other == "adam" {
		sc.Other.Rule = optim.Adam
		sc.Other.Momentum = 0
	}
	return sc
}

func run(ctx context.Context, c config, w io.Writer) error {
	train, test, err := loadData(ctx, c, w)
	if err != nil {
		return err
	}
	if train.N < c.batch {
		return fmt.Errorf("%d training examples, fewer than one batch of %d", train.N, c.batch)
	}
	rng := rand.New(rand.NewPCG(c.seed, 0x747261696e))
	maskRNG := rand.New(rand.NewPCG(c.seed, 0x64726f70))

	// Training graph: fixed batch, forward and backward.
	g := G.NewGraph()
	net, err := buildNet(c, g, c.batch, train, true, rng)
	if err != nil {
		return err
	}
	yb := make([]float32, c.batch*train.Classes)
	y := G.NewMatrix(g, tensor.Float32, G.WithShape(c.batch, train.Classes), G.WithName("y"), G.WithValue(tensor.New(tensor.WithShape(c.batch, train.Classes), tensor.WithBacking(yb))))
	logits := net.logits
	loss, err := nn.CrossEntropy(logits, y)
	if err != nil {
		return err
	}
	if _, err := G.Grad(loss, net.Nodes()...); err != nil {
		return fmt.Errorf("building gradients: %w", err)
	}
	vm := G.NewTapeMachine(g, G.BindDualValues(net.Nodes()...))
	defer vm.Close()
	ev, err := newEvaluator(c, net, test)
	if err != nil {
		return err
	}
	defer ev.vm.Close()

	solver, err := optim.NewSolver(solverConfig(c))
	if err != nil {
		return err
	}
	params := net.Params()
	images := make([]float32, c.batch*train.Dim())
	loader, err := data.NewLoader(train, c.batch, c.seed)
	if err != nil {
		return err
	}
	dir, err := newRunDir(c.out)
	if err != nil {
		return err
	}
	steps := train.N / c.batch // the last partial batch is dropped
	fmt.Fprintf(w, "training %s on %s (%d train, %d test images of %dx%dx%d), %s/%s r=%d lr=%g, %s lr=%g, batch %d, %d epochs, BLAS %s\nrun folder: %s\n",
		c.model, c.dataset, train.N, test.N, train.C, train.H, train.W, c.optim, c.sampling, c.r, c.lr, c.other, c.lrOther, c.batch, c.epochs, blasName, dir)

	var metrics []metric
	tty := term.IsTerminal(int(os.Stdout.Fd()))
	labels := make([]int, c.batch)
	start := time.Now()
	step := 0
	evaluate := func(epoch int) (metric, error) {
		m, err := ev.run()
		if err != nil {
			return m, err
		}
		m.kind, m.epoch, m.step, m.seconds = "test", epoch+1, step, time.Since(start).Seconds()
		m.feasibility = maxFeasibility(net.Orthogonal())
		metrics = append(metrics, m)
		fmt.Fprintf(w, "epoch %d step %d: test loss %.4f, test accuracy %.2f%%, max ||W^T W - I||_F %.2e\n", epoch+1, step, m.loss, 100*m.accuracy, m.feasibility)
		return m, nil
	}
	var final metric
	for epoch := 0; epoch < c.epochs; epoch++ {
		loader.SetEpoch(epoch)
		var bar *progressbar.ProgressBar
		if tty {
			bar = progressbar.NewOptions(steps, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionShowCount(),
				progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionSetWidth(30),
				progressbar.OptionSetDescription(fmt.Sprintf("epoch %d/%d", epoch+1, c.epochs)))
		}
		var sumLoss, sumAcc float64
		var count int
		logEvery := max(1, steps/100)
		epochStart := time.Now()
		for s := 0; s < steps; s++ {
			if err := ctx.Err(); err != nil {
				writeOutputs(dir, metrics, w)
				return &interruptedError{epoch: epoch, step: step, dir: dir}
			}
			n, err := loader.Next(images, labels)
			if err != nil {
				return err
			}
			if n < c.batch {
				break
			}
			net.fill(images, c.batch)
			if net.vit != nil {
				net.vit.FillMasks(maskRNG)
			}
			if err := nn.OneHot(yb, labels, train.Classes); err != nil {
				return err
			}
			if err := vm.RunAll(); err != nil {
				return fmt.Errorf("step %d: %w", step, err)
			}
			lv := float64(loss.Value().Data().(float32))
			if math.IsNaN(lv) || math.IsInf(lv, 0) {
				writeOutputs(dir, metrics, w)
				return fmt.Errorf("epoch %d, step %d: the training loss is %v; stopping rather than training on garbage (try a smaller -lr or -lr-other)", epoch+1, step, lv)
			}
			acc, err := nn.Accuracy(logits.Value().Data().([]float32), labels, train.Classes)
			if err != nil {
				return err
			}
			if err := solver.Step(params); err != nil {
				return fmt.Errorf("step %d: %w", step, err)
			}
			vm.Reset()
			step++
			sumLoss += lv
			sumAcc += acc
			count++
			if step%logEvery == 0 {
				secs := time.Since(start).Seconds()
				metrics = append(metrics, metric{kind: "train", epoch: epoch + 1, step: step, seconds: secs, loss: sumLoss / float64(count), accuracy: sumAcc / float64(count)})
				rate := float64((s+1)*c.batch) / time.Since(epochStart).Seconds()
				desc := fmt.Sprintf("epoch %d/%d loss %.4f acc %.1f%% %.0f samples/s", epoch+1, c.epochs, sumLoss/float64(count), 100*sumAcc/float64(count), rate)
				if bar != nil {
					bar.Describe(desc)
				} else if step%max(1, steps/10) < logEvery {
					fmt.Fprintf(w, "%s (step %d/%d)\n", desc, s+1, steps)
				}
				sumLoss, sumAcc, count = 0, 0, 0
			}
			if bar != nil {
				_ = bar.Add(1)
			}
			if c.evalEvery > 0 && step%c.evalEvery == 0 {
				if final, err = evaluate(epoch); err != nil {
					return err
				}
			}
		}
		if bar != nil {
			_ = bar.Finish()
			fmt.Fprintln(os.Stderr)
		}
		if c.evalEvery == 0 || step%c.evalEvery != 0 {
			if final, err = evaluate(epoch); err != nil {
				return err
			}
		}
	}
	writeOutputs(dir, metrics, w)
	fmt.Fprintf(w, "test accuracy: %.2f%%\n", 100*final.accuracy)
	for _, n := range net.Orthogonal() {
		fmt.Fprintf(w, "||W^T W - I||_F of %s: %.2e\n", n.Name(), feasibility(n))
	}
	if c.minAccuracy > 0 && 100*final.accuracy < c.minAccuracy {
		return fmt.Errorf("test accuracy %.2f%% is below -min-accuracy %.2f%%", 100*final.accuracy, c.minAccuracy)
	}
	return nil
}

func feasibility(n *G.Node) float64 {
	s := n.Shape()
	st, err := manifold.NewStiefel[float32](s[0], s[1])
	if err != nil {
		return math.NaN()
	}
	return st.Feasibility(n.Value().Data().([]float32))
}

func maxFeasibility(ns G.Nodes) float64 {
	var worst float64
	for _, n := range ns {
		worst = max(worst, feasibility(n))
	}
	return worst
}

// evaluator runs a forward-only copy of the model over the test set.
type evaluator struct {
	set   *data.Set
	batch int
	net   *network
	vm    G.VM
}

func newEvaluator(c config, trained *network, set *data.Set) (*evaluator, error) {
	if set.N == 0 {
		return nil, fmt.Errorf("the test set is empty")
	}
	b := min(500, set.N)
	if c.model == "vit" {
		b = min(100, set.N)
	}
	g := G.NewGraph()
	net, err := buildNet(c, g, b, set, false, rand.New(rand.NewPCG(0, 0)))
	if err != nil {
		return nil, err
	}
	if err := models.Share(net.Nodes(), trained.Nodes()); err != nil {
		return nil, err
	}
	return &evaluator{set: set, batch: b, net: net, vm: G.NewTapeMachine(g)}, nil
}

// run returns the test loss and accuracy; the last chunk is zero-padded and
// its padding ignored.
func (ev *evaluator) run() (metric, error) {
	s := ev.set
	d, k := s.Dim(), s.Classes
	var correct int
	var lossSum float64
	for lo := 0; lo < s.N; lo += ev.batch {
		n := min(ev.batch, s.N-lo)
		ev.net.fill(s.X[lo*d:(lo+n)*d], n)
		if err := ev.vm.RunAll(); err != nil {
			return metric{}, fmt.Errorf("evaluating: %w", err)
		}
		z := ev.net.logits.Value().Data().([]float32)
		for i := 0; i < n; i++ {
			row := z[i*k : (i+1)*k]
			best, m := 0, float64(row[0])
			for j, v := range row {
				if float64(v) > m {
					best, m = j, float64(v)
				}
			}
			var se float64
			for _, v := range row {
				se += math.Exp(float64(v) - m)
			}
			y := int(s.Y[lo+i])
			lossSum += m + math.Log(se) - float64(row[y])
			if best == y {
				correct++
			}
		}
		ev.vm.Reset()
	}
	return metric{loss: lossSum / float64(s.N), accuracy: float64(correct) / float64(s.N)}, nil
}

func writeOutputs(dir string, metrics []metric, w io.Writer) {
	path := filepath.Join(dir, "metrics.csv")
	if err := writeCSV(path, metrics); err != nil {
		fmt.Fprintln(w, "warning: writing metrics:", err)
	}
	png := filepath.Join(dir, "metrics.png")
	if err := plotMetrics(png, metrics); err != nil {
		fmt.Fprintln(w, "warning: plotting metrics:", err)
	}
	fmt.Fprintf(w, "metrics: %s, %s\n", path, png)
}

func writeCSV(path string, metrics []metric) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	cw := csv.NewWriter(f)
	_ = cw.Write([]string{"kind", "epoch", "step", "seconds", "loss", "accuracy", "max_feasibility"})
	for _, m := range metrics {
		_ = cw.Write([]string{m.kind, strconv.Itoa(m.epoch), strconv.Itoa(m.step), strconv.FormatFloat(m.seconds, 'f', 3, 64),
			strconv.FormatFloat(m.loss, 'g', 6, 64), strconv.FormatFloat(m.accuracy, 'g', 6, 64), strconv.FormatFloat(m.feasibility, 'g', 3, 64)})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
