package wire

// Tailed is a codec whose rows send their last tail values as bf16 (each
// rounded to nearest, with an exponent of its own) and the rest through
// head: for rows that join values of unlike scales, such as GAT's gradient
// rows (G beside each head's score sums, orders of magnitude larger),
// where one step per row would round the small ones to zero. bf16 keeps
// each value to 3 significant digits whatever its scale, finer than any
// integer head keeps the row. A row on the wire is head's row of width −
// tail values, then the tail, so rows stay records of one size that an
// exchange can gather and send a few at a time. Owner and receivers
// decode the head alike (into scratch, then set or added) and the tail
// alike, so they hold the same values.
func Tailed(head Codec, tail int) Codec {
	if tail <= 0 || head.Bits() == FP32 {
		return head
	}
	return &tailed{head: head, tail: tail}
}

type tailed struct {
	head  Codec
	tail  int
	bytes []byte    // heads packed one after another
	vals  []float32 // heads decoded
	x     []float32 // heads of the rows encoded
}

func (t *tailed) Bits() int { return t.head.Bits() }

func (t *tailed) RowBytes(width int) int { return t.head.RowBytes(width-t.tail) + 2*t.tail }

func (t *tailed) Encode(dst []byte, dec, x, ref []float32, width int, key uint64, rowHash []uint64, add bool, errEvery int) (errSq, refSq float64) {
	hw, rows := width-t.tail, len(x)/width
	hb := t.head.RowBytes(hw)
	t.x = resize(t.x, rows*hw)
	for r := range rows {
		copy(t.x[r*hw:(r+1)*hw], x[r*width:])
	}
	t.bytes, t.vals = resize(t.bytes, rows*hb), resize(t.vals, rows*hw)
	// The head codec's own error sums are not the row's: it is asked for
	// one row's, and the whole rows are measured below.
	t.head.Encode(t.bytes, t.vals, t.x, t.x, hw, key, rowHash, false, rows+1)
	rb := hb + 2*t.tail
	for r := range rows {
		row := dst[r*rb : (r+1)*rb]
		copy(row, t.bytes[r*hb:(r+1)*hb])
		for i, v := range x[r*width+hw : (r+1)*width] {
			putU16(row[hb+2*i:], bf16Nearest(v))
		}
	}
	t.place(dec, dst, width, rows, hb, add)
	for r := 0; r < rows; r += max(errEvery, 1) {
		for i := r * width; i < (r+1)*width; i++ {
			d := float64(dec[i] - ref[i])
			errSq += d * d
			refSq += float64(ref[i]) * float64(ref[i])
		}
	}
	if refSq == 0 {
		return 0, 0
	}
	return errSq, refSq
}

func (t *tailed) Decode(dst []float32, src []byte, width int, add bool) {
	hw := width - t.tail
	hb := t.head.RowBytes(hw)
	rb, rows := hb+2*t.tail, len(src)/(hb+2*t.tail)
	t.bytes, t.vals = resize(t.bytes, rows*hb), resize(t.vals, rows*hw)
	for r := range rows {
		copy(t.bytes[r*hb:(r+1)*hb], src[r*rb:])
	}
	t.head.Decode(t.vals, t.bytes, hw, false)
	t.place(dst, src, width, rows, hb, add)
}

// place writes (or adds) into dst the decoded heads in t.vals and the
// tails of the rows on the wire (each tail from byte hb of its row).
func (t *tailed) place(dst []float32, rows []byte, width, n, hb int, add bool) {
	hw, rb := width-t.tail, hb+2*t.tail
	for r := range n {
		d, h, tail := dst[r*width:(r+1)*width], t.vals[r*hw:(r+1)*hw], rows[r*rb+hb:(r+1)*rb]
		if add {
			for i, v := range h {
				d[i] += v
			}
			for i := range t.tail {
				d[hw+i] += fromBF16(getU16(tail[2*i:]))
			}
			continue
		}
		copy(d, h)
		for i := range t.tail {
			d[hw+i] = fromBF16(getU16(tail[2*i:]))
		}
	}
}

func resize[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}
