package wire

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestTailed: a row of small values beside a tail of large ones keeps its
// small values within the step of their own range (one step of the whole
// row would round them to zero), its tail rounded to the nearest bf16, and the owner's copy
// equals what a receiver decodes, bit for bit, set and added.
func TestTailed(t *testing.T) {
	const width, tail, rows = 11, 3, 5
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, rows*width)
	for r := range rows {
		for i := range width {
			if i < width-tail {
				x[r*width+i] = float32(rng.NormFloat64()) * 1e-4
			} else {
				x[r*width+i] = float32(rng.NormFloat64()) * 1e3
			}
		}
	}
	hash := make([]uint64, rows)
	for r := range hash {
		hash[r] = RowHash(uint64(r))
	}
	for _, bits := range []int{8, 4, 2, BF16} {
		c := Tailed(Reference(bits), tail)
		if got, want := c.RowBytes(width), RowBytes(bits, width-tail)+2*tail; got != want {
			t.Fatalf("%s: %d bytes a row, want %d", Name(bits), got, want)
		}
		buf := make([]byte, rows*c.RowBytes(width))
		own := make([]float32, len(x))
		errSq, refSq := c.Encode(buf, own, x, x, width, 9, hash, false, 1)
		recv := make([]float32, len(x))
		Tailed(Reference(bits), tail).Decode(recv, buf, width, false)
		for i := range x {
			if math.Float32bits(own[i]) != math.Float32bits(recv[i]) {
				t.Fatalf("%s: value %d: owner holds %g, receiver decoded %g", Name(bits), i, own[i], recv[i])
			}
			if i%width >= width-tail && recv[i] != FromBF16(ToBF16(x[i])) {
				t.Fatalf("%s: tail value %d: %g decoded as %g", Name(bits), i, x[i], recv[i])
			}
		}
		// int2 keeps four levels of a row's range: relative error under 1.
		if rel := headError(recv, x, width, tail); rel > 0.6 {
			t.Fatalf("%s: the small values' relative error %.3f", Name(bits), rel)
		}
		if errSq < 0 || refSq <= 0 || math.Sqrt(errSq/refSq) > 1.0/256 { // bf16: 8 bits of mantissa
			t.Fatalf("%s: the whole rows' relative error %g (the tail dominates them)", Name(bits), math.Sqrt(errSq/refSq))
		}
		// Added as a delta: the owner's copy and the receiver's agree.
		c.Encode(buf, own, x, x, width, 10, hash, true, 1)
		Tailed(Reference(bits), tail).Decode(recv, buf, width, true)
		for i := range x {
			if math.Float32bits(own[i]) != math.Float32bits(recv[i]) {
				t.Fatalf("%s delta: value %d: owner holds %g, receiver %g", Name(bits), i, own[i], recv[i])
			}
		}
	}
	// One step for the whole row loses the small values: what Tailed is for.
	whole := make([]float32, len(x))
	buf := make([]byte, rows*RowBytes(8, width))
	Encode(buf, x, width, 8, func(r int) uint64 { return SeedOf(9, hash[r]) })
	Decode(whole, buf, width, 8, false)
	if rel := headError(whole, x, width, tail); rel < 10 {
		t.Fatalf("int8 over whole rows kept the small values (relative error %.3f): the test's rows do not need a tail", rel)
	}
	if Tailed(Reference(FP32), tail).RowBytes(width) != 4*width {
		t.Fatal("a float32 head should be the plain float32 codec")
	}
}

// headError is the relative error of got against x over every row's
// values before its tail.
func headError(got, x []float32, width, tail int) float64 {
	var errSq, refSq float64
	for i := range x {
		if i%width < width-tail {
			d := float64(got[i] - x[i])
			errSq, refSq = errSq+d*d, refSq+float64(x[i])*float64(x[i])
		}
	}
	return math.Sqrt(errSq / refSq)
}
