package shard

import (
	"os"
	"path/filepath"
	"reflect"
	"sancus/src/atomicfile/fulldisk"
	"strings"
	"testing"

	"sancus/src/graph"
)

func coraPrepared(t *testing.T, parts int) *Prepared {
	t.Helper()
	ds, err := graph.Load("../../testdata/cora", graph.LoadOptions{NormalizeFeatures: true})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Prepare(ds, parts, Options{Precompute: true})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBlocksReassembleÂ(t *testing.T) {
	p := coraPrepared(t, 3)
	var nnz int64
	for r := 0; r < 3; r++ {
		s, err := p.Shard(r)
		if err != nil {
			t.Fatal(err)
		}
		for j, b := range s.Blocks {
			if err := b.Validate(); err != nil {
				t.Fatalf("rank %d block %d: %v", r, j, err)
			}
			nnz += b.NNZ()
			// Spot-check every entry against the global matrix.
			for i := 0; i < b.Rows; i++ {
				gi := s.Row0() + i
				for q := b.RowPtr[i]; q < b.RowPtr[i+1]; q++ {
					gj := int(s.Offsets[j]) + int(b.ColIdx[q])
					found := false
					for z := p.AHat.RowPtr[gi]; z < p.AHat.RowPtr[gi+1]; z++ {
						if int(p.AHat.ColIdx[z]) == gj && p.AHat.Val[z] == b.Val[q] {
							found = true
						}
					}
					if !found {
						t.Fatalf("rank %d block %d entry (%d,%d) not in Â", r, j, gi, gj)
					}
				}
			}
		}
	}
	if nnz != p.AHat.NNZ() {
		t.Fatalf("blocks hold %d nonzeros, Â has %d", nnz, p.AHat.NNZ())
	}
}

func TestBalancedRanges(t *testing.T) {
	p := coraPrepared(t, 4)
	off := p.Offsets
	var load []int64
	for r := 0; r < 4; r++ {
		load = append(load, p.AHat.RowPtr[off[r+1]]-p.AHat.RowPtr[off[r]]+off[r+1]-off[r])
	}
	var mx, sum int64
	for _, l := range load {
		mx, sum = max(mx, l), sum+l
	}
	if float64(mx)/(float64(sum)/4) > 1.05 {
		t.Fatalf("nonzero balance %v is off by more than 5%%", load)
	}
	if _, err := BalancedRanges(p.AHat, p.AHat.Rows+1); err == nil {
		t.Fatal("more parts than rows accepted")
	}
}

func TestWriteReadRoundTripAndErrors(t *testing.T) {
	p := coraPrepared(t, 2)
	dir := t.TempDir()
	orig, _ := p.Shard(1)
	if err := orig.Write(dir); err != nil {
		t.Fatal(err)
	}
	got, err := Read(dir, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, orig) {
		t.Fatal("shard read back differs from what was written")
	}
	path := filepath.Join(dir, FileName(1, 2))
	raw, _ := os.ReadFile(path)

	expect := func(what string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "shard") {
			t.Fatalf("%s: got %v, want an error naming the shard and saying %q", what, err, want)
		}
	}
	// One flipped bit in the body.
	bad := append([]byte(nil), raw...)
	bad[len(bad)/2] ^= 0x10
	os.WriteFile(path, bad, 0o644)
	_, err = Read(dir, 1, 2)
	expect("corrupt", err, "checksum mismatch")
	// Truncated.
	os.WriteFile(path, raw[:len(raw)-100], 0o644)
	_, err = Read(dir, 1, 2)
	expect("truncated", err, "truncated")
	// Not a shard.
	os.WriteFile(path, []byte("hello world, this is not a shard file"), 0o644)
	_, err = Read(dir, 1, 2)
	expect("magic", err, "bad magic")
	// Asked for a different rank count.
	os.WriteFile(path, raw, 0o644)
	os.WriteFile(filepath.Join(dir, FileName(0, 2)), raw, 0o644)
	_, err = Read(dir, 0, 4)
	expect("wrong P", err, "another rank count")
	// Rank 1's file saved under rank 0's name.
	_, err = Read(dir, 0, 2)
	expect("wrong rank", err, "holds rank 1 of 2, wanted rank 0 of 2")
	_, err = Read(t.TempDir(), 0, 2)
	expect("missing", err, "not found")
	// A flipped byte in the header (the version field) is corruption, not
	// another version.
	hdr := append([]byte(nil), raw...)
	hdr[8] ^= 0x01
	os.WriteFile(path, hdr, 0o644)
	_, err = Read(dir, 1, 2)
	expect("header", err, "corrupt")
	// One file of a complete directory deleted: that file is named.
	os.WriteFile(path, raw, 0o644)
	if err := WriteMeta(dir, Meta{Parts: 2}); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, FileName(0, 2)))
	_, err = Read(dir, 0, 2)
	expect("deleted", err, FileName(0, 2)+": missing from")
}

