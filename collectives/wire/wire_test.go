package wire

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func seedOf(r int) uint64 { return Seed(7, uint64(r)) }

// Every decoded value is within one quantization step of the original
// (half an ulp for bf16), for random and adversarial rows.
func TestRoundTripWithinBound(t *testing.T) {
	const width = 16
	rng := rand.New(rand.NewPCG(1, 2))
	rows := map[string][]float32{
		"random":      randRow(rng, width, 1),
		"constant":    fill(width, 0.375),
		"zeros":       fill(width, 0),
		"huge range":  {-3e30, 1e-30, 2e30, 0, 5, -5, 1e20, -1e20, 3, 4, 5, 6, 7, 8, 9, 1e30},
		"tiny values": randRow(rng, width, 1e-30),
		"one hot":     append(fill(width-1, 0), 1),
	}
	for name, x := range rows {
		for _, bits := range []int{FP32, BF16, 8, 4, 2} {
			buf := make([]byte, RowBytes(bits, width))
			Encode(buf, x, width, bits, seedOf)
			got := make([]float32, width)
			Decode(got, buf, width, bits, false)
			var bound float64
			switch bits {
			case FP32:
				bound = 0
			case BF16:
				bound = -1 // relative, checked below
			default:
				bound = float64(fromBF16(getU16(buf[2:])))
			}
			for i, v := range x {
				err := math.Abs(float64(got[i]) - float64(v))
				if bits == BF16 {
					if err > math.Abs(float64(v))/256 {
						t.Fatalf("%s bf16: element %d: %g decoded as %g", name, i, v, got[i])
					}
					continue
				}
				if err > bound*(1+1e-4) { // 1/step is rounded once per row
					t.Fatalf("%s %s: element %d: %g decoded as %g, error %g above the step %g", name, Name(bits), i, v, got[i], err, bound)
				}
			}
			if name == "constant" || name == "zeros" || name == "one hot" {
				// Rows whose values are bf16-exact come back exactly.
				for i, v := range x {
					if got[i] != v && name != "one hot" {
						t.Fatalf("%s %s: element %d: %g decoded as %g", name, Name(bits), i, v, got[i])
					}
				}
			}
		}
	}
}

// Stochastic rounding is unbiased: the mean of many independently seeded
// encodings approaches the value; and one seed always gives one encoding.
func TestStochasticRoundingIsUnbiasedAndReproducible(t *testing.T) {
	x := []float32{0, 0.1, 0.37, 1}
	var sum [4]float64
	const n = 4000
	buf := make([]byte, RowBytes(2, 4))
	got := make([]float32, 4)
	for k := range n {
		Encode(buf, x, 4, 2, func(int) uint64 { return Seed(uint64(k), 0) })
		Decode(got, buf, 4, 2, false)
		for i, v := range got {
			sum[i] += float64(v)
		}
	}
	for i, v := range x {
		if m := sum[i] / n; math.Abs(m-float64(v)) > 0.01 {
			t.Errorf("element %d: mean of decodes %.4f, value %.4f", i, m, v)
		}
	}
	a, b := make([]byte, len(buf)), make([]byte, len(buf))
	Encode(a, x, 4, 2, seedOf)
	Encode(b, x, 4, 2, seedOf)
	if string(a) != string(b) {
		t.Fatal("one seed gave two encodings")
	}
}

func TestDeltaDecodeAdds(t *testing.T) {
	base := []float32{1, 2, 3, 4}
	d := []float32{0.5, -0.5, 0, 1}
	buf := make([]byte, RowBytes(BF16, 4))
	Encode(buf, d, 4, BF16, seedOf)
	Decode(base, buf, 4, BF16, true)
	for i, want := range []float32{1.5, 1.5, 3, 5} {
		if base[i] != want {
			t.Fatalf("element %d = %g, want %g", i, base[i], want)
		}
	}
}

func TestParseFormat(t *testing.T) {
	for s, want := range map[string]Format{"fp32": 32, "bf16": 16, "int8": 8, "int4": 4, "int2": 2, "auto": 0, "AUTO": 0, "Int4": 4, "": AsForward} {
		if got, err := ParseFormat(s); err != nil || got != want || got.String() != strings.ToLower(s) {
			t.Errorf("ParseFormat(%q) = %v, %v", s, got, err)
		}
	}
	for _, bad := range []string{"int3", "int16", "fp16", "int"} {
		if _, err := ParseFormat(bad); err == nil {
			t.Errorf("ParseFormat(%q) accepted", bad)
		}
	}
	if AsForward.Bits() != FP32 || Format(4).Or(BF16) != 4 || AsForward.Or(BF16) != BF16 {
		t.Error("a format not given is not fp32, or Or does not default it")
	}
}

func TestRelErrorShrinksWithBits(t *testing.T) {
	x := randRow(rand.New(rand.NewPCG(3, 4)), 64*16, 1)
	last := math.Inf(1)
	for _, bits := range []int{2, 4, 8, BF16, FP32} {
		e := RelError(x, 16, bits, seedOf)
		if e > last || (bits == FP32 && e != 0) {
			t.Fatalf("%s: relative error %g after %g", Name(bits), e, last)
		}
		last = e
	}
}

func randRow(r *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * scale)
	}
	return x
}

func fill(n int, v float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = v
	}
	return x
}
