package train

import (
	"sancus/src/result"

	"bytes"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"sancus/collectives"
	"sancus/kernels"
	"sancus/src/atomicfile"
)

// A checkpoint is everything a rank needs to continue bit-identically:
// weights, Adam state, every cached block with its version and broadcast
// log, the variation-gap references, and the report so far. Dropout masks
// are a function of (seed, epoch, layer, row), so the epoch is the RNG state.
//
// Layout: DIR/epoch-000042/rank-00001-of-00004.ckpt per rank, written through
// a temporary file; once every rank has written (barrier), rank 0 records the
// epoch in DIR/LATEST, and only then are older epochs removed. A crash at
// any point leaves the previous complete checkpoint in place.

// ErrStopped is returned by Run when a stop request (SIGTERM before the
// walltime) ended training; with a checkpoint directory, a checkpoint of the
// last completed epoch was written first.
var ErrStopped = errors.New("stopped by signal")

type ckptLayer struct {
	Bufs       [][]float32
	Last       []int
	Log        [][]int
	Ref        []float32
	Packed     [][]byte // --cache-bits: blocks kept as they arrived (Bufs[j] nil)
	PackedBits []int
}

type checkpoint struct {
	Version   int
	Rank, P   int
	Signature string
	Epoch     int // epochs completed
	Params    [][]float32
	AdamM     []float32
	AdamV     []float32
	AdamStep  int
	Fwd, Grad []ckptLayer
	Result    result.Result
	Best      float64
	Clipped   int
	Residual  []float32 // the bf16 allreduce's error feedback
}

// signature is what must match between a checkpoint and the run resuming
// it: the data set, the model's widths, what layer 1 reads, and the Plan
// (Plan.Signature: every setting that can change a weight).
func (e *Engine) signature() string {
	return fmt.Sprintf("data=%016x dims=%v precomputed=%v plan=%s", e.s.Set, e.m.Dims, e.precomputed(), e.plan.Signature())
}

func snapshotCache(be kernels.Backend, c *cache) ckptLayer {
	if c == nil {
		return ckptLayer{}
	}
	for _, d := range c.dev { // a device transport leaves received blocks on the device only
		if d != nil {
			be.Download(d)
		}
	}
	s := ckptLayer{Bufs: c.host, Last: c.last, Log: c.log, Ref: c.ref}
	if c.wire.keepPacked {
		s.Packed, s.PackedBits = c.wire.packed, c.wire.packedBits
	}
	return s
}

func restoreCache(be kernels.Backend, c *cache, s ckptLayer) error {
	if c == nil {
		return nil
	}
	if len(s.Bufs) != len(c.host) {
		return fmt.Errorf("%s: checkpoint has %d blocks, run has %d", c.name, len(s.Bufs), len(c.host))
	}
	for j := range c.host {
		if c.host[j] == nil { // kept packed
			if len(s.Packed) != len(c.host) || len(s.PackedBits) != len(c.host) || len(s.Packed[j]) == 0 && len(s.Bufs[j]) > 0 {
				return fmt.Errorf("%s: checkpoint has no packed copy of block %d (written by a sancus that kept its own block as floats: resume with that build, or start afresh)", c.name, j)
			}
			c.wire.packed[j], c.wire.packedBits[j] = s.Packed[j], s.PackedBits[j]
			if j == c.me { // this rank's encoding, which it sends from
				c.wire.own = s.Packed[j]
			}
			continue
		}
		buf := s.Bufs[j]
		if c.held != nil && c.held[j] != nil && len(buf) == c.heldOf[j]*c.width && len(buf) != len(c.host[j]) {
			// Written when the slot held all of the view's rows: keep the held ones.
			if err := kernels.GatherRows(collectives.Bytes(c.host[j]), collectives.Bytes(buf), c.held[j], 4*c.width); err != nil {
				return fmt.Errorf("%s: block %d: %w", c.name, j, err)
			}
			be.Upload(c.dev[j])
			continue
		}
		if len(buf) != len(c.host[j]) {
			return fmt.Errorf("%s: block %d has %d values, run expects %d", c.name, j, len(buf), len(c.host[j]))
		}
		copy(c.host[j], buf)
		be.Upload(c.dev[j])
	}
	copy(c.last, s.Last)
	c.log = s.Log
	if len(c.log) != len(c.host) {
		c.log = make([][]int, len(c.host))
	}
	c.ref = s.Ref
	return nil
}

func ckptPath(dir string, epoch, rank, p int) string {
	return filepath.Join(dir, fmt.Sprintf("epoch-%06d", epoch), fmt.Sprintf("rank-%05d-of-%05d.ckpt", rank, p))
}

