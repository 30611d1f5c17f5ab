package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sancus/src/progress"
	"strings"
	"time"

	"sancus/collectives"
	"sancus/collectives/mpi"
	"sancus/kernels/matrix"
	"sancus/launch"
	"sancus/src/atomicfile"
	"sancus/src/graph"
	"sancus/src/model"
	"sancus/src/prepare"
	"sancus/src/shard"
	"sancus/src/train"
)

// PredictIndex is DIR/index.json of sancus predict: every rank writes its
// own rows (in shard order, which a partitioner may have reordered), and
// node_ids maps each row to its node's original id.
//
//	nodes-RRRRR-of-PPPPP.npy        int64   (rows,)    original node ids
//	predictions-RRRRR-of-PPPPP.npy  int32   (rows,)    predicted class
//	                                uint8   (rows, C)  multi-label: 1 = predicted
//	embeddings-RRRRR-of-PPPPP.npy   float32 (rows, H)  last hidden layer (--embeddings)
type PredictIndex struct {
	Format         string      `json:"format"`
	ModelFile      string      `json:"model_file"`
	Dataset        string      `json:"dataset"`
	Nodes          int         `json:"nodes"`
	Classes        int         `json:"classes"`
	EmbeddingWidth int         `json:"embedding_width,omitempty"`
	TestAccuracy   float64     `json:"test_accuracy"`
	Parts          []PartFiles `json:"parts"`
}

// PartFiles names one rank's files.
type PartFiles struct {
	Rank        int    `json:"rank"`
	Rows        int    `json:"rows"`
	NodeIDs     string `json:"node_ids"`
	Predictions string `json:"predictions"`
	Embeddings  string `json:"embeddings,omitempty"`
}

type predictFlags struct {
	modelFile, data, shards, out string
	ranks, threads               int
	embeddings, quiet            bool
	timeout                      time.Duration
	start                        time.Time
}

// phase says, on rank 0 unless quiet, which phase predict has reached and
// how long it has run: a long load or forward pass is not a hang.
func (pf predictFlags) phase(rank int, format string, args ...any) {
	if pf.quiet || rank != 0 {
		return
	}
	fmt.Fprintf(os.Stderr, "predict: %s (%s elapsed)\n", fmt.Sprintf(format, args...), time.Since(pf.start).Round(100*time.Millisecond))
}

func runPredict(args []string) error {
	var pf predictFlags
	fs := newFlags("predict", "predict --model-file FILE (--data DIR | --shards DIR) --out DIR [flags]")
	fs.StringVar(&pf.modelFile, "model-file", "", "model `FILE` from sancus train --save-model (required)")
	fs.StringVar(&pf.data, "data", "", "dataset `DIR` (read as the model's training data was)")
	fs.StringVar(&pf.shards, "shards", "", "shard `DIR` from sancus prepare")
	fs.StringVar(&pf.out, "out", "", "output `DIR` for the .npy files and index.json (required)")
	fs.IntVar(&pf.ranks, "ranks", 1, "run this many ranks as goroutines in one process (without mpirun)")
	fs.BoolVar(&pf.embeddings, "embeddings", false, "also write the last hidden layer of every node")
	fs.IntVar(&pf.threads, "threads", 0, "kernel threads per rank (0: automatic)")
	fs.DurationVar(&pf.timeout, "comm-timeout", 5*time.Minute, "abort the job when a communication wait exceeds this")
	fs.BoolVar(&pf.quiet, "quiet", false, "no progress lines (stderr, rank 0)")
	pf.start = time.Now()
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	switch {
	case pf.modelFile == "" || pf.out == "":
		return fmt.Errorf("--model-file and --out are required")
	case (pf.data == "") == (pf.shards == ""):
		return fmt.Errorf("give exactly one of --data or --shards")
	case pf.ranks < 1 || pf.threads < 0 || pf.timeout <= 0:
		return fmt.Errorf("--ranks must be ≥ 1, --threads ≥ 0 and --comm-timeout > 0")
	}
	if err := outDir(pf.out, "the directory predict writes its .npy files and index.json in"); err != nil {
		return err
	}
	spec, m, err := model.Load(pf.modelFile)
	if err != nil {
		return err
	}
	if err := atomicfile.CheckDir(pf.out); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	// The old index goes before any file it names is overwritten; the new
	// one is written last: an index never names files of another run.
	if err := os.Remove(filepath.Join(pf.out, "index.json")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("--out: %w", err)
	}
	env, err := launch.Detect()
	if err != nil {
		return err
	}
	notePredictData(pf, spec, env.Rank)
	if env.Parallel() {
		return predictMPI(pf, spec, m)
	}
	setThreads(pf.threads, pf.ranks, 0)
	pf.phase(0, "reading %s", dataName(pf))
	shards, err := predictShards(pf, spec, pf.ranks, -1)
	if err != nil {
		return err
	}
	return collectives.NewWorld(pf.ranks, pf.timeout).Run(func(c collectives.Comm) error {
		return predictRank(pf, spec, m, c, shards[c.Rank()])
	})
}

