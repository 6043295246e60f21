package device_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/orthonet/orthonet/backend"
	"github.com/orthonet/orthonet/optim"
)

// TestDeviceCPUExact checks that SGD (with momentum and weight decay),
// Adam (with a schedule) and AdamW step the unconstrained parameters on the
// CPU backend to the host's values bit for bit, and leave bit for bit the
// host's buffers: the CPU kernels run the host steppers' arithmetic
// (internal/update), not a copy of it.
func TestDeviceCPUExact(t *testing.T) {
	be := deviceBackends[0]() // the CPU backend
	defer be.Close()
	for name, groups := range deviceConfigs() {
		t.Run(name+"/float64", func(t *testing.T) { deviceExact[float64](t, be, groups) })
		t.Run(name+"/float32", func(t *testing.T) { deviceExact[float32](t, be, groups) })
	}
}

func deviceExact[T float32 | float64](t *testing.T, be backend.Backend, groups []optim.Group) {
	r := newDeviceRun[T](t, be, groups)
	for s := range 4 {
		r.step()
		if err := be.Sync(); err != nil {
			t.Fatal(err)
		}
		for i, v := range r.values {
			if deviceSpecs[i].manifold != nil {
				continue // RSDM's and RGD's Q factors are computed otherwise on a device
			}
			got := make([]T, len(v))
			if err := be.CopyOut(got, r.bufs[i][0], 0); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, v) {
				t.Fatalf("step %d: %s: %v on the device, %v on the host", s+1, deviceSpecs[i].name, got, v)
			}
		}
	}
	hs, ds := r.host.State(), r.dev.State()
	for i := range hs {
		if deviceSpecs[i].manifold == nil && fmt.Sprintf("%#v", hs[i]) != fmt.Sprintf("%#v", ds[i]) {
			t.Errorf("%s: state %+v on the device, %+v on the host", deviceSpecs[i].name, ds[i], hs[i])
		}
	}
}
