package graph

import (
	"strings"
)

// Edges is an undirected edge list over nodes 0..N-1. Duplicates and self
// loops may be present; BuildAdjacency removes them.
type Edges struct {
	N        int
	Src, Dst []int32
}

func (e *Edges) add(u, v int) {
	e.Src = append(e.Src, int32(u))
	e.Dst = append(e.Dst, int32(v))
}

// ReadMTXGraph reads a graph.mtx adjacency (square; symmetric or general).
func ReadMTXGraph(path string) (*Edges, error) {
	e := &Edges{}
	h, err := ReadMTX(path, func(r, c int, _ float64) error {
		e.add(r, c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if h.Rows != h.Cols {
		return nil, errorfFile(path, "adjacency must be square, header says %dx%d", h.Rows, h.Cols)
	}
	e.N = h.Rows
	return e, nil
}

// ReadSNAP reads a SNAP edge list: '#' comments, then "u v" per line with
// 0-based ids. The node count is one past the largest id.
func ReadSNAP(path string) (*Edges, error) {
	e := &Edges{}
	err := eachSNAP(path, func(u, v int32) error {
		e.N = max(e.N, int(u)+1, int(v)+1)
		e.add(int(u), int(v))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// ReadMETIS reads a METIS graph file: "n m [fmt]" then one line of 1-based
// neighbours per node. Only unweighted graphs (fmt 0) are accepted.
func ReadMETIS(path string) (*Edges, error) {
	l, err := openLines(path)
	if err != nil {
		return nil, err
	}
	defer l.close()
	e := &Edges{}
	m := -1
	node := 0
	half := 0 // adjacency entries seen; each undirected edge appears twice
	for l.next() {
		t := strings.TrimSpace(l.text)
		if len(t) > 0 && t[0] == '%' {
			continue
		}
		f := strings.Fields(t)
		if m < 0 {
			if len(f) < 2 {
				return nil, l.errorf("header needs \"n m\", got %q", t)
			}
			if e.N, err = l.atoi(f[0], "node count"); err != nil {
				return nil, err
			}
			if m, err = l.atoi(f[1], "edge count"); err != nil {
				return nil, err
			}
			if e.N < 0 || m < 0 {
				return nil, l.errorf("negative count in header %q", t)
			}
			if len(f) >= 3 && strings.Trim(f[2], "0") != "" {
				return nil, l.errorf("weighted METIS graphs (fmt %s) are not supported", f[2])
			}
			continue
		}
		if node >= e.N {
			if t == "" {
				continue
			}
			return nil, l.errorf("more adjacency lines than the %d nodes in the header", e.N)
		}
		for _, s := range f {
			v, err := l.atoi(s, "neighbour")
			if err != nil {
				return nil, err
			}
			if v < 1 || v > e.N {
				return nil, l.errorf("neighbour %d outside 1..%d", v, e.N)
			}
			half++
			if v-1 > node { // keep each undirected edge once
				e.add(node, v-1)
			}
		}
		node++
	}
	if err := l.err(); err != nil {
		return nil, err
	}
	if m < 0 {
		return nil, l.eofErrorf("no header line")
	}
	if node != e.N {
		return nil, l.eofErrorf("%d adjacency lines, header declares %d nodes (truncated file?)", node, e.N)
	}
	if half != 2*m {
		return nil, l.eofErrorf("%d adjacency entries, header declares %d edges (each must be listed from both ends)", half, m)
	}
	return e, nil
}
