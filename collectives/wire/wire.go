// Package wire encodes float32 blocks for the network in fewer bits: bf16,
// or per-row affine integers of 8, 4 or 2 bits with stochastic rounding.
//
// An integer row is sent as its offset and step (two bf16 values, 4 bytes)
// and its values packed b bits each: x ≈ offset + q·step, q in 0..2^b−1.
// Rounding is stochastic and keyed by a caller-given seed per row, so every
// encoding is reproducible and unbiased, and whoever decodes a row — every
// receiver, and its owner — gets the very same values.
package wire

import (
	"fmt"
	"math"
	"sancus/kernels/matrix"
	"strconv"
	"strings"
)

// Bits of the formats; Auto lets the owner choose per block.
const (
	FP32 = 32
	BF16 = 16
	Auto = 0
)

// Widths an automatic choice picks from, fewest first.
var Widths = []int{2, 4, 8, BF16, FP32}

// Format is how a block travels: its value is its bits per value (FP32,
// BF16, 8, 4 or 2), or Auto (the owner picks per block). Parsed once from a
// flag or a configuration, it is asked what it implies.
type Format int

// AsForward is a gradient format that was not given: the gradient blocks
// go as the forward ones (and a forward format that was not given is
// FP32). It reads and writes as "".
const AsForward Format = -1

// ParseFormat reads a format name in any case: fp32, bf16, int8, int4,
// int2 or auto; "" is AsForward.
func ParseFormat(s string) (Format, error) {
	l := strings.ToLower(s)
	switch l {
	case "":
		return AsForward, nil
	case "fp32", "f32":
		return FP32, nil
	case "bf16":
		return BF16, nil
	case "auto":
		return Auto, nil
	case "int8":
		return 8, nil
	case "int4":
		return 4, nil
	case "int2":
		return 2, nil
	}
	return AsForward, fmt.Errorf("unknown wire format %q (fp32, bf16, int8, int4, int2, auto)", s)
}

func (f Format) String() string {
	switch f {
	case AsForward:
		return ""
	case FP32:
		return "fp32"
	case BF16:
		return "bf16"
	case Auto:
		return "auto"
	}
	return "int" + strconv.Itoa(int(f))
}

// MarshalText writes the format's name, as configurations have always held it.
func (f Format) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

// UnmarshalText reads a format's name.
func (f *Format) UnmarshalText(b []byte) (err error) {
	*f, err = ParseFormat(string(b))
	return err
}

// Set and Type make a Format a command-line flag.
func (f *Format) Set(s string) error { return f.UnmarshalText([]byte(s)) }
func (f Format) Type() string        { return "format" }

// Or is f, or d where f is AsForward.
func (f Format) Or(d Format) Format {
	if f == AsForward {
		return d
	}
	return f
}

// Bits is the width a block of this format travels in (Auto: 0, chosen
// per block).
func (f Format) Bits() int { return int(f.Or(FP32)) }

// Quantized: narrower than float32.
func (f Format) Quantized() bool { return f.Bits() != FP32 }

// IsAuto: the owner picks each block's width.
func (f Format) IsAuto() bool { return f == Auto }

// Name is the format's name of a width.
func Name(bits int) string { return Format(bits).String() }

// RowBytes is the size of one encoded row of width values.
func RowBytes(bits, width int) int {
	switch bits {
	case FP32:
		return 4 * width
	case BF16:
		return 2 * width
	}
	return 4 + (width*bits+7)/8
}

// Seed keys the stochastic rounding of one row: the same (stream, row)
// always rounds the same way. Seed(s, r) = SeedOf(s, RowHash(r)), so a
// caller can hash its rows once.
func Seed(stream, row uint64) uint64 { return SeedOf(stream, RowHash(row)) }

// RowHash is the part of a row's seed that depends on the row alone.
func RowHash(row uint64) uint64 { return mix(row + 0x9e3779b97f4a7c15) }

// SeedOf is Seed from a row's hash.
func SeedOf(stream, rowHash uint64) uint64 { return mix(stream ^ rowHash) }

func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Encode packs the rows of x (row-major, width values each) into dst
// (len(x)/width · RowBytes). seed(r) keys row r's rounding.
func Encode(dst []byte, x []float32, width, bits int, seed func(r int) uint64) {
	rb := RowBytes(bits, width)
	for r := 0; r*width < len(x); r++ {
		encodeRow(dst[r*rb:(r+1)*rb], x[r*width:(r+1)*width], bits, seed(r))
	}
}

// Decode unpacks src into dst (rows of width values); with add it adds the
// decoded values to dst instead (a delta against the copy dst holds).
func Decode(dst []float32, src []byte, width, bits int, add bool) {
	rb := RowBytes(bits, width)
	for r := 0; r*width < len(dst); r++ {
		decodeRow(dst[r*width:(r+1)*width], src[r*rb:(r+1)*rb], bits, add)
	}
}

