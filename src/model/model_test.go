package model

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"sancus/kernels/matrix"
)

func TestSoftmaxCEValueAndGradient(t *testing.T) {
	logits := &matrix.Dense{Rows: 3, Cols: 3, Data: []float32{1, 2, 3, 0, 0, 0, 5, 1, 1}}
	labels := []int32{2, 0, 1}
	mask := []int32{0, 1} // row 2 is not a training row
	g := matrix.NewDense(3, 3)
	loss := SoftmaxCE(logits, labels, mask, 4, g)
	// Row 0: -log softmax(1,2,3)[2]; row 1: log 3.
	want := -(3 - math.Log(math.Exp(1)+math.Exp(2)+math.Exp(3))) + math.Log(3)
	if math.Abs(loss-want) > 1e-6 {
		t.Fatalf("loss %v, want %v", loss, want)
	}
	if g.Data[6] != 0 || g.Data[7] != 0 || g.Data[8] != 0 {
		t.Fatalf("masked row has gradient %v", g.Data[6:])
	}
	// Gradient rows sum to zero and equal (softmax − onehot)/norm.
	if v := float64(g.Data[3]); math.Abs(v-(1.0/3-1)/4) > 1e-6 {
		t.Fatalf("d/dlogit[1][0] = %v", v)
	}
	if Correct(logits, labels, []int32{0, 1, 2}) != 2 { // rows 0 and 1 (ties pick the first)
		t.Fatalf("correct count %d", Correct(logits, labels, []int32{0, 1, 2}))
	}
}

func TestAdamFirstStepIsLR(t *testing.T) {
	p := [][]float32{{1, -1}}
	a := NewAdam(0.1, 2)
	a.Update(p, []float32{0.5, -2})
	// Bias-corrected first step moves each parameter by lr·sign(g).
	if math.Abs(float64(p[0][0])-0.9) > 1e-6 || math.Abs(float64(p[0][1])+0.9) > 1e-6 {
		t.Fatalf("after one step %v", p[0])
	}
}

func TestGlorotInitIsSeededAndBounded(t *testing.T) {
	a, _ := NewGCN([]int{100, 16, 7}, 3)
	b, _ := NewGCN([]int{100, 16, 7}, 3)
	lim := float32(math.Sqrt(6.0 / 116))
	for i, v := range a.W[0].Data {
		if v != b.W[0].Data[i] || v > lim || v < -lim {
			t.Fatalf("weight %d = %v (other seed copy %v, limit %v)", i, v, b.W[0].Data[i], lim)
		}
	}
	if _, err := NewGCN([]int{5}, 1); err == nil {
		t.Fatal("model without layers accepted")
	}
}

func TestModelFileRoundTripAndCorruption(t *testing.T) {
	m, err := NewGCN([]int{5, 4, 3}, 7)
	if err != nil {
		t.Fatal(err)
	}
	m.B[1][2] = 0.25
	spec := Spec{Model: ArchGCN, Layers: 2, Dims: m.Dims, Normalization: SymNorm, Classes: 3, LabelKind: "single", NormalizeFeatures: true}
	p := filepath.Join(t.TempDir(), "m.model")
	if err := Save(p, spec, m); err != nil {
		t.Fatal(err)
	}
	got, gm, err := Load(p)
	if err != nil || !reflect.DeepEqual(got.Dims, spec.Dims) || !got.NormalizeFeatures || !reflect.DeepEqual(gm.Flat(), m.Flat()) {
		t.Fatalf("round trip: %v, %+v", err, got)
	}
	raw, _ := os.ReadFile(p)
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"flipped byte", flip(raw, len(raw)/2), "checksum mismatch"},
		{"truncated", raw[:len(raw)-9], "checksum mismatch"},
		{"not a model", []byte("hello, this is not a model file at all"), "bad magic"},
		{"empty", nil, "bad magic"},
	} {
		os.WriteFile(p, c.data, 0o644)
		if _, _, err := Load(p); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: got %v, want the file named and %q", c.name, err, c.want)
		}
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0x40
	return c
}

