package cuda

// Device describes a GPU as the driver reports it.
type Device struct {
	Name          string // e.g. "NVIDIA H100 80GB HBM3"
	Count         int    // CUDA devices the driver sees; the backend uses Options.Device
	Major, Minor  int    // compute capability
	TotalMemory   int64  // bytes
	DriverVersion int    // e.g. 13000 for CUDA 13.0
	HostModel     bool   // the host model of the device stands in for a GPU
}