// notePredictData warns (once, on stderr: rank 0 says it) where the
// model's weights are not a finished run's, or its data is not the data it
// was trained on: other files or sizes, or other preprocessing.
func notePredictData(pf predictFlags, spec model.Spec, rank int) {
	if rank != 0 {
		return
	}
	if spec.Status == "diverged" {
		fmt.Fprintf(os.Stderr, "sancus: model file %s was saved by a run that diverged: its weights are the last finite ones, not a trained model's\n", pf.modelFile)
	}
	data := ""
	if pf.data != "" {
		data = dataIdentity(pf.data, loadOptionsOf(pf, spec))
	} else if meta, err := shard.ReadMeta(pf.shards); err == nil {
		data = meta.Data
	}
	if spec.Data != "" && data != "" && data != spec.Data {
		fmt.Fprintf(os.Stderr, "sancus: %s is not the data model file %s was trained on: %s, trained on %s\n", dataName(pf), pf.modelFile, data, spec.Data)
	}
}

// predictMPI runs this process as one rank; any error aborts the job with
// the rank named.
func predictMPI(pf predictFlags, spec model.Spec, m *model.GCN) error {
	launch.PrepareMPI(runtime.NumCPU())
	c, err := mpi.Start(pf.timeout)
	if err != nil {
		return err
	}
	_, err = shareHost(c, pf.threads, launch.WaitAuto)
	var shared bool
	if err == nil {
		shared, err = train.OneHostSharedMemory(c)
	}
	if err == nil {
		_, err = setProgress(c, shared)
	}
	var shards []*shard.Shard
	if err == nil {
		pf.phase(c.Rank(), "reading %s", dataName(pf))
		shards, err = predictShards(pf, spec, c.Size(), c.Rank())
	}
	if err == nil {
		err = predictRank(pf, spec, m, c, shards[c.Rank()])
	}
	if err != nil {
		c.Abort(err)
	}
	if err := c.Barrier(); err != nil {
		return err
	}
	return c.Close()
}

// predictShards cuts or reads the shards (only rank's own when rank ≥ 0),
// reading the data as the model's training data was read.
// loadOptionsOf reads data as the model's training did, its class count
// the model's (the data may lack a class the model knows).
func loadOptionsOf(pf predictFlags, spec model.Spec) graph.LoadOptions {
	return graph.LoadOptions{NormalizeFeatures: spec.NormalizeFeatures, Split: spec.Split, SplitSeed: spec.SplitSeed,
		SplitName: spec.SplitName, Classes: spec.Classes, ClassesFrom: "model file " + pf.modelFile + " predicts"}
}

