package model

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sancus/src/budget/memlimit"
)

// FuzzModelFile loads any bytes as a model file, checksummed so that the
// parser past the checksum is reached: Load returns a model its spec
// describes, every weight finite, or an error naming the file.
func FuzzModelFile(f *testing.F) {
	dir := f.TempDir()
	for i, c := range []struct {
		a     Arch
		dims  []int
		heads []int
	}{{ArchGCN, []int{5, 4, 3}, nil}, {ArchSAGE, []int{3, 2}, nil}, {ArchGAT, []int{4, 4, 2}, []int{2, 1}}} {
		m, err := New(c.a, c.dims, c.heads, 1)
		if err != nil {
			f.Fatal(err)
		}
		p := filepath.Join(dir, string(rune('a'+i)))
		spec := Spec{Model: c.a, Layers: len(c.dims) - 1, Dims: c.dims, Heads: c.heads, Classes: c.dims[len(c.dims)-1], LabelKind: "single"}
		if err := Save(p, spec, m); err != nil {
			f.Fatal(err)
		}
		b, _ := os.ReadFile(p)
		f.Add(b[:len(b)-4])
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		memlimit.CapFuzzWorker(2 << 30)
		p := filepath.Join(t.TempDir(), "m.model")
		sum := crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli))
		os.WriteFile(p, binary.LittleEndian.AppendUint32(append([]byte(nil), body...), sum), 0o644)
		spec, m, err := Load(p)
		if err != nil {
			if !strings.Contains(err.Error(), p) {
				t.Fatalf("error without the file's name: %v", err)
			}
			return
		}
		if spec.Layers != len(spec.Dims)-1 || m.Layers() != spec.Layers || m.Arch() != spec.Model {
			t.Fatalf("spec %+v, model of %d layers", spec, m.Layers())
		}
		for _, p := range m.Flat() {
			for _, v := range p {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatal("a non-finite weight loaded")
				}
			}
		}
	})
}
