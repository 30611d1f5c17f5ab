package train

// Rank replay: one rank of a P-rank job trained alone, to measure its
// compute at a P that needs more ranks than this machine has. The rank's
// engine is the real one, built and stepped by the code a job runs, on a
// collectives.Solo communicator: its receives are filled with made-up
// rows and its sends are dropped, so an epoch costs what the rank's own
// products, packing and encoding cost, with no wait, and counts the bytes
// it would move. What its peers would contribute at set-up (which of its
// rows they ask for, their training nodes, their node ids) decides what
// it computes and sends, so the replay answers those collectives from the
// peers' blocks, in the order set-up makes them (setupScript): the same
// helpers the engine uses compute each answer. Results are meaningless;
// timing and counts are the point.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"sancus/collectives"
	"sancus/kernels/matrix"
	"sancus/src/shard"
)

// Peer is what the replay needs of another rank's shard.
type Peer struct {
	Block    *matrix.CSR // its block of Â at the replayed rank's columns
	Train    []int32     // its training rows (local)
	IDs      []int32     // its rows' node ids (nil: contiguous from Offsets)
	NonEmpty []bool      // which of its blocks have entries
}

// PeerOf extracts what the replay of rank r needs from peer shard s.
func PeerOf(s *shard.Shard, r int) Peer {
	ne := make([]bool, len(s.Blocks))
	for j, b := range s.Blocks {
		ne[j] = b.NNZ() > 0
	}
	return Peer{Block: s.Blocks[r], Train: s.Train, IDs: s.NodeIDs, NonEmpty: ne}
}

// Replay is one rank's engine run alone.
type Replay struct {
	E    *Engine
	Comm *collectives.Solo
	next int // the next step's epoch number: calls to Epochs continue the run
}

// NewReplay builds rank s.Rank's engine of an s.Parts-rank job, peers[i]
// being rank i's (peers[s.Rank] is not read). It replays the sparse or the
// dense exchange of a GCN in global-batch training.
func NewReplay(cfg Config, s *shard.Shard, peers []Peer) (*Replay, error) {
	if len(peers) != s.Parts {
		return nil, fmt.Errorf("replay of rank %d of %d given %d peers", s.Rank, s.Parts, len(peers))
	}
	switch {
	case !cfg.Model.Arch.ReadsAX():
		return nil, fmt.Errorf("--model %v: the replay answers the set-up of a GCN; use --model gcn", cfg.Model.Arch)
	case cfg.Batch.Mode != BatchGlobal:
		return nil, fmt.Errorf("--batch %v: the replay runs global-batch training; drop --batch", cfg.Batch.Mode)
	case cfg.Wire.FromLink:
		return nil, fmt.Errorf("--wire-from-link measures a link between ranks, which a replay has not: name --wire")
	case cfg.Exchange.DeviceComm != collectives.DeviceCommRank:
		return nil, fmt.Errorf("--device-comm: the replay runs on the rank transport; drop it")
	}
	plan, err := resolve(cfg, s.Parts)
	if err != nil {
		return nil, err
	}
	plan.Wire.Grad = plan.Wire.Grad.Or(plan.Wire.Fwd)
	c := collectives.NewSolo(s.Rank, s.Parts)
	c.Script = setupScript(plan, s, peers)
	e, err := NewPlanned(plan, c, s)
	if err != nil {
		return nil, fmt.Errorf("replay of rank %d of %d: %w", s.Rank, s.Parts, err)
	}
	if !c.ScriptDone() {
		e.Close()
		return nil, fmt.Errorf("replay of rank %d of %d: set-up made fewer collectives than the replay's script holds: the engine's set-up changed; update setupScript", s.Rank, s.Parts)
	}
	return &Replay{E: e, Comm: c}, nil
}

// ReplayEpoch is one replayed training step: its time and the bytes the
// rank would have sent and received.
type ReplayEpoch struct {
	Ms         float64
	Sent, Recv int64
}

