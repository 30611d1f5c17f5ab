package collectives

import (
	"fmt"

	"sancus/kernels/matrix"
)

// BlockComm moves whole blocks that live where a kernels backend keeps
// them — on a GPU, device to device (NCCL) — for the skip-broadcast of
// dense SANCUS exchanges.
type BlockComm interface {
	Name() string
	// SkipBcast makes blocks[j] equal root j's on every rank, for each
	// active j; a stale root's block stays as cached. All ranks pass the
	// same active vector.
	SkipBcast(blocks []*matrix.Dense, active []bool) error
	Close() error
}

// Mover copies a block between its host side (Data) and where a kernels
// backend keeps it; every kernels.Backend is one.
type Mover interface {
	Upload(d *matrix.Dense)
	Download(d *matrix.Dense)
}

// BlockCommOpener makes a rank's BlockComm over its rank transport c (used
// at least to bootstrap) for the backend that keeps the blocks.
type BlockCommOpener func(c Comm, m Mover) (BlockComm, error)

// blockComms are the communicators OpenBlockComm can open: host always,
// others once a binary's setup names them with UseBlockComm.
var blockComms = map[DeviceComm]BlockCommOpener{DeviceCommHost: func(c Comm, m Mover) (BlockComm, error) {
	return &hostBlocks{c: c, m: m}, nil
}}

// UseBlockComm makes OpenBlockComm(d, …) call open: a binary built with
// CUDA calls UseBlockComm(DeviceCommNCCL, nccl.OpenBlockComm) as it starts.
func UseBlockComm(d DeviceComm, open BlockCommOpener) { blockComms[d] = open }

// DeviceComm is how dense blocks move between devices, parsed once from
// a flag or a configuration. The zero value is the rank transport itself:
// no BlockComm.
type DeviceComm uint8

const (
	DeviceCommRank DeviceComm = iota // the rank transport, as every exchange by default
	DeviceCommHost                   // BlockComm through host memory and the rank transport
	DeviceCommNCCL                   // collectives/nccl, in a CUDA build
)

var deviceCommNames = [...]string{DeviceCommRank: "", DeviceCommHost: "host", DeviceCommNCCL: "nccl"}

// ParseDeviceComm reads a device communicator's name: host, nccl, or ""
// for the rank transport.
func ParseDeviceComm(s string) (DeviceComm, error) {
	for d, name := range deviceCommNames {
		if s == name {
			return DeviceComm(d), nil
		}
	}
	return DeviceCommRank, fmt.Errorf("unknown device communicator %q (host, or nccl in a CUDA build)", s)
}

func (d DeviceComm) String() string {
	if int(d) < len(deviceCommNames) {
		return deviceCommNames[d]
	}
	return fmt.Sprintf("DeviceComm(%d)", uint8(d))
}

// MarshalText writes the communicator's name.
func (d DeviceComm) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads a communicator's name.
func (d *DeviceComm) UnmarshalText(b []byte) (err error) {
	*d, err = ParseDeviceComm(string(b))
	return err
}

// Set and Type make a DeviceComm a command-line flag.
func (d *DeviceComm) Set(s string) error { return d.UnmarshalText([]byte(s)) }
func (d DeviceComm) Type() string        { return "comm" }

// OpenBlockComm opens the BlockComm of d on rank c.
func OpenBlockComm(d DeviceComm, c Comm, m Mover) (BlockComm, error) {
	if open, ok := blockComms[d]; ok {
		return open(c, m)
	}
	if d == DeviceCommNCCL {
		return nil, fmt.Errorf("device communicator nccl: this binary was built without CUDA (build it with `make cuda`)")
	}
	return nil, fmt.Errorf("unknown device communicator %v (host, or nccl in a CUDA build)", d)
}

// hostBlocks is BlockComm through host memory and the rank transport: the
// root downloads its block, the ring broadcast carries it, receivers
// upload it. On the CPU backend it is the plain skip-broadcast.
type hostBlocks struct {
	c Comm
	m Mover
}

func (h *hostBlocks) Name() string { return "host" }
func (h *hostBlocks) Close() error { return nil }

func (h *hostBlocks) SkipBcast(blocks []*matrix.Dense, active []bool) error {
	r := h.c.Rank()
	if active[r] {
		h.m.Download(blocks[r])
	}
	bufs := make([][]float32, len(blocks))
	for j, b := range blocks {
		bufs[j] = b.Data[:b.Rows*b.Cols]
	}
	if err := SkipBcast(h.c, bufs, active, Ring(0), nil); err != nil {
		return err
	}
	for j, b := range blocks {
		if active[j] && j != r {
			h.m.Upload(b)
		}
	}
	return nil
}
