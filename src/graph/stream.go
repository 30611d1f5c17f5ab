package graph

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sancus/src/budget"
)

// EdgeStream replays a graph file's edges, once per call, holding nothing
// but the current line: streaming partitioners make several passes over a
// graph that need not fit in memory.
type EdgeStream struct {
	Path string
	N    int // node count (from the header, or one past the largest id for SNAP)
}

// OpenEdgeStream finds the graph file of a dataset directory (or takes a
// graph file) and reads its node count.
func OpenEdgeStream(dir string) (*EdgeStream, error) {
	p, err := graphFile(dir)
	if err != nil {
		return nil, err
	}
	s := &EdgeStream{Path: p}
	switch {
	case strings.HasSuffix(p, ".npz"):
		f, err := openNPZ(p)
		if err != nil {
			return nil, err
		}
		defer f.close()
		if s.N, err = npzSquare(f, "adj"); err != nil {
			return nil, err
		}
	case isOGBEdges(p):
		if s.N, err = ogbNodes(filepath.Dir(filepath.Dir(p))); err != nil {
			return nil, err
		}
	case strings.HasSuffix(p, ".mtx"):
		h, err := mtxHeader(p)
		if err != nil {
			return nil, err
		}
		s.N = h.Rows
	case strings.HasSuffix(p, ".graph"):
		if s.N, err = metisNodes(p); err != nil {
			return nil, err
		}
	default:
		n := 0
		if err := s.Each(func(u, v int32) error {
			n = max(n, int(u)+1, int(v)+1)
			return nil
		}); err != nil {
			return nil, err
		}
		if err := budget.Nodes(p, n); err != nil {
			return nil, err
		}
		s.N = n
	}
	// An edge list cannot name isolated trailing nodes; its labels can.
	if lab := filepath.Join(filepath.Dir(p), "labels.txt"); strings.HasSuffix(p, "edges.txt") && exists(lab) {
		l, err := ReadLabels(lab, 0)
		if err != nil {
			return nil, err
		}
		s.N = max(s.N, len(l))
	}
	return s, nil
}

func graphFile(dir string) (string, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("dataset: %w", err)
	}
	if !st.IsDir() {
		return dir, nil
	}
	if p := ogbFile(ogbRaw(dir), "edge"); p != "" {
		return p, nil
	}
	if p := npzPath(dir); p != "" {
		return p, nil
	}
	for _, name := range []string{"graph.mtx", "edges.txt"} {
		if p := filepath.Join(dir, name); exists(p) {
			return p, nil
		}
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.graph")); len(m) == 1 {
		return m[0], nil
	}
	return "", fmt.Errorf("dataset %s: no graph.mtx, edges.txt, single *.graph, single *.npz or OGB raw/edge.csv", dir)
}

// mtxHeader reads an adjacency's banner and size line, checked as
// ReadMTXGraph checks them, and no entry.
func mtxHeader(p string) (MTXHeader, error) {
	h, err := ReadMTXSized(p, func(h MTXHeader) error {
		if err := checkMTXGraph(h); err != nil {
			return err
		}
		return errHeaderRead
	}, nil)
	if errors.Is(err, errHeaderRead) {
		err = nil
	}
	return h, err
}

// errHeaderRead stops ReadMTXSized after the size line.
var errHeaderRead = errors.New("header read")

// metisNodes reads a METIS file's node count, checking the whole file.
func metisNodes(p string) (int, error) {
	n := 0
	err := scanMETIS(p, func(nodes, _ int) { n = nodes }, func(int32, int32) error { return nil }, nil)
	return n, err
}

// Each calls fn for every edge line of the file (each undirected edge once;
// duplicates and self loops as they appear in the file).
func (s *EdgeStream) Each(fn func(u, v int32) error) error {
	switch {
	case strings.HasSuffix(s.Path, ".npz"):
		return eachNPZ(s.Path, fn)
	case isOGBEdges(s.Path):
		check := checkOGBEdges(s.N)
		return eachOGB(s.Path, func(u, v int32) error {
			if err := check(u, v); err != nil {
				return err
			}
			return fn(u, v)
		})
	case strings.HasSuffix(s.Path, ".mtx"):
		_, err := ReadMTX(s.Path, func(r, c int, _ float64) error { return fn(int32(r), int32(c)) })
		return err
	case strings.HasSuffix(s.Path, ".graph"):
		return eachMETIS(s.Path, fn)
	}
	return eachSNAP(s.Path, fn)
}

func eachSNAP(p string, fn func(u, v int32) error) error {
	l, err := openLines(p)
	if err != nil {
		return err
	}
	defer l.close()
	edges := 0
	for l.next() {
		t := strings.TrimSpace(l.text)
		if t == "" || t[0] == '#' {
			continue
		}
		edges++
		f := strings.Fields(t)
		if len(f) < 2 {
			return l.errorf("edge needs two node ids, got %q", clip(t))
		}
		u, err := l.atoi(f[0], "node id")
		if err != nil {
			return err
		}
		v, err := l.atoi(f[1], "node id")
		if err != nil {
			return err
		}
		if u < 0 || v < 0 || u >= 1<<31-1 || v >= 1<<31-1 {
			return l.errorf("node id out of range in %q", clip(t))
		}
		if err := fn(int32(u), int32(v)); err != nil {
			return err
		}
	}
	if err := l.err(); err != nil {
		return err
	}
	if edges == 0 {
		return l.eofErrorf("no edges (the file is empty or comments only): an edge list holds one \"u v\" line per edge")
	}
	return nil
}

func eachMETIS(p string, fn func(u, v int32) error) error {
	return scanMETIS(p, nil, fn, nil)
}