// Epochs runs the next n training steps (forward, backward, update; no
// evaluation) and reports each. A step the made-up rows drive to a
// non-finite loss still counts: only its update is skipped.
func (r *Replay) Epochs(n int) ([]ReplayEpoch, error) {
	out := make([]ReplayEpoch, n)
	st := r.Comm.Stats()
	for ep := range n {
		before, t0 := st.Total(), time.Now()
		_, err := r.E.trainStep(r.next)
		r.next++
		if err != nil && !errors.Is(err, ErrDiverged) {
			return out, err
		}
		after := st.Total()
		out[ep] = ReplayEpoch{Ms: ms(time.Since(t0)), Sent: after.BytesSent - before.BytesSent, Recv: after.BytesRecv - before.BytesRecv}
	}
	return out, nil
}

// Close releases the engine.
func (r *Replay) Close() error { return r.E.Close() }

// setupScript answers, in order, the collectives whose peers' parts the
// engine's set-up reads (NewPlanned, setup, chooseExchange, restrictOutput).
func setupScript(plan Plan, s *shard.Shard, peers []Peer) []collectives.Answer {
	me, p := s.Rank, s.Parts
	if p == 1 { // every set-up collective returns at once
		return nil
	}
	ownID := func(i, r int) int64 {
		if ids := peerIDs(s, peers, i); ids != nil {
			return int64(ids[r])
		}
		return s.Offsets[i] + int64(r)
	}
	// want[i]: the rows of this rank peer i asks for (sparseView's rule on
	// its block), and need[j]: those this rank asks of root j.
	want := make([][]int32, p)
	need := make([][]int32, p)
	for i := range p {
		if i == me {
			continue
		}
		want[i] = viewRows(peers[i].Block)
		need[i] = viewRows(s.Blocks[i])
	}
	same := collectives.Answer{Name: "the shard sets", Fill: func(recv []byte, counts []int) error {
		for j := range p {
			copy(recv[j*counts[me]:(j+1)*counts[me]], recv[me*counts[me]:(me+1)*counts[me]])
		}
		return nil
	}}
	// The memory check's agreement: every other rank fits (an empty
	// message); the replayed rank's own stays as it sent it.
	fits := collectives.Answer{Name: "the memory check", Fill: func(recv []byte, counts []int) error {
		off := 0
		for j, n := range counts {
			if j != me {
				clear(recv[off : off+n])
			}
			off += n
		}
		return nil
	}}
	script := []collectives.Answer{same, fits, {Name: "the block sparsity", Fill: func(recv []byte, counts []int) error {
		return perRank("the block sparsity", recv, counts, me, 1, func(int) int { return p }, func(i int, b []byte) {
			for j, ne := range peers[i].NonEmpty {
				b[j] = boolByte(ne)
			}
		})
	}}}
	sparse := !plan.Exchange.Dense && p > 1
	if sparse {
		script = append(script, asked("the rows asked", want, me)...)
		script = append(script, collectives.Answer{Name: "the node ids of the rows asked", Alltoall: true, Fill: func(recv []byte, counts []int) error {
			return perRank("the node ids of the rows asked", recv, counts, me, 8, func(j int) int { return len(need[j]) }, func(j int, b []byte) {
				for k, r := range need[j] {
					binary.NativeEndian.PutUint64(b[8*k:], uint64(ownID(j, int(r))))
				}
			})
		}})
	} else if s.NodeIDs != nil && p > 1 { // denseView
		script = append(script, collectives.Answer{Name: "every rank's node ids", Fill: func(recv []byte, counts []int) error {
			return perRank("every rank's node ids", recv, counts, me, 8, s.RowsOf, func(j int, b []byte) {
				for r := range s.RowsOf(j) {
					binary.NativeEndian.PutUint64(b[8*r:], uint64(ownID(j, r)))
				}
			})
		}})
	}
	if !restrictsOutput(plan) {
		return script
	}
	script = append(script,
		collectives.Answer{Name: "the training counts", Fill: func(recv []byte, counts []int) error {
			return perRank("the training counts", recv, counts, me, 8, func(int) int { return 1 }, func(i int, b []byte) { binary.NativeEndian.PutUint64(b, uint64(len(peers[i].Train))) })
		}},
		collectives.Answer{Name: "the training nodes", Fill: func(recv []byte, counts []int) error {
			return perRank("the training nodes", recv, counts, me, 8, func(i int) int { return len(peers[i].Train) }, func(i int, b []byte) {
				for k, r := range peers[i].Train {
					binary.NativeEndian.PutUint64(b[8*k:], uint64(ownID(i, int(r))))
				}
			})
		}})
	if !sparse || plan.Wire.Delta || plan.Wire.CacheBits {
		return script
	}
	// rowsRead: the positions among the rows each peer holds of this rank
	// that its restricted forward (read at its training rows) and gradient
	// (this rank's training rows) blocks read.
	training := make([]bool, s.Rows())
	for _, r := range s.Train {
		training[r] = true
	}
	fwd, grad := make([][]int32, p), make([][]int32, p)
	for i := range p {
		if i == me {
			continue
		}
		b := peers[i].Block
		readFwd, used := make([]bool, b.Cols), make([]bool, b.Cols)
		isTrain := make([]bool, b.Rows)
		for _, r := range peers[i].Train {
			isTrain[r] = true
		}
		for r := range b.Rows {
			for q := b.RowPtr[r]; q < b.RowPtr[r+1]; q++ {
				used[b.ColIdx[q]] = true
				readFwd[b.ColIdx[q]] = readFwd[b.ColIdx[q]] || isTrain[r]
			}
		}
		for k, row := range want[i] {
			if readFwd[row] {
				fwd[i] = append(fwd[i], int32(k))
			}
			if used[row] && training[row] {
				grad[i] = append(grad[i], int32(k))
			}
		}
	}
	script = append(script, asked("the forward rows read", fwd, me)...)
	return append(script, asked("the gradient rows read", grad, me)...)
}

