package train

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"sancus/collectives"
	"sancus/collectives/wire"
	"sancus/launch"
	"sancus/src/atomicfile"
	"sancus/src/staleness"
)

// Plan is a run resolved once: the Config with every default applied (ε,
// the wire the link chose, the gradient and allreduce formats, the clip
// scale), checked against every rule, for P ranks. The engine, the
// checkpoint signature and the results read it; nothing downstream parses
// a choice or applies a default again.
type Plan struct {
	Config
	P int `json:"ranks"`
	// Link is what measuring the link between ranks found, when Resolve
	// measured it (Wire.FromLink, ranks that share no memory).
	Link LinkChoice `json:"link,omitempty"`

	policy staleness.Policy // Staleness.Policy's, with its bound and cap
}

// LinkChoice is the measured link and the forward wire it chose.
type LinkChoice struct {
	GBs       float64 `json:"gbs,omitempty"`        // GB/s per rank, every rank sending at once (0: not measured)
	LatencyUs float64 `json:"latency_us,omitempty"` // a word's time between ranks, every pair at once
	// Chosen says what the link chose and why, if it changed the default
	// or a kept choice was read back.
	Chosen string `json:"chosen,omitempty"`
}

// Validate reports the first unusable setting, without a communicator:
// the rules and the parse of every choice.
func (c Config) Validate() error {
	_, err := resolve(c, 1)
	return err
}

// Resolve applies every default and rule to cfg for the ranks of comm:
// ε from the policy, the gradient wire as the forward one, fp32 for the
// allreduce, √P as the clip scale, and, with Wire.FromLink between ranks
// that share no memory, the forward wire from the measured link (kept in
// the checkpoint directory, so a resumed run sends as the run it
// continues did). Every rank must call it: measuring the link is a
// collective.
func Resolve(cfg Config, comm collectives.Comm) (Plan, error) {
	p, err := resolve(cfg, comm.Size())
	if err != nil {
		return p, err
	}
	if p.Wire.FromLink && p.P > 1 {
		shared, err := OneHostSharedMemory(comm)
		if err != nil {
			return p, fmt.Errorf("asking the ranks' hosts: %w", err)
		}
		if !shared {
			if err := p.chooseWire(comm); err != nil {
				return p, fmt.Errorf("measuring the link: %w", err)
			}
		}
	}
	p.Wire.Grad = p.Wire.Grad.Or(p.Wire.Fwd)
	return p, nil
}

// resolve is Resolve without the link: the rules, then the defaults.
func resolve(cfg Config, ranks int) (Plan, error) {
	for _, r := range rules {
		if err := r(&cfg); err != nil {
			return Plan{}, err
		}
	}
	p := Plan{Config: cfg, P: ranks}
	st := &p.Staleness
	if st.Eps < 0 {
		st.Eps = st.Policy.DefaultBound()
	}
	var err error
	if p.policy, err = st.Policy.Policy(st.Eps, st.MaxStale); err != nil {
		return p, err
	}
	w := &p.Wire
	w.Fwd = w.Fwd.Or(wire.FP32)
	w.Allreduce = w.Allreduce.Or(wire.FP32)
	if !w.FromLink { // else Resolve, once the link chose Fwd
		w.Grad = w.Grad.Or(w.Fwd)
	}
	if p.Optim.ClipScale == 0 {
		p.Optim.ClipScale = math.Sqrt(float64(ranks))
	}
	return p, nil
}

// chooseWire measures the link (a few MB each way, every rank at once) and
// lets WireForLink pick the forward blocks' width. A run with a checkpoint
// directory keeps its first choice there.
func (p *Plan) chooseWire(c collectives.Comm) error {
	kept := ""
	if p.Run.CheckpointDir != "" {
		kept = filepath.Join(p.Run.CheckpointDir, "wire-choice")
		if b, err := os.ReadFile(kept); err == nil {
			// A width the link chose: any named one but auto (it needs --wire-error).
			if f, err := wire.ParseFormat(strings.TrimSpace(string(b))); err == nil && f != wire.AsForward && !f.IsAuto() {
				p.Wire.Fwd = f
				p.Link.Chosen = "--wire " + f.String() + ", as " + kept + " keeps from the run this continues"
				return nil
			}
		}
	}
	gbs, err := collectives.MeasureLink(c, 4<<20, 3)
	if err != nil {
		return err
	}
	if p.Link.LatencyUs, err = collectives.MeasureLatency(c, 5); err != nil {
		return err
	}
	// The measurement grows each connection's congestion window; Linux
	// restarts a window idle for a retransmission timeout (200 ms at
	// least; tcp_slow_start_after_idle), so the ranks idle past it before
	// training starts on fresh windows.
	time.Sleep(linkSettle)
	p.Link.GBs = gbs
	f, below := WireForLink(gbs)
	if f != p.Wire.Fwd {
		p.Wire.Fwd = f
		p.Link.Chosen = fmt.Sprintf("the link between ranks measured %.3f GB/s, under %g: blocks go as --wire %s", gbs, below, f)
	}
	if kept != "" && c.Rank() == 0 {
		if err := os.MkdirAll(p.Run.CheckpointDir, 0o755); err != nil {
			return err
		}
		return atomicfile.Write(kept, func(w io.Writer) error { _, err := fmt.Fprintln(w, f); return err })
	}
	return nil
}

// linkSettle is how long ranks idle after measuring the link.
const linkSettle = 300 * time.Millisecond

// OneHostSharedMemory reports whether every rank runs on this host (their
// host names agree) and the transport may join them through shared
// memory: then no network lies between them.
func OneHostSharedMemory(c collectives.Comm) (bool, error) {
	host, _ := os.Hostname()
	h := fnv.New64a()
	h.Write([]byte(host))
	all := make([]uint64, c.Size())
	if err := collectives.AllgatherFlags(c, h.Sum64(), all); err != nil {
		return false, err
	}
	for _, x := range all {
		if x != all[0] {
			return false, nil
		}
	}
	env, _ := launch.Detect()
	env.LocalSize = env.Size // one host, by the names
	return env.SharedMemory(), nil
}

// unsigned are the settings that cannot change a weight, left out of the
// checkpoint signature: how long and how often, where files go, how rows
// are chunked or computed beyond what the loss reads, and what a resumed
// run may measure anew. Every other setting of the Plan, a new one
// included, is part of it.
var unsigned = []string{
	"Optim.Epochs", "Optim.MaxLossGrowth",
	"Exchange.Native", "Exchange.RingChunk", "Exchange.SparseChunk", "Exchange.FullOutput", "Exchange.BlockByBlock", "Exchange.device_comm",
	"Model.Precompute", // the engine signs what layer 1 reads instead (precomputed)
	"Batch.Prefetch",   // the same batches, sampled earlier
	"Wire.FromLink", "link",
	"Run",
}

// Signature is the Plan as a checkpoint must match it to be resumed: its
// JSON less the unsigned settings.
func (p Plan) Signature() string {
	b, err := json.Marshal(p)
	if err != nil {
		panic(err) // a Plan holds only values that marshal
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	for _, path := range unsigned {
		dropPath(m, strings.Split(path, "."))
	}
	return canonical(m)
}

func dropPath(m map[string]any, path []string) {
	if len(path) == 1 {
		delete(m, path[0])
		return
	}
	if sub, ok := m[path[0]].(map[string]any); ok {
		dropPath(sub, path[1:])
	}
}

// canonical writes a decoded JSON value with its keys in order.
func canonical(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		b, _ := json.Marshal(v)
		return string(b)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	sb.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(k + "=" + canonical(m[k]))
	}
	sb.WriteByte('}')
	return sb.String()
}
