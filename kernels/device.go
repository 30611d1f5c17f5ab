package kernels

import "fmt"

// Device is where a backend keeps and computes the matrices, parsed once
// from a flag or a configuration.
type Device uint8

const (
	DeviceCPU  Device = iota // this package's C kernels
	DeviceCUDA               // kernels/cuda, in a binary built with the cuda tag
)

var deviceNames = [...]string{DeviceCPU: "cpu", DeviceCUDA: "cuda"}

// ParseDevice reads a device's name: cpu (also "") or cuda.
func ParseDevice(s string) (Device, error) {
	if s == "" {
		return DeviceCPU, nil
	}
	for d, name := range deviceNames {
		if s == name {
			return Device(d), nil
		}
	}
	return DeviceCPU, fmt.Errorf("unknown device %q (cpu, or cuda in a CUDA build)", s)
}

func (d Device) String() string {
	if int(d) < len(deviceNames) {
		return deviceNames[d]
	}
	return fmt.Sprintf("Device(%d)", uint8(d))
}

// MarshalText writes the device's name.
func (d Device) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads a device's name.
func (d *Device) UnmarshalText(b []byte) (err error) {
	*d, err = ParseDevice(string(b))
	return err
}

// Set and Type make a Device a command-line flag.
func (d *Device) Set(s string) error { return d.UnmarshalText([]byte(s)) }
func (d Device) Type() string        { return "device" }
