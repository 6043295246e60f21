package training

import (
	"errors"
	"fmt"
	"io"
	"strings"

	cudabackend "github.com/orthonet/orthonet/backend/cuda"
)

// selectDevice settles Device before a run: auto takes a usable GPU (one
// the CUDA backend starts on) and otherwise the CPU, cuda the GPU or an
// error naming what is missing (the library and versions searched, the
// driver, the device). It says in one line which device the run uses and
// why, unless that is the CPU by Device cpu. Data-parallel training takes
// the CPU. askedDevice keeps the setting: auto later takes the CPU where
// the device's optimizer refuses a setting.
func selectDevice(c *Config) error {
	c.askedDevice = c.Device
	if c.Device == "cpu" || (c.Device == "auto" && c.Engine == "tape") {
		c.Device = "cpu"
		return nil
	}
	if c.Comm != nil {
		if c.Device == "cuda" {
			return &SettingError{errors.New("-device cuda: data-parallel training runs on the CPU only; use -device cpu or auto")}
		}
		c.Device = "cpu"
		fmt.Fprintln(c.Log, "train: device cpu (-dist mpi trains on the CPU)")
		return nil
	}
	var err error
	c.Device, err = SelectDevice(c.Device, c.Log)
	return err
}

// SelectDevice settles a device setting: "auto" takes a usable NVIDIA GPU
// (one the CUDA backend starts on) and otherwise the CPU, "cuda" the GPU or
// an error naming what is missing (the library and versions searched, the
// driver, the device), "cpu" the CPU. It returns "cuda" or "cpu" and says
// on log in one line which device it takes and why, unless that is the CPU
// by "cpu". A stand-in setting that cannot start is a SettingError.
func SelectDevice(device string, log io.Writer) (string, error) {
	if device == "cpu" {
		return "cpu", nil
	}
	be, err := cudabackend.New(cudabackend.Options{})
	if err == nil {
		name := be.(interface{ Name() string }).Name()
		err = be.Close()
		if err == nil {
			fmt.Fprintf(log, "train: device %s\n", name)
			return "cuda", nil
		}
	}
	why := strings.TrimPrefix(err.Error(), "cuda: ")
	if errors.Is(err, cudabackend.ErrStandIn) {
		// A setting to fix, not a machine without a GPU: auto does not
		// fall back to the CPU over it.
		return "", &SettingError{fmt.Errorf("-device %s: %s", device, why)}
	}
	if device == "cuda" {
		return "", errors.New("-device cuda: " + why)
	}
	fmt.Fprintf(log, "train: device cpu (no usable GPU: %s)\n", why)
	return "cpu", nil

}