func encodeRow(dst []byte, x []float32, bits int, seed uint64) {
	switch bits {
	case FP32:
		for i, v := range x {
			putU32(dst[4*i:], math.Float32bits(v))
		}
		return
	case BF16:
		for i, v := range x {
			putU16(dst[2*i:], bf16Nearest(v))
		}
		return
	}
	lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
	for _, v := range x {
		lo, hi = min(lo, v), max(hi, v)
	}
	levels := float32(int(1)<<bits - 1)
	if len(x) == 0 {
		lo, hi = 0, 0
	}
	// The header is bf16: round the offset down and the step up, so
	// offset + levels·step still covers the row. Zeros are made positive so
	// it does not depend on which signed zero the scan met first.
	lo, hi = lo+0, hi+0
	offBits := bf16Down(lo)
	off := fromBF16(offBits)
	stepBits := bf16Up((hi - off) / levels)
	step := fromBF16(stepBits)
	putU16(dst, offBits)
	putU16(dst[2:], stepBits)
	body := dst[4:]
	clear(body)
	if step == 0 {
		return
	}
	inv := 1 / step // a product, not a quotient per value: the C kernel matches it
	k := uint32(seed|1) ^ uint32((seed|1)>>32)
	for i, v := range x {
		q := int32(float32((v-off)*inv) + uniform(k, i)) // ≥ 0: truncation is floor
		q = min(max(q, 0), int32(levels))
		bit := i * bits
		body[bit/8] |= byte(q << (bit % 8))
	}
}

// uniform is value i's rounding draw in [0, 1) for a row keyed k: a 32-bit
// avalanche hash of (k, i), independent per value so the C kernel's loop
// vectorizes.
func uniform(k uint32, i int) float32 {
	return float32(matrix.Hash32(k, uint32(i))>>8) * (1.0 / (1 << 24))
}

func decodeRow(dst []float32, src []byte, bits int, add bool) {
	switch bits {
	case FP32:
		for i := range dst {
			v := math.Float32frombits(getU32(src[4*i:]))
			if add {
				v += dst[i]
			}
			dst[i] = v
		}
		return
	case BF16:
		for i := range dst {
			v := fromBF16(getU16(src[2*i:]))
			if add {
				v += dst[i]
			}
			dst[i] = v
		}
		return
	}
	off, step := fromBF16(getU16(src)), fromBF16(getU16(src[2:]))
	body := src[4:]
	mask, per := byte(1)<<bits-1, 8/bits
	for i := range dst {
		q := body[i/per] >> (uint(i%per) * uint(bits)) & mask
		v := off + float32(q)*step
		if add {
			v += dst[i]
		}
		dst[i] = v
	}
}

// RelError is ‖decode(encode(x)) − x‖ / ‖x‖ for the given width of bits.
func RelError(x []float32, width, bits int, seed func(r int) uint64) float64 {
	if bits == FP32 || len(x) == 0 {
		return 0
	}
	buf := make([]byte, RowBytes(bits, width))
	row := make([]float32, width)
	var num, den float64
	for r := 0; r*width < len(x); r++ {
		xr := x[r*width : (r+1)*width]
		encodeRow(buf, xr, bits, seed(r))
		decodeRow(row, buf, bits, false)
		for i, v := range xr {
			d := float64(row[i] - v)
			num += d * d
			den += float64(v) * float64(v)
		}
	}
	if den == 0 {
		return math.Sqrt(num)
	}
	return math.Sqrt(num / den)
}

// bf16 helpers: nearest (ties to even), and rounded toward −∞ or +∞.
func bf16Nearest(v float32) uint16 {
	b := math.Float32bits(v)
	if v != v { // NaN stays NaN
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

func bf16Down(v float32) uint16 {
	t := uint16(math.Float32bits(v) >> 16)
	if fromBF16(t) > v {
		return nextBF16(t, false)
	}
	return t
}

func bf16Up(v float32) uint16 {
	t := uint16(math.Float32bits(v) >> 16)
	if fromBF16(t) < v {
		return nextBF16(t, true)
	}
	return t
}

// nextBF16 is the neighbour of t toward +∞ (up) or −∞.
func nextBF16(t uint16, up bool) uint16 {
	neg := t&0x8000 != 0
	switch {
	case t&0x7fff == 0 && up: // ±0 → smallest positive
		return 1
	case t&0x7fff == 0:
		return 0x8001
	case up != neg: // away from zero in magnitude
		return t + 1
	default:
		return t - 1
	}
}

func fromBF16(t uint16) float32 { return math.Float32frombits(uint32(t) << 16) }

func putU16(b []byte, v uint16) { b[0], b[1] = byte(v), byte(v>>8) }
func getU16(b []byte) uint16    { return uint16(b[0]) | uint16(b[1])<<8 }
func putU32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}
func getU32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// ToBF16 and FromBF16 convert one value (nearest, ties to even).
func ToBF16(v float32) uint16   { return bf16Nearest(v) }
func FromBF16(b uint16) float32 { return fromBF16(b) }
