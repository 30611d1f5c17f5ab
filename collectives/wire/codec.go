package wire

import "fmt"

// A Codec is one wire format. Encode packs the rows of x into dst, row r's
// rounding keyed by SeedOf(key, rowHash[r]), and writes the decoded rows
// into dec (added to what dec holds with add: a delta), so an owner holds
// exactly the copy its receivers will decode; it returns Σ(decoded − ref)²
// and Σ ref² over the rows whose index is a multiple of errEvery (ref: the
// values the decoded rows stand for: x itself, or with add what dec held
// plus x).
type Codec interface {
	Bits() int
	RowBytes(width int) int
	Encode(dst []byte, dec, x, ref []float32, width int, key uint64, rowHash []uint64, add bool, errEvery int) (errSq, refSq float64)
	Decode(dst []float32, src []byte, width int, add bool)
}

var codecs = map[int]Codec{}

// Use makes c the codec of its width. The kernels package registers its C
// integer codec this way; the Go codec stays the reference every other is
// tested against.
func Use(c Codec) { codecs[c.Bits()] = c }

// CodecOf is the codec of a width: the one registered, else the reference.
func CodecOf(bits int) Codec {
	if c, ok := codecs[bits]; ok {
		return c
	}
	return Reference(bits)
}

// Reference is the Go codec of a width.
func Reference(bits int) Codec {
	switch bits {
	case FP32, BF16, 8, 4, 2:
		return reference(bits)
	}
	panic(fmt.Sprintf("wire: no format of %d bits", bits)) // widths come from Parse
}

type reference int

func (b reference) Bits() int              { return int(b) }
func (b reference) RowBytes(width int) int { return RowBytes(int(b), width) }

func (b reference) Encode(dst []byte, dec, x, ref []float32, width int, key uint64, rowHash []uint64, add bool, errEvery int) (errSq, refSq float64) {
	Encode(dst, x, width, int(b), func(r int) uint64 { return SeedOf(key, rowHash[r]) })
	Decode(dec, dst, width, int(b), add)
	for r := 0; (r+1)*width <= len(ref); r += max(errEvery, 1) {
		for i := r * width; i < (r+1)*width; i++ {
			d := float64(dec[i] - ref[i])
			errSq += d * d
			refSq += float64(ref[i]) * float64(ref[i])
		}
	}
	if refSq == 0 { // an all-zero block: no relative error
		return 0, 0
	}
	return errSq, refSq
}

func (b reference) Decode(dst []float32, src []byte, width int, add bool) {
	Decode(dst, src, width, int(b), add)
}
