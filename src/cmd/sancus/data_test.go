package main

import (
	"sancus/src/result"
	"sancus/src/shard"
	"slices"

	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"codeberg.org/sbinet/npyio"
)

// TestOGBRoundTripTrainsLikeMatrixMarket: gen --format ogb writes the very
// graph gen writes as Matrix Market; training on either gives the same
// losses (to 1e-6), in one process and from shards under mpirun.
func TestOGBRoundTripTrainsLikeMatrixMarket(t *testing.T) {
	dir := t.TempDir()
	gen := []string{"gen", "--nodes", "3000", "--edges", "20000", "--features", "32", "--feature-nnz", "6", "--classes", "5", "--seed", "9"}
	mtx, ogb := filepath.Join(dir, "mtx"), filepath.Join(dir, "ogb")
	for _, g := range [][]string{append(gen, "--out", mtx), append(gen, "--out", ogb, "--format", "ogb")} {
		if o, err := run(t, 0, g...); err != nil {
			t.Fatalf("%v: %v\n%s", g, err, o)
		}
	}
	train := func(np int, data string, name string) *result.Run {
		out := filepath.Join(dir, name+".json")
		args := []string{"train", "--epochs", "30", "--quiet", "--out", out}
		if np > 0 {
			shards := filepath.Join(dir, name+"-shards")
			if o, err := run(t, 0, "prepare", "--data", data, "--parts", "2", "--out", shards); err != nil {
				t.Fatalf("prepare %s: %v\n%s", data, err, o)
			}
			args = append(args, "--shards", shards)
		} else {
			args = append(args, "--data", data)
		}
		if o, err := run(t, np, args...); err != nil {
			t.Fatalf("train %s: %v\n%s", data, err, o)
		}
		return readReport(t, out)
	}
	want := train(0, mtx, "mtx")
	for _, got := range []*result.Run{train(0, ogb, "ogb"), train(2, ogb, "ogb-P2")} {
		for i, e := range got.Result.Curve {
			if d := math.Abs(e.Loss - want.Result.Curve[i].Loss); d > 1e-6 {
				t.Fatalf("epoch %d: loss %.9f from OGB, %.9f from Matrix Market", e.Epoch, e.Loss, want.Result.Curve[i].Loss)
			}
		}
	}
}

