package program

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"syscall"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend/cpu"
)

func TestZZKernelCPU(t *testing.T) {
	if os.Getenv("ZZ") == "" {
		t.Skip()
	}
	dt := tensor.Float32
	if os.Getenv("ZZ") == "64" {
		dt = tensor.Float64
	}
	m, masks := convnet(t, 32, dt)
	be := cpu.New(cpu.Options{Threads: 1})
	defer be.Close()
	p, err := Compile(m.g, Config{Backend: be, Outputs: []*G.Node{m.loss, m.logits}, Params: m.params, Inputs: m.inputs, Dropout: masks, DropoutSeed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Run()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	type kt struct {
		name string
		ns   float64
	}
	agg := map[string]float64{}
	var total float64
	for i, f := range p.funcs {
		var r0, r1 syscall.Rusage
		syscall.Getrusage(1, &r0)
		const n = 10
		for range n {
			f()
		}
		syscall.Getrusage(1, &r1)
		ns := float64(r1.Utime.Nano()-r0.Utime.Nano()+r1.Stime.Nano()-r0.Stime.Nano()) / n
		agg[describe(p.kernels[i])] += ns
		total += ns
	}
	var ks []kt
	for k, v := range agg {
		ks = append(ks, kt{k, v})
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].ns > ks[j].ns })
	fmt.Printf("total %.2f ms\n", total/1e6)
	for _, k := range ks[:min(25, len(ks))] {
		fmt.Printf("%7.3f ms %s\n", k.ns/1e6, k.name)
	}
}
