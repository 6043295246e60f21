package program

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/internal/testval"
	"github.com/orthonet/orthonet/nn"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
	"github.com/orthonet/orthonet/program/lower"
)

// convnet builds the network of gorgonia's examples/convnet for a batch in
// dt: 28x28 images of one channel, three 3x3 convolutions (padding 1) of
// 32, 64 and 128 filters, each with ReLU, 2x2 max pooling and dropout 0.2,
// a 1152 x 625 dense layer with ReLU and dropout 0.55, a 625 x 10 one,
// softmax, and the example's loss -mean(log(softmax) y). Its dropout masks
// are orthonet's (nn.Dropout, drawn by the program), not gorgonia's
// dropoutOp. The images are drawn from N(0, 1), the labels fixed. Its
// gradients are in the graph.
func convnet(tb testing.TB, batch int, dt tensor.Dtype) (m *model, masks []Dropout) {
	m, masks = convnetGraph(tb, batch, dt)
	if _, err := G.Grad(m.loss, param.Nodes(m.params)...); err != nil {
		tb.Fatal(err)
	}
	return m, masks
}

// convnetGraph is convnet without the gradients.
func convnetGraph(tb testing.TB, batch int, dt tensor.Dtype) (m *model, masks []Dropout) {
	g := G.NewGraph()
	rng := rand.New(rand.NewPCG(7, 31))
	x := G.NewTensor(g, dt, 4, G.WithShape(batch, 1, 28, 28), G.WithName("x"), G.WithValue(fill(dt, []int{batch, 1, 28, 28}, 1)))
	y := G.NewMatrix(g, dt, G.WithShape(batch, 10), G.WithName("y"), G.WithValue(onehotValue(dt, batch, 10, 3)))
	weight := func(name string, shape ...int) *G.Node {
		fanIn := 1
		for _, d := range shape[1:] {
			fanIn *= d
		}
		if len(shape) == 2 {
			fanIn = shape[0]
		}
		v := make([]float64, numel(shape))
		for i := range v {
			v[i] = rng.NormFloat64() / float64(fanIn)
		}
		return G.NewTensor(g, dt, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(testval.Tensor(dt, shape, v)))
	}
	w0, w1, w2 := weight("w0", 32, 1, 3, 3), weight("w1", 64, 32, 3, 3), weight("w2", 128, 64, 3, 3)
	w3, w4 := weight("w3", 128*3*3, 625), weight("w4", 625, 10)
	d02, d055 := &nn.Dropout{P: 0.2}, &nn.Dropout{P: 0.55}
	layer := func(in, w *G.Node) *G.Node {
		c := G.Must(G.Conv2d(in, w, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
		p := G.Must(G.MaxPool2D(G.Must(G.Rectify(c)), tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
		return p
	}
	l0 := G.Must(d02.Apply(layer(x, w0)))
	l1 := G.Must(d02.Apply(layer(l0, w1)))
	p2 := layer(l1, w2)
	s := p2.Shape()
	l2 := G.Must(d02.Apply(G.Must(G.Reshape(p2, tensor.Shape{s[0], s[1] * s[2] * s[3]}))))
	l3 := G.Must(d055.Apply(G.Must(G.Rectify(G.Must(G.Mul(l2, w3))))))
	logits := G.Must(G.Mul(l3, w4))
	out := G.Must(G.SoftMax(logits))
	loss := G.Must(G.Neg(G.Must(G.Mean(G.Must(G.HadamardProd(G.Must(G.Log(out)), y))))))
	params := []param.Param{param.Plain(w0), param.Plain(w1), param.Plain(w2), param.OnStiefel(w3), param.Plain(w4)}
	for _, d := range []*nn.Dropout{d02, d055} {
		for _, n := range d.Masks() {
			masks = append(masks, Dropout{Node: n, P: d.P})
		}
	}
	m = &model{g: g, inputs: []*G.Node{x, y}, logits: logits, loss: loss, params: params,
		masks: func(r *rand.Rand) { d02.Fill(r); d055.Fill(r) }}
	return m, masks
}

// BenchmarkConvnet times one forward and backward pass (no optimizer step)
// of gorgonia's examples/convnet network at batch 32 on the tape machine
// and as a compiled program on the CPU backend (its default threads, and
// one), float32 and float64. Besides the time it reports the process's CPU
// time per pass (cpu-ms/op), which on a shared machine says more about the
// work than the time does.
func BenchmarkConvnet(b *testing.B) {
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		b.Run(fmt.Sprintf("%v/tape", dt), func(b *testing.B) {
			m, _ := convnet(b, 32, dt)
			m.masks(rand.New(rand.NewPCG(1, 1)))
			timeCPU(b, tapeRun(b, m))
		})
		for _, threads := range []int{0, 1} {
			b.Run(fmt.Sprintf("%v/program-threads%d", dt, threads), func(b *testing.B) {
				m, masks := convnet(b, 32, dt)
				be := cpu.New(cpu.Options{Threads: threads})
				defer be.Close()
				p := m.compile(b, be, Config{Dropout: masks, DropoutSeed: 1})
				timeCPU(b, p.Run)
			})
		}
	}
}

// BenchmarkConvnetStep times a training step (forward, backward and the
// optimizer's step) of gorgonia's examples/convnet, float64, batch 32, as a
// model of one's own trains: RSDM-P (r = 300) on its 1152 x 625 dense
// weight and Adam on the rest, on the tape machine with optim's Solver and
// as a compiled program with its Solver, the program given the groups
// (Config.Groups, as package training does) or not:
//
//	go test ./program -run '^$' -bench ConvnetStep
func BenchmarkConvnetStep(b *testing.B) {
	groups := []optim.Group{
		{Select: optim.Param.Constrained, LR: 0.1, Rule: optim.RSDMConfig{SubmanifoldSize: 300, Seed: 1}},
		{Rule: optim.AdamConfig{}, LR: 1e-3},
	}
	for _, v := range []struct {
		name string
		side func(*model) (side, error)
	}{
		{"tape", onTape(sideConfig{groups: groups})},
		{"program", compiled(cpu.New(cpu.Options{}), sideConfig{groups: groups, ask: true})},
		{"program-no-groups", compiled(cpu.New(cpu.Options{}), sideConfig{groups: groups})},
	} {
		b.Run(v.name, func(b *testing.B) {
			m, _ := convnetGraph(b, 32, tensor.Float64)
			if err := m.params[3].Orthonormalize(); err != nil { // the dense weight, for RSDM
				b.Fatal(err)
			}
			s, err := v.side(m)
			if err != nil {
				b.Fatal(err)
			}
			defer s.close()
			timeCPU(b, func() error {
				if err := s.run(); err != nil {
					return err
				}
				return s.step()
			})
		})
	}
}

// timeCPU runs f b.N times, timed, and reports the process's CPU time (user
// and system, all threads) per run.
func timeCPU(b *testing.B, f func() error) {
	var r0, r1 syscall.Rusage
	b.ResetTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	for i := 0; i < b.N; i++ {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	b.StopTimer()
	cpu := time.Duration(r1.Utime.Nano() - r0.Utime.Nano() + r1.Stime.Nano() - r0.Stime.Nano())
	b.ReportMetric(ms(cpu)/float64(b.N), "cpu-ms/op")
}

// BenchmarkConvnetProfile runs the compiled convnet pass with
// Config.Profile and logs where its time goes, kernel by kernel, with the
// convolution kernels' GFLOP/s beside those of a plain GEMM of the same
// sizes (F x B OutH OutW x C KH KW, the CPU backend's Gemm on all its
// threads) measured in the same run. Run it with -v (go test truncates a
// benchmark's log otherwise) and -benchtime of at least 2x:
//
//	go test -tags openblas ./program -run '^$' -bench ConvnetProfile -benchtime 20x -v
func BenchmarkConvnetProfile(b *testing.B) {
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		b.Run(dt.String(), func(b *testing.B) {
			m, masks := convnet(b, 32, dt)
			be := cpu.New(cpu.Options{})
			defer be.Close()
			p := m.compile(b, be, Config{Dropout: masks, DropoutSeed: 1, Profile: true})
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := p.Run(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if b.N == 1 {
				return // the benchmark's probe run: too few to log
			}
			prof, runs := p.Profile()
			var total time.Duration
			for _, k := range prof {
				total += k.PerRun
			}
			var sb strings.Builder
			fmt.Fprintf(&sb, "%v, %d runs, %.2f ms a run in kernels\n", dt, runs, ms(total))
			gemms := map[[3]int]float64{} // GFLOP/s of a plain GEMM of each size
			bdt, _ := lower.DTypeOf(dt)
			for _, k := range p.kernels {
				if g, f, ok := convOf(k); ok {
					oh, ow := g.Out()
					size := [3]int{f, g.B * oh * ow, g.Patch()}
					if _, done := gemms[size]; !done {
						gemms[size] = gemmRate(b, be, bdt, size)
					}
				}
			}
			for _, k := range prof {
				fmt.Fprintf(&sb, "%8.3f ms %5.1f%% %3dx %s", ms(k.PerRun), 100*float64(k.PerRun)/float64(total), k.Count, k.Kernel)
				for _, kern := range p.kernels {
					g, f, ok := convOf(kern)
					if !ok || describe(kern) != k.Kernel {
						continue
					}
					oh, ow := g.Out()
					size := [3]int{f, g.B * oh * ow, g.Patch()}
					flops := 2 * float64(size[0]*size[1]*size[2]) * float64(k.Count)
					fmt.Fprintf(&sb, "  %.1f GFLOP/s (a plain %dx%dx%d GEMM: %.1f)", flops/k.PerRun.Seconds()/1e9, size[0], size[1], size[2], gemms[size])
					break
				}
				sb.WriteByte('\n')
			}
			b.Log(sb.String())
		})
	}
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// convOf returns a fused convolution kernel's geometry and filters.
func convOf(k backend.Kernel) (backend.ConvGeom, int, bool) {
	switch c := k.(type) {
	case backend.Conv:
		return c.Geom, c.F, true
	case backend.ConvGradInput:
		return c.Geom, c.F, true
	case backend.ConvGradFilter:
		return c.Geom, c.F, true
	}
	return backend.ConvGeom{}, 0, false
}

// gemmRate times the CPU backend's Gemm of an M x K and a K x N matrix on
// be and returns its GFLOP/s.
func gemmRate(b *testing.B, be backend.Backend, dt backend.DType, size [3]int) float64 {
	m, n, k := size[0], size[1], size[2]
	var bufs [3]backend.Buffer
	for i, l := range []int{m * k, k * n, m * n} {
		buf, err := be.Alloc(dt, l)
		if err != nil {
			b.Fatal(err)
		}
		defer be.Free(buf)
		bufs[i] = buf
	}
	f, err := be.Prepare(backend.Gemm{M: m, N: n, K: k, Alpha: 1, A: backend.At(bufs[0], 0), B: backend.At(bufs[1], 0), C: backend.At(bufs[2], 0), LDA: k, LDB: n, LDC: n})
	if err != nil {
		b.Fatal(err)
	}
	runs := 0
	start := time.Now()
	for time.Since(start) < 200*time.Millisecond || runs < 5 {
		if err := f(); err != nil {
			b.Fatal(err)
		}
		runs++
	}
	return 2 * float64(m*n*k) * float64(runs) / time.Since(start).Seconds() / 1e9
}
