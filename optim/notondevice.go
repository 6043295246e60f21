package optim

import "errors"

// ErrNotOnDevice is wrapped by the error of a setting that the steppers of
// a device (Options.Device) do not run and the host's do, such as gradient
// clipping or a rule without a device stepper: a caller may step the same
// parameters on the host instead.
var ErrNotOnDevice = errors.New("optim: a setting the device's steppers do not run")

// NotOnDevice returns an error that says msg and wraps ErrNotOnDevice: a
// Device's refusal of a setting.
func NotOnDevice(msg string) error { return notOnDevice(msg) }

type notOnDevice string

func (e notOnDevice) Error() string { return string(e) }
func (e notOnDevice) Unwrap() error { return ErrNotOnDevice }