func predictShards(pf predictFlags, spec model.Spec, parts, rank int) ([]*shard.Shard, error) {
	shards := make([]*shard.Shard, parts)
	if pf.shards != "" {
		if meta, err := shard.ReadMeta(pf.shards); err == nil && meta.NormalizeFeatures != spec.NormalizeFeatures {
			return nil, fmt.Errorf("%s was prepared with normalize-features=%v, the model was trained with %v: prepare it again",
				pf.shards, meta.NormalizeFeatures, spec.NormalizeFeatures)
		}
		for r := range shards {
			if rank >= 0 && r != rank {
				continue
			}
			var err error
			if shards[r], err = shard.Read(pf.shards, r, parts); err != nil {
				return nil, err
			}
		}
		return shards, nil
	}
	ds, err := graph.Load(pf.data, loadOptionsOf(pf, spec))
	if err != nil {
		return nil, err
	}
	prep, err := prepare.InMemory(ds, parts, prepare.Options{Precompute: train.Precomputable(spec.Model)})
	if err != nil {
		return nil, err
	}
	for r := range shards {
		if rank >= 0 && r != rank {
			continue
		}
		if shards[r], err = prep.Shard(r); err != nil {
			return nil, err
		}
	}
	return shards, nil
}

// predictRank runs the model on this rank's rows and writes its files.
func predictRank(pf predictFlags, spec model.Spec, m *model.GCN, c collectives.Comm, s *shard.Shard) error {
	if s.FeatDim != spec.Dims[0] {
		return fmt.Errorf("model file %s expects %d input features; %s has %d", pf.modelFile, spec.Dims[0], dataName(pf), s.FeatDim)
	}
	if s.Classes > spec.Classes {
		return fmt.Errorf("model file %s predicts %d classes; %s has labels of %d", pf.modelFile, spec.Classes, dataName(pf), s.Classes)
	}
	if (spec.LabelKind == "multi") != (s.Multi != nil) {
		return fmt.Errorf("model file %s has %s labels; %s does not", pf.modelFile, spec.LabelKind, dataName(pf))
	}
	s.Classes = spec.Classes // data may lack a class the model knows
	cfg := train.Defaults()
	cfg.Model.Arch, cfg.Model.Layers, cfg.Model.Precompute, cfg.Optim.Epochs, cfg.Run.LocalRank = spec.Model, spec.Layers, s.Holds(train.Precomputable(spec.Model)), 1, -1
	cfg.Model.Residual = spec.Residual
	if spec.Layers > 1 {
		cfg.Model.Hidden = spec.Dims[1]
	}
	if spec.Model.Attends() && len(spec.Heads) == spec.Layers {
		cfg.Model.Heads, cfg.Model.OutHeads = spec.Heads[0], spec.Heads[spec.Layers-1]
		cfg.Model.Hidden = spec.Dims[1] / spec.Heads[0]
	}
	e, err := train.New(cfg, c, s)
	if err != nil {
		return err
	}
	defer e.Close()
	if err := e.SetParams(m.Flat()); err != nil {
		return fmt.Errorf("model file %s: %w", pf.modelFile, err)
	}
	pf.phase(c.Rank(), "running the %d-layer model over %d nodes on %d rank(s)", spec.Layers, s.N, c.Size())
	var meter *progress.Meter
	if c.Rank() == 0 {
		meter = progress.New(progressTo(pf.quiet), "predict", int64(spec.Layers), "layers")
	}
	logits, hidden, err := e.Predict(func(done, _ int) { meter.Set(int64(done)) })
	meter.Done()
	if err != nil {
		return err
	}
	acc, err := e.TestAccuracy(logits)
	if err != nil {
		return err
	}
	if pf.embeddings && hidden == nil {
		return fmt.Errorf("--embeddings: a 1-layer model has no hidden layer")
	}
	part := PartFiles{Rank: c.Rank(), Rows: s.Rows(), NodeIDs: partName("nodes", c), Predictions: partName("predictions", c)}
	files := []npyFile{{part.NodeIDs, "<i8", []int{s.Rows()}, collectives.Bytes(e.NodeIDs())},
		{part.Predictions, "<i4", []int{s.Rows()}, collectives.Bytes(train.Argmax(logits))}}
	if s.Multi != nil { // a label set per node: rows × classes, 0 or 1
		files[1] = npyFile{part.Predictions, "|u1", []int{s.Rows(), spec.Classes}, train.LabelSets(logits)}
	}
	if pf.embeddings {
		part.Embeddings = partName("embeddings", c)
		files = append(files, npyFile{part.Embeddings, "<f4", []int{hidden.Rows, hidden.Cols}, collectives.Bytes(hidden.Data[:hidden.Rows*hidden.Cols])})
	}
	pf.phase(c.Rank(), "writing %s", pf.out)
	for _, f := range files {
		if err := writeNPY(filepath.Join(pf.out, f.name), f.dtype, f.shape, f.data); err != nil {
			return err
		}
	}
	// Every rank's files are on disk before the index names them.
	if err := c.Barrier(); err != nil {
		return err
	}
	if c.Rank() != 0 {
		return nil
	}
	return writeIndex(pf, spec, s, acc, hidden)
}

