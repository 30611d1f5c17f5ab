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

// A RowsEncoder encodes the listed rows of a block alone, leaving the
// others of dst and dec as they are: Encode's sums are over every
// errEvery-th row of the list. The C integer codecs and the reference
// are; EncodeRows serves any other codec by gathering the rows first.
type RowsEncoder interface {
	EncodeRows(dst []byte, dec, x, ref []float32, width int, key uint64, rowHash []uint64, rows []int32, add bool, errEvery int) (errSq, refSq float64)
}

// EncodeRows is c's Encode of the listed rows of a block (every one of
// x's rows where rows is nil): rows are indices into the block, rowHash
// is the block's.
func EncodeRows(c Codec, dst []byte, dec, x, ref []float32, width int, key uint64, rowHash []uint64, rows []int32, add bool, errEvery int) (errSq, refSq float64) {
	if rows == nil {
		return c.Encode(dst, dec, x, ref, width, key, rowHash, add, errEvery)
	}
	if r, ok := c.(RowsEncoder); ok {
		return r.EncodeRows(dst, dec, x, ref, width, key, rowHash, rows, add, errEvery)
	}
	n, rb := len(rows), c.RowBytes(width)
	gx, gref, gdec := make([]float32, n*width), make([]float32, n*width), make([]float32, n*width)
	ghash, gdst := make([]uint64, n), make([]byte, n*rb)
	for k, r := range rows {
		copy(gx[k*width:(k+1)*width], x[int(r)*width:])
		copy(gref[k*width:(k+1)*width], ref[int(r)*width:])
		copy(gdec[k*width:(k+1)*width], dec[int(r)*width:])
		ghash[k] = rowHash[r]
	}
	errSq, refSq = c.Encode(gdst, gdec, gx, gref, width, key, ghash, add, errEvery)
	for k, r := range rows {
		copy(dst[int(r)*rb:(int(r)+1)*rb], gdst[k*rb:])
		copy(dec[int(r)*width:(int(r)+1)*width], gdec[k*width:])
	}
	return errSq, refSq
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
	return b.EncodeRows(dst, dec, x, ref, width, key, rowHash, nil, add, errEvery)
}

// EncodeRows encodes, decodes and measures one row at a time: the listed
// rows, or with rows nil every row of x.
func (b reference) EncodeRows(dst []byte, dec, x, ref []float32, width int, key uint64, rowHash []uint64, rows []int32, add bool, errEvery int) (errSq, refSq float64) {
	if width == 0 {
		return 0, 0
	}
	n, rb := len(rows), b.RowBytes(width)
	if rows == nil {
		n = len(x) / width
	}
	for k := range n {
		r := k
		if rows != nil {
			r = int(rows[k])
		}
		packed := dst[r*rb : (r+1)*rb]
		encodeRow(packed, x[r*width:(r+1)*width], int(b), SeedOf(key, rowHash[r]))
		decodeRow(dec[r*width:(r+1)*width], packed, int(b), add)
		if k%max(errEvery, 1) == 0 && (r+1)*width <= len(ref) {
			for i := r * width; i < (r+1)*width; i++ {
				d := float64(dec[i] - ref[i])
				errSq += d * d
				refSq += float64(ref[i]) * float64(ref[i])
			}
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
