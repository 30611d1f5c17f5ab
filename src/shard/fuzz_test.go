package shard_test

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sancus/src/budget/memlimit"
	"sancus/src/graph"
	"sancus/src/prepare"
	"sancus/src/shard"
)

// smallPrepared is a 40-node graph split in two, as seeds for the fuzzers.
func smallPrepared(f *testing.F) *prepare.Prepared {
	dir := f.TempDir()
	if err := graph.Generate(dir, graph.GenConfig{Model: "planted", Nodes: 40, Edges: 120, Features: 6, FeatureNNZ: 2,
		Classes: 2, PIn: 0.7, FeatureSig: 0.5, TrainFrac: 0.3, ValFrac: 0.2, Seed: 1}); err != nil {
		f.Fatal(err)
	}
	ds, err := graph.Load(dir, graph.LoadOptions{})
	if err != nil {
		f.Fatal(err)
	}
	p, err := prepare.InMemory(ds, 2, prepare.Options{Precompute: shard.Aggregations})
	if err != nil {
		f.Fatal(err)
	}
	return p
}

// FuzzShardFile reads any bytes as rank 1's shard of a sound directory,
// its body length and checksum made to agree, so that the decoder past
// them is reached: Read returns a shard that passed its checks, or an
// error naming the file.
func FuzzShardFile(f *testing.F) {
	p := smallPrepared(f)
	src := f.TempDir()
	writeDirF(f, p, src)
	b, err := os.ReadFile(filepath.Join(src, shard.FileName(1, 2)))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b[:len(b)-4])
	f.Add(b[:200])
	meta, _ := os.ReadFile(filepath.Join(src, shard.MetaFile))
	rank0, _ := os.ReadFile(filepath.Join(src, shard.FileName(0, 2)))
	f.Fuzz(func(t *testing.T, data []byte) {
		memlimit.CapFuzzWorker(2 << 30)
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, shard.MetaFile), meta, 0o644)
		os.WriteFile(filepath.Join(dir, shard.FileName(0, 2)), rank0, 0o644)
		file := append([]byte(nil), data...)
		if len(file) >= 20 {
			binary.LittleEndian.PutUint64(file[12:], uint64(len(file)-20))
		}
		file = binary.LittleEndian.AppendUint32(file, crc32.Checksum(file, crc32.MakeTable(crc32.Castagnoli)))
		path := filepath.Join(dir, shard.FileName(1, 2))
		os.WriteFile(path, file, 0o644)
		s, err := shard.Read(dir, 1, 2)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error without the file's name: %v", err)
			}
			return
		}
		if s.Rank != 1 || s.Parts != 2 || s.Features.Rows != s.Rows() {
			t.Fatalf("rank %d of %d, %d feature rows for %d", s.Rank, s.Parts, s.Features.Rows, s.Rows())
		}
	})
}

// FuzzShardMeta reads any bytes as a shard directory's meta.json:
// OpenDir returns a description that agrees with itself, or an error
// naming the directory.
func FuzzShardMeta(f *testing.F) {
	p := smallPrepared(f)
	src := f.TempDir()
	writeDirF(f, p, src)
	meta, _ := os.ReadFile(filepath.Join(src, shard.MetaFile))
	f.Add(meta)
	f.Add([]byte(`{"parts": 2, "nodes": 4, "offsets": [0, 2, 4]}`))
	f.Add([]byte(`{garbage`))
	f.Fuzz(func(t *testing.T, data []byte) {
		memlimit.CapFuzzWorker(2 << 30)
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, shard.MetaFile), data, 0o644)
		for r := range 2 {
			os.WriteFile(filepath.Join(dir, shard.FileName(r, 2)), nil, 0o644)
		}
		m, err := shard.OpenDir(dir)
		if err != nil {
			if !strings.Contains(err.Error(), dir) {
				t.Fatalf("error without the directory's name: %v", err)
			}
			return
		}
		if m.Parts != 2 || len(m.Offsets) != 3 || m.Offsets[2] != int64(m.Nodes) || m.Offsets[1] < 0 || m.Offsets[1] > m.Offsets[2] {
			t.Fatalf("accepted %+v", m)
		}
	})
}

func writeDirF(f *testing.F, p *prepare.Prepared, dir string) {
	parts := len(p.Offsets) - 1
	for r := range parts {
		s, err := p.Shard(r)
		if err != nil {
			f.Fatal(err)
		}
		if err := s.Write(dir); err != nil {
			f.Fatal(err)
		}
	}
	if err := shard.WriteMeta(dir, shard.Meta{Dataset: "g", Parts: parts, Nodes: p.DS.N, Offsets: p.Offsets}); err != nil {
		f.Fatal(err)
	}
}
