package cpu

import "github.com/orthonet/orthonet/backend"

// prepareFused prepares orthonet's fused layer kernels; ok is false for any
// other kernel.
func prepareFused[T Float](b *Backend, k backend.Kernel) (f backend.Func, ok bool, err error) {
	return nil, false, nil
}
