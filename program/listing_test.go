package program

import (
	"flag"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/backend/cpu"
	"github.com/orthonet/orthonet/optim"
	"github.com/orthonet/orthonet/param"
)

var listingFile = flag.String("listing", "", "TestListing writes the programs' listing to this file")

// TestListing, with -listing FILE, writes a listing of every kernel (its
// fields, each operand as its buffer and offset), parameter and buffer of
// the programs of the test models (FFN, ViT, CNN, RNN, custom) and
// Gorgonia's convnet, in both float types, on the CPU backend and on those
// moreBackends adds: a refactoring of the compiler that must not change
// what it emits compares the file before and after (docs/executor.md). The
// listing of one build must be the same on a second compile: that is what
// it asserts without the flag.
func TestListing(t *testing.T) {
	backends := append([]func() backend.Backend{func() backend.Backend { return cpu.New(cpu.Options{}) }}, moreBackends...)
	var all strings.Builder
	for bi, start := range backends {
		be := start()
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			for _, mc := range append(modelCases(), modelCase{"convnet", func(dt tensor.Dtype) (*model, error) {
				m, _ := convnet(t, 4, dt)
				return m, nil
			}}) {
				for ci, cfg := range listingConfigs() {
					first := listModel(t, be, mc, dt, cfg)
					if *listingFile == "" {
						if second := listModel(t, be, mc, dt, cfg); second != first {
							t.Errorf("%s %v on backend %d, config %d: two compiles list differently", mc.name, dt, bi, ci)
						}
						continue
					}
					fmt.Fprintf(&all, "== backend %d (%T) %s %v config %d\n%s", bi, be, mc.name, dt, ci, first)
				}
			}
		}
		be.Close()
	}
	if *listingFile != "" {
		if err := os.WriteFile(*listingFile, []byte(all.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// listingConfigs are the compiler's settings TestListing lists under: the
// defaults, and RSDM with r = 2 asking for factored gradients.
func listingConfigs() []Config {
	rsdm := groups(optim.Group{LR: 0.3, Rule: optim.RSDMConfig{SubmanifoldSize: 2, Seed: 1}}, optim.Group{Rule: optim.AdamConfig{}, LR: 0.01})
	return []Config{{}, {Groups: rsdm}}
}

// listModel compiles mc's model on be under cfg and lists its program.
func listModel(t *testing.T, be backend.Backend, mc modelCase, dt tensor.Dtype, cfg Config) string {
	m, err := mc.build(dt)
	if err != nil {
		t.Fatal(err)
	}
	if mc.name != "convnet" { // convnet's gradients are in its graph
		if _, err := G.Grad(m.loss, param.Nodes(m.params)...); err != nil {
			t.Fatal(err)
		}
	}
	p := m.compile(t, be, cfg)
	l := lister{ids: map[backend.Buffer]int{}}
	for _, pm := range p.Params() {
		fmt.Fprintf(&l.b, "param %s manifold=%v size=%d value=%s grad=%s gradA=%s gradB=%s k=%d\n", pm.Node.Name(), pm.Manifold, pm.Size,
			l.operand(pm.Value), l.operand(pm.Grad), l.operand(pm.GradA), l.operand(pm.GradB), pm.GradK)
	}
	for _, k := range p.kernels {
		l.b.WriteString(backend.Name(k))
		l.value(reflect.ValueOf(k))
		l.b.WriteByte('\n')
	}
	for i, b := range l.bufs {
		fmt.Fprintf(&l.b, "buffer b%d %v %d\n", i, b.DType(), b.Len())
	}
	return l.b.String()
}

// lister names each buffer by the order it first appears in.
type lister struct {
	b    strings.Builder
	ids  map[backend.Buffer]int
	bufs []backend.Buffer
}

func (l *lister) operand(op backend.Operand) string {
	if op.Buf == nil {
		return "-"
	}
	id, ok := l.ids[op.Buf]
	if !ok {
		id = len(l.bufs)
		l.ids[op.Buf] = id
		l.bufs = append(l.bufs, op.Buf)
	}
	return fmt.Sprintf("b%d+%d", id, op.Off)
}

// value writes v's fields, operands by their buffer.
func (l *lister) value(v reflect.Value) {
	switch {
	case v.Type() == reflect.TypeFor[backend.Operand]():
		l.b.WriteString(" " + l.operand(v.Interface().(backend.Operand)))
	case v.Kind() == reflect.Struct:
		for i := range v.NumField() {
			if !v.Type().Field(i).IsExported() {
				continue
			}
			l.b.WriteString(" " + v.Type().Field(i).Name + ":")
			l.value(v.Field(i))
		}
	case v.Kind() == reflect.Slice || v.Kind() == reflect.Array:
		l.b.WriteString(" [")
		for i := range v.Len() {
			l.value(v.Index(i))
		}
		l.b.WriteString(" ]")
	case v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface:
		if v.IsNil() {
			l.b.WriteString(" nil")
			return
		}
		l.value(v.Elem())
	default:
		fmt.Fprintf(&l.b, " %v", v.Interface())
	}
}
