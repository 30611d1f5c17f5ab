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
	"os"

	"sancus/src/atomicfile"
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
	// Where the weights came from, for people: the run's epoch count, its
	// final test accuracy, its configuration.
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

// Load reads a model file, checking magic, version, checksum and that the
// tensors are the model its spec describes.
func Load(path string) (Spec, *GCN, error) {
	var spec Spec
	raw, err := os.ReadFile(path)
	if err != nil {
		return spec, nil, err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("model file %s: %s", path, fmt.Sprintf(format, args...))
	}
	if len(raw) < 20 || string(raw[:8]) != fileMagic {
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
	js := make([]byte, n)
	if _, err := io.ReadFull(r, js); err != nil {
		return spec, nil, bad("truncated spec")
	}
	if err := json.Unmarshal(js, &spec); err != nil {
		return spec, nil, bad("spec: %v", err)
	}
	if (spec.LabelKind != "single" && spec.LabelKind != "multi") || spec.Layers != len(spec.Dims)-1 {
		return spec, nil, bad("model %v with %d layers over dims %v and %s labels: this sancus runs GCN, GraphSAGE and GAT models, single- or multi-label",
			spec.Model, spec.Layers, spec.Dims, spec.LabelKind)
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
	}
	if r.Len() != 0 {
		return fmt.Errorf("%d bytes after the last tensor", r.Len())
	}
	return nil
}
