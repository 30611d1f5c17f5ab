package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sancus/launch"
	"sancus/src/atomicfile"
	"sancus/src/model"
	"sancus/src/result"
	"sancus/src/shard"
	"sancus/src/train"
	"strings"
)

// A run's outputs: checked and locked before any work, written at its end
// (the weights, the model, the results JSON), and how a stop or a
// divergence becomes the exit status once they are.

// --out is a file in train, plan, bench, partition-stats and export-metis
// and a directory in gen, prepare and predict. A path of the other kind is
// refused before any work, saying which was meant and what to give, rather
// than failing at the end or writing somewhere unexpected.

// outFile refuses a directory (or a path ending in /) as --out where the
// command writes one file, what (e.g. "the results JSON file"); name is
// the file the message suggests inside that directory.
func outFile(path, what, name string) error {
	if path == "" {
		return nil
	}
	fi, err := os.Stat(path)
	isDir := err == nil && fi.IsDir()
	if !isDir && !strings.HasSuffix(path, "/") {
		return nil
	}
	kind := "is a directory"
	if !isDir {
		kind = "ends in /, a directory"
	}
	return fmt.Errorf("--out names %s; %s %s: give %s", what, path, kind, filepath.Join(path, name))
}

// outDir refuses an existing file as --out where the command writes a
// directory, what (e.g. "the shard directory").
func outDir(path, what string) error {
	fi, err := os.Stat(path)
	if err != nil && fileExt[strings.ToLower(filepath.Ext(path))] {
		// Missing, but named as the files sancus writes are: a
		// directory of that name would surprise whoever meant a file.
		return fmt.Errorf("--out names %s; %s is named as a file: give a directory, e.g. %s", what, path, strings.TrimSuffix(path, filepath.Ext(path)))
	}
	if err != nil || fi.IsDir() {
		return nil // missing: created later; a directory: what is meant
	}
	kind := "is a file, not a directory"
	if !fi.Mode().IsRegular() {
		kind = "is not a directory"
	}
	hint := "the path of a directory (created if missing)"
	if ext := filepath.Ext(path); ext != "" && ext != filepath.Base(path) {
		if _, err := os.Stat(strings.TrimSuffix(path, ext)); err != nil {
			hint = "a directory, e.g. " + strings.TrimSuffix(path, ext)
		}
	}
	return fmt.Errorf("--out names %s; %s %s: give %s", what, path, kind, hint)
}

// fileExt are the endings of the files sancus reads and writes.
var fileExt = map[string]bool{".json": true, ".tsv": true, ".csv": true, ".txt": true, ".mtx": true, ".npz": true, ".npy": true, ".graph": true, ".png": true}

// checkOutputs creates and test-writes every output location. write says
// whether this process writes the results (rank 0); every rank writes
// checkpoints.
func checkOutputs(cfg train.Config, tf trainFlags, write bool) error {
	if cfg.Run.CheckpointDir != "" {
		if err := atomicfile.CheckDir(cfg.Run.CheckpointDir); err != nil {
			return fmt.Errorf("--checkpoint-dir: %w", err)
		}
	}
	if !write {
		return nil
	}
	if err := atomicfile.Check(tf.out); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	for flag, path := range map[string]string{"--save-weights": tf.saveWeights, "--save-model": tf.saveModel} {
		if path == "" {
			continue
		}
		if err := atomicfile.Check(path); err != nil {
			return fmt.Errorf("%s: %w", flag, err)
		}
	}
	return nil
}

// lockOutputs takes the results path and the checkpoint directory for
// this run: a second run on either is refused at start, naming this one.
func lockOutputs(cfg train.Config, tf trainFlags) (release func(), err error) {
	paths := []string{tf.out}
	if cfg.Run.CheckpointDir != "" {
		paths = append(paths, cfg.Run.CheckpointDir)
	}
	var held []func()
	release = func() {
		for _, r := range held {
			r()
		}
	}
	for _, p := range paths {
		r, err := atomicfile.Lock(p)
		if err != nil {
			release()
			return nil, err
		}
		held = append(held, r)
	}
	return release, nil
}

// exitUnlocked releases the output locks and exits.
func exitUnlocked(code int) {
	unlock()
	os.Exit(code)
}

// unlock releases the output locks; ended calls it before an exit that
// skips deferred calls.
var unlock = func() {}