// restrictsOutput reports whether restrictOutput restricts a GCN's last
// layer: it sends (is not layer 1 on ÂX) and every row is not asked for.
func restrictsOutput(plan Plan) bool {
	if plan.Exchange.FullOutput {
		return false
	}
	return plan.Model.Layers > 1 || plan.Precomputed() == 0
}

// viewRows is sparseView's list of a root's rows that block b reads.
func viewRows(b *matrix.CSR) []int32 {
	need := columnsUsed(b)
	if len(need) > 0 && 100*len(need) >= wholeBlockShare*b.Cols {
		return allRows(b.Cols)
	}
	return need
}

func peerIDs(s *shard.Shard, peers []Peer, i int) []int32 {
	if i == s.Rank {
		return s.NodeIDs
	}
	return peers[i].IDs
}

// asked answers askRoots: each peer's count, then its list.
func asked(name string, lists [][]int32, me int) []collectives.Answer {
	return []collectives.Answer{
		{Name: name + " (counts)", Alltoall: true, Fill: func(recv []byte, counts []int) error {
			return perRank(name+" (counts)", recv, counts, me, 8, func(int) int { return 1 }, func(i int, b []byte) { binary.NativeEndian.PutUint64(b, uint64(len(lists[i]))) })
		}},
		{Name: name, Alltoall: true, Fill: func(recv []byte, counts []int) error {
			return perRank(name, recv, counts, me, 4, func(i int) int { return len(lists[i]) }, func(i int, b []byte) {
				for k, r := range lists[i] {
					binary.NativeEndian.PutUint32(b[4*k:], uint32(r))
				}
			})
		}},
	}
}

// perRank writes every peer's part of recv, n values of elem bytes
// (put fills them), checking that the engine asked for as many bytes.
func perRank(name string, recv []byte, counts []int, me, elem int, n func(i int) int, put func(i int, b []byte)) error {
	off := 0
	for i, c := range counts {
		if i != me {
			if c != n(i)*elem {
				return fmt.Errorf("replay: %s: the engine asked rank %d for %d bytes, the replay has %d: the engine's set-up changed; update setupScript", name, i, c, n(i)*elem)
			}
			put(i, recv[off:off+c])
		}
		off += c
	}
	return nil
}