func TestWriteLeavesNothingOnFullDisk(t *testing.T) {
	p := coraPrepared(t, 2)
	s, _ := p.Shard(0)
	dir := fulldisk.Dir(t, "64k")
	err := s.Write(dir)
	if err == nil || !strings.Contains(err.Error(), "no space") {
		t.Fatalf("want a no-space error, got %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("a partial shard or temporary file was left: %v", left)
	}
}

// TestStreamingPrepareEqualsInMemory: shards written by the streaming
// preparation are byte-identical to those of the in-memory one, for every
// input format, with and without a partition.
func TestStreamingPrepareEqualsInMemory(t *testing.T) {
	gen := t.TempDir()
	if err := graph.Generate(gen, graph.GenConfig{Model: "planted", Nodes: 2000, Edges: 12000, Features: 16, FeatureNNZ: 3,
		Classes: 4, PIn: 0.5, FeatureSig: 0.5, TrainFrac: 0.1, ValFrac: 0.1, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		data   string
		random bool // generated edges repeat: cut by a partition, not by degree
	}{
		{"../../testdata/cora", false},
		{"../../testdata/karate", false},
		{"../../testdata/polblogs", false},
		{"../../testdata/cora", true},
		{gen, true},
	}
	for _, c := range cases {
		load := graph.LoadOptions{NormalizeFeatures: true, SplitSeed: 1}
		ds, err := graph.Load(c.data, load)
		if err != nil {
			t.Fatal(err)
		}
		var assign []int32
		if c.random {
			assign = make([]int32, ds.N)
			for v := range assign {
				assign[v] = int32((v * 7) % 3)
			}
		}
		mem, stream := t.TempDir(), t.TempDir()
		prep, err := Prepare(ds, 3, Options{Precompute: true, Parts: assign})
		if err != nil {
			t.Fatal(err)
		}
		for r := 0; r < 3; r++ {
			s, _ := prep.Shard(r)
			if err := s.Write(mem); err != nil {
				t.Fatal(err)
			}
		}
		seen := 0
		sp, err := PrepareStreaming(c.data, stream, 3, Options{Precompute: true, Parts: assign, OnShard: func(*Shard) { seen++ }}, load)
		if err != nil {
			t.Fatal(err)
		}
		if seen != 3 || sp.NNZ() != prep.AHat.NNZ() {
			t.Fatalf("%s: %d shards seen, nnz %d vs %d", c.data, seen, sp.NNZ(), prep.AHat.NNZ())
		}
		for r := 0; r < 3; r++ {
			a, _ := os.ReadFile(filepath.Join(mem, FileName(r, 3)))
			b, _ := os.ReadFile(filepath.Join(stream, FileName(r, 3)))
			if len(a) == 0 || string(a) != string(b) {
				t.Fatalf("%s (partition %v): shard %d differs between in-memory and streaming preparation", c.data, c.random, r)
			}
		}
		if left, _ := filepath.Glob(filepath.Join(stream, ".prepare-*")); len(left) > 0 {
			t.Fatalf("temporary files left: %v", left)
		}
	}
}

func TestMetaRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := Meta{Dataset: "g", Parts: 3, Nodes: 10, Offsets: []int64{0, 3, 6, 10}, Partitioner: "grem"}
	if err := WriteMeta(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadMeta(dir)
	if err != nil || got.Dataset != want.Dataset || got.Parts != want.Parts || len(got.Offsets) != 4 || got.Partitioner != "grem" {
		t.Fatalf("read back %+v, %v", got, err)
	}
	if _, err := ReadMeta(t.TempDir()); err == nil {
		t.Fatal("a directory without meta.json gave no error")
	}
}

// TestDenseAXRoundTrip: a ÂX denser than matrix.DenseThreshold is stored
// dense and read back as the dense matrix the engine multiplies, equal to
// the CSR it came from; the rest of the shard is unchanged.
func TestDenseAXRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if err := graph.Generate(dir, graph.GenConfig{Model: "planted", Nodes: 3000, Edges: 15000, Features: 48, FeatureNNZ: 6,
		Classes: 4, PIn: 0.5, FeatureSig: 0.4, TrainFrac: 0.1, ValFrac: 0.1, Seed: 2}); err != nil {
		t.Fatal(err)
	}
	ds, err := graph.Load(dir, graph.LoadOptions{NormalizeFeatures: true})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Prepare(ds, 2, Options{Precompute: true})
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := p.Shard(0)
	if !orig.AX.DenseEnough() {
		t.Fatalf("ÂX density %d/%d: the test needs a dense one", orig.AX.NNZ(), orig.AX.Rows*orig.AX.Cols)
	}
	out := t.TempDir()
	if err := orig.Write(out); err != nil {
		t.Fatal(err)
	}
	got, err := Read(out, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got.AX != nil || got.AXDense == nil || !got.HasAX() {
		t.Fatalf("read back AX %v, AXDense %v: want the dense form only", got.AX != nil, got.AXDense != nil)
	}
	if !reflect.DeepEqual(got.AXDense, orig.AX.ToDense()) {
		t.Fatal("dense ÂX read back differs from the CSR written")
	}
	got.AXDense, got.AX = nil, orig.AX
	if !reflect.DeepEqual(got, orig) {
		t.Fatal("the rest of the shard read back differs")
	}
}
