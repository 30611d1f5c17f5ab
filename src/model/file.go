package model

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"

	"sancus/src/atomicfile"
	"sancus/src/budget"
)

// A model file holds a trained model whole: everything needed to run it on
// a graph, with no training run at hand.
//
//	magic "SANCUSMD" | version u32 | spec length u32 | spec (JSON) |
//	tensor count u32 | per tensor: rows u32, cols u32, float32 values |
//	CRC-32C of everything before it u32
//
// Tensors are the parameters in Flat order (W0, b0, W1, b1, …); a bias is
// a 1×n tensor.
const (
	fileMagic   = "SANCUSMD"
	FileVersion = 1
)

// Spec is a model's configuration as saved with its weights.
type Spec struct {
	Model  Arch  `json:"model"`           // gcn, sage or gat
	Layers int   `json:"layers"`          // graph convolutions
	Dims   []int `json:"dims"`            // feature width, hidden widths …, classes
	Heads  []int `json:"heads,omitempty"` // GAT: attention heads per layer
	// Residual: hidden layers of equal width add their input to their output.
	Residual bool `json:"residual,omitempty"`
	// Normalization is the adjacency the model was trained on.
	Normalization string `json:"normalization"`
	// NormalizeFeatures: feature rows were divided by their sums.
	NormalizeFeatures bool `json:"normalize_features"`
	// How the training split was drawn for data that ships none (and which
	// OGB split was used), so predict evaluates on the same test nodes.
	Split     string `json:"split,omitempty"`
	SplitSeed uint64 `json:"split_seed,omitempty"`
	SplitName string `json:"split_name,omitempty"`
	Classes   int    `json:"classes"`
	LabelKind string `json:"label_kind"` // "single" (softmax)
	// Where the weights came from, for people: the epoch they are of (the
	// last, or the best validation epoch's with train --save-model-at
	// best), their test accuracy, the run's configuration.
	Epochs       int             `json:"epochs"`
	FinalTestAcc float64         `json:"final_test_acc"`
	Training     json.RawMessage `json:"training,omitempty"`
	// Data is the training data's files, their sizes and how they were
	// read ("": not known); predict warns when its data's differs.
	Data string `json:"data,omitempty"`
	// Status is how the training run ended where not completed:
	// "diverged" (the weights are the last finite ones) or "stopped".
	Status string `json:"status,omitempty"`
}

// SymNorm names the adjacency every sancus GCN uses.
const SymNorm = "D^-1/2 (A+I) D^-1/2"

// Save writes spec and the parameters of m to path (atomically).
func Save(path string, spec Spec, m *GCN) error {
	js, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	b.WriteString(fileMagic)
	le := binary.LittleEndian
	b.Write(le.AppendUint32(nil, FileVersion))
	b.Write(le.AppendUint32(nil, uint32(len(js))))
	b.Write(js)
	b.Write(le.AppendUint32(nil, uint32(len(m.Flat()))))
	for l := range m.W {
		for k, p := range m.Tensors(l) {
			rows, cols := m.Shape(l, k)
			writeTensor(&b, rows, cols, p)
		}
	}
	b.Write(le.AppendUint32(nil, crc32.Checksum(b.Bytes(), crc32.MakeTable(crc32.Castagnoli))))
	return atomicfile.WriteBytes(path, b.Bytes())
}

func writeTensor(b *bytes.Buffer, rows, cols int, p []float32) {
	le := binary.LittleEndian
	b.Write(le.AppendUint32(nil, uint32(rows)))
	b.Write(le.AppendUint32(nil, uint32(cols)))
	for _, v := range p {
		b.Write(le.AppendUint32(nil, math.Float32bits(v)))
	}
}

// ErrNotModel is Load's error for a file that is no model file at all.
var ErrNotModel = errors.New("not a sancus model file")

// Load reads a model file, checking magic, version, checksum, that the
// spec is consistent, that the tensors are the model its spec describes,
// and that every weight is finite.
func Load(path string) (Spec, *GCN, error) {
	var spec Spec
	raw, err := readModelFile(path)
	if err != nil {
		return spec, nil, err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("model file %s: %s", path, fmt.Sprintf(format, args...))
	}
	if len(raw) < 20 || string(raw[:8]) != fileMagic {
		if c := atomicfile.Compression(raw); c != "" {
			return spec, nil, fmt.Errorf("model file %s: %w (bad magic: the file is %s-compressed; decompress it first)", path, ErrNotModel, c)
		}
		return spec, nil, fmt.Errorf("model file %s: %w (bad magic)", path, ErrNotModel)
	}
	le := binary.LittleEndian
	body, stored := raw[:len(raw)-4], le.Uint32(raw[len(raw)-4:])
	if crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)) != stored {
		return spec, nil, bad("checksum mismatch: the file is corrupt or truncated")
	}
	if v := le.Uint32(raw[8:]); v != FileVersion {
		return spec, nil, bad("format version %d, this sancus reads %d", v, FileVersion)
	}
	r := bytes.NewReader(body[12:])
	var n uint32
	binary.Read(r, le, &n)
	if int64(n) > int64(r.Len()) {
		return spec, nil, bad("spec of %d bytes, the file holds %d after its header", n, r.Len())
	}
	js := make([]byte, n)
	if _, err := io.ReadFull(r, js); err != nil {
		return spec, nil, bad("truncated spec")
	}
	if err := json.Unmarshal(js, &spec); err != nil {
		return spec, nil, bad("spec: %v", err)
	}
	if err := spec.check(int64(r.Len())); err != nil {
		return spec, nil, bad("%v", err)
	}
	m, err := New(spec.Model, spec.Dims, spec.Heads, 0)
	if err != nil {
		return spec, nil, bad("%v", err)
	}
	if err := readTensors(r, m); err != nil {
		return spec, nil, bad("%v", err)
	}
	return spec, m, nil
}