// TestPredictReproducesTraining: a model saved by train, run by predict
// from the file alone, gives the test accuracy training reported, in one
// process and under mpirun at P = 2; the .npy files load with NumPy's
// layout; a corrupt or mismatched model file is refused.
func TestPredictReproducesTraining(t *testing.T) {
	dir := t.TempDir()
	mf, res := filepath.Join(dir, "cora.model"), filepath.Join(dir, "train.json")
	if o, err := run(t, 0, "train", "--data", cora, "--epochs", "100", "--quiet", "--save-model", mf, "--out", res); err != nil {
		t.Fatalf("train: %v\n%s", err, o)
	}
	want := readReport(t, res).Result.FinalTestAcc
	for _, np := range []int{0, 2} {
		out := filepath.Join(dir, fmt.Sprintf("pred-%d", np))
		if o, err := run(t, np, "predict", "--model-file", mf, "--data", cora, "--out", out, "--embeddings"); err != nil {
			t.Fatalf("predict P=%d: %v\n%s", max(np, 1), err, o)
		}
		var idx PredictIndex
		b, _ := os.ReadFile(filepath.Join(out, "index.json"))
		if err := json.Unmarshal(b, &idx); err != nil {
			t.Fatal(err)
		}
		if idx.TestAccuracy != want || idx.Nodes != 2708 || len(idx.Parts) != max(np, 1) || idx.EmbeddingWidth != 16 {
			t.Fatalf("P=%d: index %+v, training reported test accuracy %v", max(np, 1), idx, want)
		}
		seen := make([]bool, idx.Nodes)
		for _, p := range idx.Parts {
			var ids []int64
			var pred []int32
			var emb []float32
			readNPY(t, filepath.Join(out, p.NodeIDs), &ids, []int{p.Rows})
			readNPY(t, filepath.Join(out, p.Predictions), &pred, []int{p.Rows})
			readNPY(t, filepath.Join(out, p.Embeddings), &emb, []int{p.Rows, 16})
			for i, id := range ids {
				if id < 0 || id >= int64(idx.Nodes) || seen[id] || pred[i] < 0 || pred[i] >= 7 {
					t.Fatalf("P=%d part %d row %d: node %d, class %d", max(np, 1), p.Rank, i, id, pred[i])
				}
				seen[id] = true
			}
		}
	}
	// Warnings: none on the training data; data whose files differ (a
	// copy of Cora with a blank line added to labels.txt); a model saved
	// by a run that diverged.
	if o, err := run(t, 0, "predict", "--model-file", mf, "--data", cora, "--out", filepath.Join(dir, "same")); err != nil || strings.Contains(o, "is not the data") || strings.Contains(o, "diverged") {
		t.Fatalf("predict on the training data: err %v, or a warning:\n%s", err, o)
	}
	other := filepath.Join(dir, "cora-copy")
	os.MkdirAll(other, 0o755)
	for _, f := range []string{"graph.mtx", "features.mtx", "labels.txt", "train.txt", "val.txt", "test.txt"} {
		b, err := os.ReadFile(filepath.Join(cora, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "labels.txt" {
			b = append(b, '\n')
		}
		os.WriteFile(filepath.Join(other, f), b, 0o644)
	}
	if o, err := run(t, 0, "predict", "--model-file", mf, "--data", other, "--out", filepath.Join(dir, "other")); err != nil || !strings.Contains(o, "is not the data model file") || !strings.Contains(o, "labels.txt") {
		t.Fatalf("predict on changed data: err %v, want a warning naming the data:\n%s", err, o)
	}
	dv := filepath.Join(dir, "diverged.model")
	if o, err := run(t, 0, "train", "--data", cora, "--epochs", "30", "--lr", "1e9", "--quiet", "--save-model", dv, "--out", filepath.Join(dir, "dv.json")); err == nil {
		t.Fatalf("train at lr 1e9 did not diverge:\n%s", o)
	}
	if o, err := run(t, 0, "predict", "--model-file", dv, "--data", cora, "--out", filepath.Join(dir, "dv")); err != nil || !strings.Contains(o, "was saved by a run that diverged") {
		t.Fatalf("predict with a diverged model: err %v, want a warning:\n%s", err, o)
	}
	// Refusals: another feature width, another class count, a corrupt file.
	gen := filepath.Join(dir, "g")
	if o, err := run(t, 0, "gen", "--out", gen, "--nodes", "2708", "--edges", "10000", "--features", "1433", "--classes", "5"); err != nil {
		t.Fatalf("gen: %v\n%s", err, o)
	}
	m5 := filepath.Join(dir, "g.model")
	if o, err := run(t, 0, "train", "--data", gen, "--epochs", "3", "--quiet", "--save-model", m5, "--out", filepath.Join(dir, "g.json")); err != nil {
		t.Fatalf("train g: %v\n%s", err, o)
	}
	raw, _ := os.ReadFile(mf)
	raw[len(raw)/2] ^= 1
	bad := filepath.Join(dir, "bad.model")
	os.WriteFile(bad, raw, 0o644)
	for _, c := range []struct{ model, data, want string }{
		{mf, filepath.Join(filepath.Dir(cora), "citeseer"), "expects 1433 input features"},
		{m5, cora, "node 23 has label 6, past the 5 classes model file"},
		{bad, cora, "checksum mismatch"},
	} {
		o, err := run(t, 0, "predict", "--model-file", c.model, "--data", c.data, "--out", filepath.Join(dir, "x"))
		if err == nil || !strings.Contains(o, c.want) {
			t.Errorf("predict %s on %s: err %v, want %q:\n%s", filepath.Base(c.model), filepath.Base(c.data), err, c.want, o)
		}
	}
}

func readNPY(t *testing.T, path string, ptr any, shape []int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := npyio.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if !reflect.DeepEqual(r.Header.Descr.Shape, shape) || r.Header.Descr.Fortran {
		t.Fatalf("%s: shape %v (fortran %v), want %v", path, r.Header.Descr.Shape, r.Header.Descr.Fortran, shape)
	}
	if err := r.Read(ptr); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestModelsUnderMPIMatchSingleRank: GraphSAGE, GAT (with residual hidden
// layers and dense broadcasts too), and a multi-label GCN, under mpirun -np
// 2 and 4 train exactly like one rank; a saved GAT predicts what it tested.
func TestModelsUnderMPIMatchSingleRank(t *testing.T) {
	needMPI(t)
	dir := t.TempDir()
	ml := filepath.Join(dir, "ml")
	if o, err := run(t, 0, "gen", "--out", ml, "--nodes", "3000", "--edges", "20000", "--features", "32", "--classes", "6", "--multilabel"); err != nil {
		t.Fatalf("gen: %v\n%s", err, o)
	}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"sage", []string{"--data", cora, "--model", "sage", "--layers", "3", "--hidden", "32"}},
		{"gat", []string{"--data", cora, "--model", "gat", "--layers", "3", "--hidden", "4", "--heads", "3", "--out-heads", "2", "--residual"}},
		{"gat-dense", []string{"--data", cora, "--model", "gat", "--hidden", "4", "--heads", "2", "--dense-bcast"}},
		{"multilabel", []string{"--data", ml, "--lr", "0.05"}},
	} {
		var ref *result.Run
		for _, np := range []int{0, 2, 4} {
			out := filepath.Join(dir, fmt.Sprintf("%s-%d.json", c.name, np))
			args := append([]string{"train", "--epochs", "20", "--quiet", "--out", out}, c.args...)
			mf := filepath.Join(dir, c.name+".model")
			if np == 0 {
				args = append(args, "--save-model", mf)
			}
			if o, err := run(t, np, args...); err != nil {
				t.Fatalf("%s P=%d: %v\n%s", c.name, max(np, 1), err, o)
			}
			rep := readReport(t, out)
			if ref == nil && c.name == "gat" { // the saved model reproduces its test accuracy
				pred := filepath.Join(dir, "pred-gat")
				if o, err := run(t, 2, "predict", "--model-file", mf, "--data", cora, "--out", pred); err != nil {
					t.Fatalf("predict gat: %v\n%s", err, o)
				}
				var idx PredictIndex
				b, _ := os.ReadFile(filepath.Join(pred, "index.json"))
				if err := json.Unmarshal(b, &idx); err != nil || idx.TestAccuracy != rep.Result.FinalTestAcc {
					t.Fatalf("predict gat: test accuracy %v (%v), training reported %v", idx.TestAccuracy, err, rep.Result.FinalTestAcc)
				}
			}
			if ref == nil {
				ref = rep
				if c.name == "multilabel" && rep.Result.Metric != "micro-f1" {
					t.Fatalf("multilabel: metric %q", rep.Result.Metric)
				}
				continue
			}
			sameLosses(t, fmt.Sprintf("%s P=%d", c.name, np), rep, ref)
		}
	}
}

// TestClusterBatchAsUsersRunIt: prepare --clusters with GREM and with a
// METIS-style parts file, then cluster-batch training under mpirun (with
// and without --boundary) learns Cora; shards without clusters are refused
// with the fix named.
func TestClusterBatchAsUsersRunIt(t *testing.T) {
	needMPI(t)
	dir := t.TempDir()
	parts := filepath.Join(dir, "cora.parts.40") // every 40th node: each cluster holds training nodes
	var b strings.Builder
	for v := 0; v < 2708; v++ {
		fmt.Fprintf(&b, "%d\n", v%40)
	}
	if err := os.WriteFile(parts, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		prep []string
		args []string
	}{
		{"grem", []string{"--clusters", "40"}, nil},
		{"file", []string{"--clusters", "40", "--partitioner", "file", "--parts-file", parts}, []string{"--boundary"}},
	} {
		shards := filepath.Join(dir, c.name)
		if o, err := run(t, 0, append([]string{"prepare", "--data", cora, "--parts", "2", "--out", shards}, c.prep...)...); err != nil {
			t.Fatalf("%s prepare: %v\n%s", c.name, err, o)
		}
		out := filepath.Join(dir, c.name+".json")
		args := append([]string{"train", "--shards", shards, "--batch", "clusters", "--clusters-per-step", "8", "--epochs", "40", "--quiet", "--out", out}, c.args...)
		if o, err := run(t, 2, args...); err != nil {
			t.Fatalf("%s train: %v\n%s", c.name, err, o)
		}
		r := readReport(t, out).Result
		if r.TestAtBest < 0.7 || len(r.Curve) != 40 {
			t.Fatalf("%s: test accuracy %.3f after %d epochs of cluster batches", c.name, r.TestAtBest, len(r.Curve))
		}
	}
	plain := filepath.Join(dir, "plain")
	if o, err := run(t, 0, "prepare", "--data", cora, "--parts", "1", "--out", plain); err != nil {
		t.Fatalf("prepare: %v\n%s", err, o)
	}
	o, err := run(t, 0, "train", "--shards", plain, "--batch", "clusters", "--epochs", "1")
	if err == nil || !strings.Contains(o, "prepare them with --clusters K") {
		t.Fatalf("shards without clusters: %v\n%s", err, o)
	}
}

// TestInfo: sancus info says what a dataset, a shard directory, a model
// file and a checkpoint directory hold, reading each whole; a shard
// corrupted anywhere is reported, with exit 1 and no panic.
func TestInfo(t *testing.T) {
	dir := t.TempDir()
	m, ck, sh := filepath.Join(dir, "m.sancus"), filepath.Join(dir, "ck"), filepath.Join(dir, "sh")
	if o, err := run(t, 0, "train", "--data", cora, "--epochs", "10", "--quiet", "--save-model", m, "--checkpoint-dir", ck, "--checkpoint-every", "5", "--out", filepath.Join(dir, "r.json")); err != nil {
		t.Fatalf("train: %v\n%s", err, o)
	}
	if o, err := run(t, 0, "prepare", "--quiet", "--data", cora, "--parts", "2", "--out", sh); err != nil {
		t.Fatalf("prepare: %v\n%s", err, o)
	}
	o, err := run(t, 0, "info", cora, sh, m, ck)
	if err != nil {
		t.Fatalf("info: %v\n%s", err, o)
	}
	for _, want := range []string{"2708 nodes, 5278 undirected edges, 1433 features", "140 train, 500 validation, 1000 test",
		"2 shards of cora", "every shard read whole, every checksum good", "GCN model, 2 layers, widths [1433 16 7]",
		"checkpoint after epoch 10, 1 rank files, every checksum good"} {
		if !strings.Contains(o, want) {
			t.Errorf("info lacks %q:\n%s", want, o)
		}
	}
	f := filepath.Join(sh, shard.FileName(1, 2))
	b, _ := os.ReadFile(f)
	for _, at := range []int{40, 1000, len(b) / 2, len(b) - 10} {
		c := slices.Clone(b)
		c[at] ^= 0x41
		os.WriteFile(f, c, 0o644)
		o, err := run(t, 0, "info", sh)
		if exitCode(err) != 1 || !strings.Contains(o, "NOT usable") || strings.Contains(o, "panic") {
			t.Fatalf("a byte flipped at %d: exit %d\n%s", at, exitCode(err), o)
		}
	}
}