// lastCommitted says which checkpoint a resume would start from (epoch 0:
// none, as no checkpoint precedes the first epoch).
func lastCommitted(epoch int) string {
	if epoch == 0 {
		return "no checkpoint is committed yet"
	}
	return fmt.Sprintf("the last committed checkpoint is epoch %d", epoch)
}

// saveCheckpoint writes this rank's state after `epoch` completed epochs and
// commits it once every rank has written. A rank that cannot write (a full
// disk) does not end the run: no rank commits that epoch, the failure is
// reported and recorded in res, and the next checkpoint tries again. Only
// a failure to communicate is an error.
func (e *Engine) saveCheckpoint(dir string, epoch int, res *result.Result, best float64) error {
	werr, comm := e.agree(e.writeCheckpoint(dir, epoch, res, best))
	if comm != nil {
		return fmt.Errorf("checkpoint: %w", comm)
	}
	if werr != nil {
		os.RemoveAll(filepath.Dir(ckptPath(dir, epoch, e.rank, e.P))) // this epoch's partial set; LATEST still names the last whole one
		msg := fmt.Sprintf("checkpoint after epoch %d failed (%v): training goes on; %s", epoch, werr, lastCommitted(res.Checkpoint))
		res.WriteErrors = append(res.WriteErrors, msg)
		e.notice("%s", msg)
		return e.c.Barrier()
	}
	committed := true
	if e.rank == 0 {
		if err := atomicfile.WriteBytes(filepath.Join(dir, "LATEST"), []byte(strconv.Itoa(epoch)+"\n")); err != nil {
			committed = false
			msg := fmt.Sprintf("checkpoint after epoch %d: %v: training goes on; %s", epoch, err, lastCommitted(res.Checkpoint))
			res.WriteErrors = append(res.WriteErrors, msg)
			e.notice("%s", msg)
		}
	}
	ok := make([]byte, e.P)
	if err := collectives.AllgatherFlags(e.c, boolByte(committed), ok); err != nil { // every rank learns rank 0's LATEST
		return fmt.Errorf("checkpoint: %w", err)
	}
	if ok[0] == 0 {
		return nil
	}
	res.Checkpoint = epoch
	if e.rank == 0 {
		old, _ := filepath.Glob(filepath.Join(dir, "epoch-*"))
		for _, o := range old {
			if filepath.Base(o) != fmt.Sprintf("epoch-%06d", epoch) {
				os.RemoveAll(o)
			}
		}
		e.logf("checkpoint: %s after epoch %d\n", dir, epoch)
	}
	return e.c.Barrier()
}