// readModelFile reads a model file whole: a regular file that fits.
func readModelFile(path string) ([]byte, error) {
	f, err := atomicfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := budget.Check("model file "+path, fmt.Sprintf("a file of %d bytes", st.Size()), st.Size()); err != nil {
		return nil, err
	}
	raw := make([]byte, st.Size())
	if _, err := io.ReadFull(f, raw); err != nil {
		return nil, fmt.Errorf("model file %s: %w", path, err)
	}
	return raw, nil
}

// check holds a spec to itself before its dims size anything: the layer
// count is the widths' less one, every width and head count is at least
// 1 and divides as GAT needs, and the parameters they make fit in left
// bytes of tensors.
func (s *Spec) check(left int64) error {
	if s.LabelKind != "single" && s.LabelKind != "multi" {
		return fmt.Errorf("label kind %q: this sancus runs single- or multi-label models", s.LabelKind)
	}
	if s.Layers != len(s.Dims)-1 || s.Layers < 1 {
		return fmt.Errorf("layers %d inconsistent with dims %v (%d widths make %d layers): the spec is corrupt", s.Layers, clipDims(s.Dims), len(s.Dims), len(s.Dims)-1)
	}
	for _, d := range s.Dims {
		if d < 1 || d > math.MaxInt32 {
			return fmt.Errorf("dims %v: every width must be 1 to %d", clipDims(s.Dims), math.MaxInt32)
		}
	}
	if s.Classes != s.Dims[len(s.Dims)-1] {
		return fmt.Errorf("%d classes, but the last of dims %v is %d: the spec is corrupt", s.Classes, clipDims(s.Dims), s.Dims[len(s.Dims)-1])
	}
	m := &GCN{Dims: s.Dims}
	tensors := 2
	switch s.Model {
	case ArchSAGE:
		tensors = 3
	case ArchGAT:
		tensors = 4
		if len(s.Heads) != s.Layers {
			return fmt.Errorf("%d layers need %d head counts, the spec has %v", s.Layers, s.Layers, clipDims(s.Heads))
		}
		for l, h := range s.Heads {
			if h < 1 || h > math.MaxInt32 || (l+2 < len(s.Dims) && s.Dims[l+1]%h != 0) {
				return fmt.Errorf("layer %d's width %d does not split into %d heads", l+1, s.Dims[l+1], h)
			}
		}
		m.Heads = s.Heads
	}
	// Each value takes 4 bytes of the file, and each tensor 8 of shape.
	values := 0.0
	for l := 0; l < s.Layers; l++ {
		for k := range tensors {
			rows, cols := m.Shape(l, k)
			values += float64(rows) * float64(cols)
		}
	}
	if need := 4*values + 8*float64(tensors*s.Layers) + 4; need > float64(left) {
		return fmt.Errorf("a %v of dims %v has %.0f parameters, more than the %d bytes left in the file hold", s.Model, clipDims(s.Dims), values, left)
	}
	return nil
}

// clipDims shortens a list of widths quoted in an error.
func clipDims(d []int) string {
	if len(d) <= 8 {
		return fmt.Sprint(d)
	}
	return fmt.Sprintf("%v … (%d widths)", d[:8], len(d))
}

func readTensors(r *bytes.Reader, m *GCN) error {
	le := binary.LittleEndian
	var count uint32
	if err := binary.Read(r, le, &count); err != nil {
		return errors.New("truncated before the tensors")
	}
	flat := m.Flat()
	if int(count) != len(flat) {
		return fmt.Errorf("%d tensors, the spec's model has %d", count, len(flat))
	}
	names := m.TensorNames()
	for i, p := range flat {
		var rows, cols uint32
		binary.Read(r, le, &rows)
		binary.Read(r, le, &cols)
		if int(rows)*int(cols) != len(p) {
			return fmt.Errorf("tensor %d is %dx%d, the spec's model needs %d values", i, rows, cols, len(p))
		}
		if err := binary.Read(r, le, p); err != nil {
			return fmt.Errorf("tensor %d: truncated", i)
		}
		for j, v := range p {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("non-finite weights: layer %d's %s holds %v at %d (a diverged run saves its last finite weights; this file was written otherwise or edited): train again",
					i/len(names)+1, names[i%len(names)], v, j)
			}
		}
	}
	if r.Len() != 0 {
		return fmt.Errorf("%d bytes after the last tensor", r.Len())
	}
	return nil
}