// rewrite rebuilds a saved model file with its spec edited by js and a
// valid checksum: what a hand edit or a bug would write.
func rewrite(t *testing.T, raw []byte, js func(spec map[string]any), values func(v []byte)) []byte {
	t.Helper()
	le := binary.LittleEndian
	n := le.Uint32(raw[12:])
	var spec map[string]any
	if err := json.Unmarshal(raw[16:16+n], &spec); err != nil {
		t.Fatal(err)
	}
	if js != nil {
		js(spec)
	}
	b, _ := json.Marshal(spec)
	out := append([]byte(nil), raw[:12]...)
	out = le.AppendUint32(out, uint32(len(b)))
	out = append(out, b...)
	rest := append([]byte(nil), raw[16+n:len(raw)-4]...)
	if values != nil {
		values(rest)
	}
	out = append(out, rest...)
	return le.AppendUint32(out, crc32.Checksum(out, crc32.MakeTable(crc32.Castagnoli)))
}

// A model file with a valid checksum but an inconsistent spec, or a
// weight that is not finite, is refused saying which.
func TestModelFileContentChecked(t *testing.T) {
	m, _ := NewGCN([]int{5, 4, 3}, 7)
	spec := Spec{Model: ArchGCN, Layers: 2, Dims: m.Dims, Normalization: SymNorm, Classes: 3, LabelKind: "single"}
	p := filepath.Join(t.TempDir(), "m.model")
	if err := Save(p, spec, m); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(p)
	os.WriteFile(p, rewrite(t, raw, nil, nil), 0o644)
	if _, _, err := Load(p); err != nil {
		t.Fatalf("rewritten unchanged: %v", err)
	}
	for _, c := range []struct {
		name   string
		js     func(map[string]any)
		values func([]byte)
		want   string
	}{
		{"layers", func(s map[string]any) { s["layers"] = 9 }, nil, "layers 9 inconsistent with dims [5 4 3] (3 widths make 2 layers)"},
		{"NaN", nil, func(v []byte) { binary.LittleEndian.PutUint32(v[4+8+4*3:], math.Float32bits(float32(math.NaN()))) }, "non-finite weights: layer 1's W holds NaN at 3"},
		{"Inf", nil, func(v []byte) { binary.LittleEndian.PutUint32(v[len(v)-4:], math.Float32bits(float32(math.Inf(-1)))) }, "non-finite weights: layer 2's b holds -Inf at 2"},
		{"huge dims", func(s map[string]any) { s["dims"] = []int{1 << 30, 1 << 30, 3} }, nil, "more than the"},
		{"zero width", func(s map[string]any) { s["dims"] = []int{5, 0, 3} }, nil, "every width must be 1"},
		{"classes", func(s map[string]any) { s["classes"] = 7 }, nil, "7 classes, but the last of dims [5 4 3] is 3"},
		{"spec too long", nil, nil, ""},
	} {
		b := rewrite(t, raw, c.js, c.values)
		if c.name == "spec too long" {
			binary.LittleEndian.PutUint32(b[12:], 1<<31)
			b = append(b[:len(b)-4], binary.LittleEndian.AppendUint32(nil, crc32.Checksum(b[:len(b)-4], crc32.MakeTable(crc32.Castagnoli)))...)
			c.want = "spec of 2147483648 bytes"
		}
		os.WriteFile(p, b, 0o644)
		if _, _, err := Load(p); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: got %v, want the file named and %q", c.name, err, c.want)
		}
	}
}

// A FIFO given as the model file is refused at once.
func TestModelFileFIFORefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "m.model")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := Load(p)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "a FIFO, not a regular file") || errors.Is(err, ErrNotModel) {
			t.Fatalf("got %v", err)
		}
	case <-time.After(10 * time.Second):
		if f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		t.Fatal("loading a FIFO as a model blocked")
	}
}
