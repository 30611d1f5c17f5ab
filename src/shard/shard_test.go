package shard_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"sancus/src/atomicfile/fulldisk"
	"sancus/src/graph"
	"sancus/src/prepare"
	"sancus/src/shard"
)

func coraPrepared(t *testing.T, parts int) *prepare.Prepared {
	t.Helper()
	ds, err := graph.Load("../../testdata/cora", graph.LoadOptions{NormalizeFeatures: true})
	if err != nil {
		t.Fatal(err)
	}
	p, err := prepare.InMemory(ds, parts, prepare.Options{Precompute: shard.Aggregations})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// writeDir writes a complete shard directory of p, as prepare does:
// every shard, then meta.json.
func writeDir(t *testing.T, p *prepare.Prepared, dir string) {
	t.Helper()
	parts := len(p.Offsets) - 1
	for r := range parts {
		s, err := p.Shard(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Write(dir); err != nil {
			t.Fatal(err)
		}
	}
	if err := shard.WriteMeta(dir, shard.Meta{Dataset: "cora", Parts: parts, Nodes: p.DS.N, Offsets: p.Offsets}); err != nil {
		t.Fatal(err)
	}
}

func TestWriteReadRoundTripAndErrors(t *testing.T) {
	p := coraPrepared(t, 2)
	dir := t.TempDir()
	writeDir(t, p, dir)
	orig, _ := p.Shard(1)
	got, err := shard.Read(dir, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, orig) {
		t.Fatal("shard read back differs from what was written")
	}
	path := filepath.Join(dir, shard.FileName(1, 2))
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
	_, err = shard.Read(dir, 1, 2)
	expect("corrupt", err, "checksum mismatch")
	// Truncated.
	os.WriteFile(path, raw[:len(raw)-100], 0o644)
	_, err = shard.Read(dir, 1, 2)
	expect("truncated", err, "truncated")
	// Not a shard.
	os.WriteFile(path, []byte("hello world, this is not a shard file"), 0o644)
	_, err = shard.Read(dir, 1, 2)
	expect("magic", err, "bad magic")
	// Asked for a different rank count.
	os.WriteFile(path, raw, 0o644)
	_, err = shard.Read(dir, 0, 4)
	expect("wrong P", err, "another rank count")
	os.WriteFile(filepath.Join(dir, shard.FileName(0, 2)), raw, 0o644)
	// Rank 1's file saved under rank 0's name.
	_, err = shard.Read(dir, 0, 2)
	expect("wrong rank", err, "holds rank 1 of 2, wanted rank 0 of 2")
	_, err = shard.Read(t.TempDir(), 0, 2)
	expect("missing", err, "shard files not found")
	// A flipped byte in the header (the version field) is corruption, not
	// another version.
	hdr := append([]byte(nil), raw...)
	hdr[8] ^= 0x01
	os.WriteFile(path, hdr, 0o644)
	_, err = shard.Read(dir, 1, 2)
	expect("header", err, "corrupt")
	// One file of a complete directory deleted: that file is named.
	os.WriteFile(path, raw, 0o644)
	os.Remove(filepath.Join(dir, shard.FileName(0, 2)))
	_, err = shard.Read(dir, 0, 2)
	expect("deleted", err, shard.FileName(0, 2)+": missing from")
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

func TestMetaRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := shard.Meta{Dataset: "g", Parts: 3, Nodes: 10, Offsets: []int64{0, 3, 6, 10}, Partitioner: "grem"}
	if err := shard.WriteMeta(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := shard.ReadMeta(dir)
	if err != nil || got.Dataset != want.Dataset || got.Parts != want.Parts || len(got.Offsets) != 4 || got.Partitioner != "grem" {
		t.Fatalf("read back %+v, %v", got, err)
	}
	if _, err := shard.ReadMeta(t.TempDir()); err == nil {
		t.Fatal("a directory without meta.json gave no error")
	}
}

// TestDenseAXRoundTrip: a ÂX or D⁻¹AX denser than matrix.DenseThreshold is
// stored dense and read back as the dense matrix the engine multiplies,
// equal to the CSR it came from; the rest of the shard is unchanged.
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
	p, err := prepare.InMemory(ds, 2, prepare.Options{Precompute: shard.Aggregations})
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := p.Shard(0)
	out := t.TempDir()
	writeDir(t, p, out)
	got, err := shard.Read(out, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []shard.Aggregation{shard.Sym, shard.Mean} {
		o, r := orig.Of(g), got.Of(g)
		if !o.CSR.DenseEnough() {
			t.Fatalf("%v density %d/%d: the test needs a dense one", g, o.CSR.NNZ(), o.CSR.Rows*o.CSR.Cols)
		}
		if r.CSR != nil || r.Dense == nil || !got.Holds(g) {
			t.Fatalf("%v read back as CSR %v, dense %v: want the dense form only", g, r.CSR != nil, r.Dense != nil)
		}
		if !reflect.DeepEqual(r.Dense, o.CSR.ToDense()) {
			t.Fatalf("dense %v read back differs from the CSR written", g)
		}
		*r = *o
	}
	if !reflect.DeepEqual(got, orig) {
		t.Fatal("the rest of the shard read back differs")
	}
}

// A shard directory without a sound meta.json is incomplete, whatever
// its shard files hold: Read, and so every rank's training, refuses it
// in the words OpenDir (and so info) uses.
func TestIncompleteDirRefused(t *testing.T) {
	p := coraPrepared(t, 2)
	good := t.TempDir()
	writeDir(t, p, good)
	meta, _ := os.ReadFile(filepath.Join(good, shard.MetaFile))
	for _, c := range []struct {
		name string
		meta []byte // nil: none
		want string
	}{
		{"missing", nil, "is incomplete: it has no meta.json, which sancus prepare writes last"},
		{"garbage", []byte("{garbage"), "is incomplete or corrupt: " + "DIR/meta.json: invalid character"},
		{"nested", []byte(strings.Repeat("[", 100000) + strings.Repeat("]", 100000)), "exceeded max depth"},
		{"parts", []byte(strings.Replace(string(meta), `"parts": 2`, `"parts": 4`, 1)), "meta.json: parts 4, but 3 offsets"},
		{"offsets", []byte(strings.Replace(string(meta), `"nodes": 2708`, `"nodes": 2709`, 1)), "do not run from 0 to its 2709 nodes"},
	} {
		dir := t.TempDir()
		writeDir(t, p, dir)
		os.Remove(filepath.Join(dir, shard.MetaFile))
		if c.meta != nil {
			os.WriteFile(filepath.Join(dir, shard.MetaFile), c.meta, 0o644)
		}
		want := strings.ReplaceAll(c.want, "DIR", dir)
		_, err := shard.Read(dir, 0, 2)
		if err == nil || !strings.Contains(err.Error(), "shard directory "+dir) || !strings.Contains(err.Error(), want) ||
			!strings.Contains(err.Error(), "run sancus prepare again") {
			t.Errorf("%s: Read: got %v, want %q", c.name, err, want)
		}
		if _, derr := shard.OpenDir(dir); derr == nil || err == nil || derr.Error() != err.Error() {
			t.Errorf("%s: OpenDir says %v, Read %v", c.name, derr, err)
		}
	}
	// Offsets edited consistently: the shard files disagree with them.
	dir := t.TempDir()
	writeDir(t, p, dir)
	m, err := shard.ReadMeta(dir)
	if err != nil {
		t.Fatal(err)
	}
	m.Offsets[1]--
	shard.WriteMeta(dir, m)
	if _, err := shard.Read(dir, 0, 2); err == nil || !strings.Contains(err.Error(), "a file of another prepare") {
		t.Errorf("offsets edited: %v", err)
	}
}

// A FIFO in place of a shard file is refused, not waited on.
func TestShardFIFORefused(t *testing.T) {
	dir := t.TempDir()
	writeDir(t, coraPrepared(t, 2), dir)
	path := filepath.Join(dir, shard.FileName(1, 2))
	os.Remove(path)
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := shard.Read(dir, 1, 2)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), shard.FileName(1, 2)+": not a regular file") {
			t.Fatalf("got %v", err)
		}
	case <-time.After(10 * time.Second):
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		t.Fatal("reading a FIFO as a shard blocked")
	}
}