// writeCheckpoint writes this rank's file of the checkpoint after epoch.
func (e *Engine) writeCheckpoint(dir string, epoch int, res *result.Result, best float64) error {
	ck := checkpoint{Version: 1, Rank: e.rank, P: e.P, Signature: e.signature(), Epoch: epoch,
		Params: e.m.Flat(), AdamM: e.opt.M, AdamV: e.opt.V, AdamStep: e.opt.Step, Result: *res, Best: best, Clipped: e.tally.clipped, Residual: e.ar.residual}
	for _, L := range e.layers {
		ck.Fwd = append(ck.Fwd, snapshotCache(e.be, L.base().fwd))
		ck.Grad = append(ck.Grad, snapshotCache(e.be, L.base().grad))
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(&ck); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	var sum [4]byte
	binary.LittleEndian.PutUint32(sum[:], crc32.Checksum(buf.Bytes(), crc32.MakeTable(crc32.Castagnoli)))
	buf.Write(sum[:])
	path := ckptPath(dir, epoch, e.rank, e.P)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := atomicfile.WriteBytes(path, buf.Bytes()); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// LatestCheckpoint returns the last committed epoch in dir (0, nil if none).
func LatestCheckpoint(dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "LATEST"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	ep, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || ep < 0 {
		return 0, fmt.Errorf("%s: not an epoch number: %q", filepath.Join(dir, "LATEST"), b)
	}
	return ep, nil
}

// describeNoCheckpoint says why dir has no committed checkpoint: none was
// ever written, or only incomplete ones (a job killed while writing, before
// every rank's file was on disk and LATEST named the epoch).
func describeNoCheckpoint(dir string, p int) string {
	epochs, _ := filepath.Glob(filepath.Join(dir, "epoch-*"))
	if len(epochs) == 0 {
		return fmt.Sprintf("no checkpoint in %s", dir)
	}
	var parts []string
	for _, d := range epochs {
		files, _ := filepath.Glob(filepath.Join(d, fmt.Sprintf("rank-*-of-%05d.ckpt", p)))
		parts = append(parts, fmt.Sprintf("%s holds %d of %d rank files", filepath.Base(d), len(files), p))
	}
	return fmt.Sprintf("%s has only incomplete checkpoints (%s; none was committed in LATEST)", dir, strings.Join(parts, ", "))
}

// loadCheckpoint restores this rank from dir's committed epoch.
func (e *Engine) loadCheckpoint(dir string, epoch int) (*checkpoint, error) {
	path := ckptPath(dir, epoch, e.rank, e.P)
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if other, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "rank-00000-of-*.ckpt")); len(other) > 0 {
			var p int
			fmt.Sscanf(filepath.Base(other[0]), "rank-00000-of-%05d.ckpt", &p)
			return nil, fmt.Errorf("resume: the checkpoint after epoch %d in %s was written by %d ranks; this run has %d: resume on %d ranks, or train afresh in another --checkpoint-dir", epoch, dir, p, e.P, p)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	ck, err := decodeCheckpoint(path, raw)
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	if ck.Signature != e.signature() {
		return nil, fmt.Errorf("resume: %s was written by a different run:\n  checkpoint: %s\n  this run:   %s", path, ck.Signature, e.signature())
	}
	params := e.m.Flat()
	if len(ck.Params) != len(params) {
		return nil, fmt.Errorf("resume: %s: %d parameter tensors, model has %d", path, len(ck.Params), len(params))
	}
	for i := range params {
		if len(ck.Params[i]) != len(params[i]) {
			return nil, fmt.Errorf("resume: %s: tensor %d has %d values, model has %d", path, i, len(ck.Params[i]), len(params[i]))
		}
		copy(params[i], ck.Params[i])
	}
	copy(e.opt.M, ck.AdamM)
	copy(e.opt.V, ck.AdamV)
	e.opt.Step = ck.AdamStep
	e.tally.clipped = ck.Clipped
	e.ar.residual = ck.Residual
	for l, L := range e.layers {
		if l < len(ck.Fwd) {
			if err := restoreCache(e.be, L.base().fwd, ck.Fwd[l]); err != nil {
				return nil, fmt.Errorf("resume: %s: %w", path, err)
			}
			if err := restoreCache(e.be, L.base().grad, ck.Grad[l]); err != nil {
				return nil, fmt.Errorf("resume: %s: %w", path, err)
			}
		}
	}
	return ck, nil
}

// decodeCheckpoint checks a rank file's checksum and decodes it.
func decodeCheckpoint(path string, raw []byte) (*checkpoint, error) {
	if len(raw) < 4 {
		return nil, fmt.Errorf("%s is truncated", path)
	}
	body := raw[:len(raw)-4]
	if crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)) != binary.LittleEndian.Uint32(raw[len(raw)-4:]) {
		return nil, fmt.Errorf("%s: checksum mismatch, the checkpoint is corrupt", path)
	}
	var ck checkpoint
	if err := gob.NewDecoder(bytes.NewReader(body)).Decode(&ck); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &ck, nil
}

// CheckpointState is what a checkpoint directory holds: its committed
// epoch, the ranks that wrote it, and the run it belongs to.
type CheckpointState struct {
	Epoch     int
	Ranks     int
	Signature string // the run's configuration, as resume compares it
}

// InspectCheckpoint reads dir's committed checkpoint without an engine:
// every rank's file is read whole and its checksum checked, so a resume
// would find it complete and uncorrupted.
func InspectCheckpoint(dir string) (CheckpointState, error) {
	var st CheckpointState
	ep, err := LatestCheckpoint(dir)
	if err != nil {
		return st, err
	}
	if ep == 0 {
		return st, fmt.Errorf("%s", describeNoCheckpoint(dir, 0))
	}
	files, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("epoch-%06d", ep), "rank-*-of-*.ckpt"))
	if len(files) == 0 {
		return st, fmt.Errorf("%s: LATEST names epoch %d, which has no rank files", dir, ep)
	}
	fmt.Sscanf(filepath.Base(files[0]), "rank-00000-of-%05d.ckpt", &st.Ranks)
	if st.Ranks != len(files) {
		return st, fmt.Errorf("%s: epoch %d holds %d rank files of %d", dir, ep, len(files), st.Ranks)
	}
	for r := range st.Ranks {
		path := ckptPath(dir, ep, r, st.Ranks)
		raw, err := os.ReadFile(path)
		if err != nil {
			return st, err
		}
		ck, err := decodeCheckpoint(path, raw)
		if err != nil {
			return st, err
		}
		if ck.Rank != r || ck.P != st.Ranks || ck.Epoch != ep {
			return st, fmt.Errorf("%s holds rank %d of %d after epoch %d", path, ck.Rank, ck.P, ck.Epoch)
		}
		st.Epoch, st.Signature = ep, ck.Signature
	}
	return st, nil
}