func dataName(pf predictFlags) string { return pf.data + pf.shards }

func partName(what string, c collectives.Comm) string {
	return fmt.Sprintf("%s-%05d-of-%05d.npy", what, c.Rank(), c.Size())
}

func writeIndex(pf predictFlags, spec model.Spec, s *shard.Shard, acc float64, hidden *matrix.Dense) error {
	idx := PredictIndex{Format: "sancus-predict-1", ModelFile: pf.modelFile, Dataset: filepath.Base(dataName(pf)),
		Nodes: s.N, Classes: spec.Classes, TestAccuracy: acc}
	if pf.embeddings {
		idx.EmbeddingWidth = hidden.Cols
	}
	for r := range s.Parts {
		p := PartFiles{Rank: r, Rows: s.RowsOf(r), NodeIDs: fmt.Sprintf("nodes-%05d-of-%05d.npy", r, s.Parts),
			Predictions: fmt.Sprintf("predictions-%05d-of-%05d.npy", r, s.Parts)}
		if pf.embeddings {
			p.Embeddings = fmt.Sprintf("embeddings-%05d-of-%05d.npy", r, s.Parts)
		}
		idx.Parts = append(idx.Parts, p)
	}
	b, _ := json.MarshalIndent(idx, "", "  ")
	if err := atomicfile.WriteBytes(filepath.Join(pf.out, "index.json"), append(b, '\n')); err != nil {
		return err
	}
	fmt.Printf("predicted %d nodes of %s on %d rank(s): test accuracy %.4f; %s\n", s.N, idx.Dataset, s.Parts, acc, filepath.Join(pf.out, "index.json"))
	return nil
}

type npyFile struct {
	name, dtype string
	shape       []int
	data        []byte
}

// writeNPY writes a C-ordered NumPy array file (format 1.0) atomically.
func writeNPY(path, dtype string, shape []int, data []byte) error {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = fmt.Sprint(d)
	}
	tuple := strings.Join(dims, ", ")
	if len(shape) == 1 {
		tuple += ","
	}
	hdr := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", dtype, tuple)
	// magic (6) + version (2) + length (2) + header, padded to 64 bytes.
	pad := 64 - (10+len(hdr)+1)%64
	hdr += strings.Repeat(" ", pad%64) + "\n"
	return atomicfile.Write(path, func(w io.Writer) error {
		if _, err := w.Write([]byte{0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, byte(len(hdr)), byte(len(hdr) >> 8)}); err != nil {
			return err
		}
		if _, err := io.WriteString(w, hdr); err != nil {
			return err
		}
		_, err := w.Write(data)
		return err
	})
}