// ended turns how training ended into the exit status: a honoured stop
// request exits 85 (requeue), a divergence 86, both after the report.
func ended(err error, cfg train.Config, res *result.Result, sideErr error) error {
	if errors.Is(err, train.ErrDiverged) {
		fmt.Fprintf(os.Stderr, "sancus: the results JSON has the curve up to the divergence (status \"diverged\"); exiting %d\n", launch.ExitDiverged)
		exitUnlocked(launch.ExitDiverged)
	}
	if !errors.Is(err, train.ErrStopped) {
		return sideErr // completed: a failed side write still fails the run
	}
	if cfg.Run.CheckpointDir == "" {
		fmt.Fprintln(os.Stderr, "sancus: stopped by signal without --checkpoint-dir: progress is lost")
		exitUnlocked(1)
	}
	if last := len(res.Curve); res.Checkpoint == last {
		fmt.Fprintf(os.Stderr, "sancus: checkpoint committed in %s; exiting %d so the job can be requeued and --resume\n", cfg.Run.CheckpointDir, launch.ExitRequeue)
	} else {
		fmt.Fprintf(os.Stderr, "sancus: stopped after epoch %d, but its checkpoint failed: --resume continues after epoch %d from %s; exiting %d\n",
			last, res.Checkpoint, cfg.Run.CheckpointDir, launch.ExitRequeue)
	}
	exitUnlocked(launch.ExitRequeue)
	return nil
}

// finish writes the run's side outputs (weights, model) and then its
// results JSON, which is written whatever became of them: a side write
// that failed is recorded in it (write_errors) and returned as sideErr,
// after the JSON. err is a failure to write the JSON itself.
func finish(rep *result.Run, cfg train.Plan, tf trainFlags, params, best [][]float32) (sideErr, err error) {
	res := rep.Result
	var side []error
	if tf.saveWeights != "" {
		var b []byte
		for _, p := range params {
			for _, v := range p {
				b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
			}
		}
		if err := writeAtomic(tf.saveWeights, b); err != nil {
			side = append(side, fmt.Errorf("--save-weights: %w", err))
		}
	}
	if tf.saveModel != "" {
		w, epoch, acc, which := params, len(res.Curve), res.FinalTestAcc, "the last epoch's"
		if tf.saveModelAt == atBest && best != nil {
			w, epoch, acc, which = best, res.BestEpoch, res.TestAtBest, "the best validation epoch's"
		} else if tf.saveModelAt == atBest && res.Checkpoint > 0 {
			which = "the last epoch's (no epoch since the resume beat the best before it)"
		} else if tf.saveModelAt == atBest {
			which = "the last epoch's (no epoch reached a validation accuracy above 0)"
		}
		if err := saveModel(tf.saveModel, rep, cfg, tf, w, epoch, acc); err != nil {
			side = append(side, fmt.Errorf("--save-model: %w", err))
		} else {
			fmt.Printf("model: %s holds %s weights (epoch %d, test accuracy %.4f; --save-model-at)\n", tf.saveModel, which, epoch, acc)
		}
	}
	for _, e := range side {
		res.WriteErrors = append(res.WriteErrors, e.Error())
	}
	fmt.Printf("done: test accuracy %.4f at best validation epoch %d (val %.4f); final test %.4f; %.2f ms/epoch; %.1fs total\n",
		res.TestAtBest, res.BestEpoch, res.BestValAcc, res.FinalTestAcc, res.MeanEpochMs, res.TotalSec)
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := writeAtomic(tf.out, append(b, '\n')); err != nil {
		return nil, err
	}
	fmt.Printf("results: %s\n", tf.out)
	if sideErr = errors.Join(side...); sideErr != nil {
		fmt.Fprintf(os.Stderr, "sancus: %v (the results JSON records it)\n", sideErr)
	}
	return sideErr, nil
}

// saveModel writes the parameters after epoch (whose test accuracy is
// acc) with what a later predict needs to run them on the same kind of
// data: widths, normalization, how features were preprocessed and how the
// split was drawn.
func saveModel(path string, rep *result.Run, cfg train.Plan, tf trainFlags, params [][]float32, epoch int, acc float64) error {
	load := tf.load
	res := rep.Result
	m, err := model.New(cfg.Model.Arch, res.Dims, res.Heads, 0)
	if err != nil {
		return err
	}
	for i, p := range m.Flat() {
		copy(p, params[i])
	}
	training, _ := json.Marshal(cfg)
	spec := model.Spec{Model: cfg.Model.Arch, Layers: len(res.Dims) - 1, Dims: res.Dims, Heads: res.Heads, Residual: cfg.Model.Residual, Normalization: model.SymNorm,
		NormalizeFeatures: load.NormalizeFeatures, Split: load.Split, SplitSeed: load.SplitSeed, SplitName: load.SplitName,
		Classes: res.Dims[len(res.Dims)-1], LabelKind: map[bool]string{true: "multi", false: "single"}[res.Metric == "micro-f1"], Epochs: epoch, FinalTestAcc: acc, Training: training}
	if res.Status != "completed" {
		spec.Status = res.Status
	}
	if rep.Shards != "" { // prepared shards: their preprocessing is the model's
		if meta, err := shard.ReadMeta(rep.Shards); err == nil {
			spec.NormalizeFeatures, spec.Split, spec.SplitSeed, spec.SplitName, spec.Data = meta.NormalizeFeatures, meta.Split, meta.SplitSeed, meta.SplitName, meta.Data
		}
	} else {
		spec.Data = dataIdentity(tf.data, load)
	}
	return model.Save(path, spec, m)
}
