package graph

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"sancus/src/budget"
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
	h, err := ReadMTXSized(path, checkMTXGraph, func(r, c int, _ float64) error {
		e.add(r, c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.N = h.Rows
	return e, nil
}

// checkMTXGraph checks an adjacency's size line: square, with a node count
// this machine can hold, and some nodes.
func checkMTXGraph(h MTXHeader) error {
	if h.Rows != h.Cols {
		return fmt.Errorf("adjacency must be square, the size line says %dx%d", h.Rows, h.Cols)
	}
	if h.Rows == 0 {
		return fmt.Errorf("the size line declares no nodes: an empty graph")
	}
	return budget.Nodes("", h.Rows)
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
	// The largest id sizes every per-node array: one stray id of 10⁹ in a
	// small file is refused here, not in the allocator.
	if err := budget.Nodes(path, e.N); err != nil {
		return nil, err
	}
	return e, nil
}

// ReadMETIS reads a METIS graph file: "n m [fmt]" then one line of
// 1-based neighbours per node. Only unweighted graphs (fmt 0) are accepted.
func ReadMETIS(path string) (*Edges, error) {
	e := &Edges{}
	err := scanMETIS(path, func(n, _ int) { e.N = n }, func(u, v int32) error {
		e.add(int(u), int(v))
		return nil
	}, nil)
	if errors.Is(err, errAsymmetric) {
		if named := findAsymmetric(path, e); named != nil {
			return nil, named
		}
	}
	if err != nil {
		return nil, err
	}
	return e, nil
}

// errAsymmetric marks an adjacency with an edge listed from one end only.
var errAsymmetric = errors.New("the adjacency is not symmetric")

// scanMETIS reads a METIS file, checking its header, every neighbour's
// range, the line and entry counts, and that every edge is listed from
// both its ends (as the format requires; an edge listed once would be
// kept or dropped depending on which end listed it). header gets n and m
// once read; upper gets each undirected edge once, from its lower end;
// lower, if set, gets each edge as listed from its higher end.
//
// Symmetry is checked in constant memory, for a graph streamed in several
// passes: the edges listed from their lower ends and those listed from
// their higher ends are summed as hashes, and must sum alike.
func scanMETIS(p string, header func(n, m int), upper func(u, v int32) error, lower func(u, v int32)) error {
	l, err := openLines(p)
	if err != nil {
		return err
	}
	defer l.close()
	n, m := 0, -1
	node := 0
	half := 0 // adjacency entries seen; each undirected edge appears twice
	var up, down uint64
	for l.next() {
		t := strings.TrimSpace(l.text)
		if len(t) > 0 && t[0] == '%' {
			continue
		}
		f := strings.Fields(t)
		if m < 0 {
			if len(f) < 2 {
				return l.errorf("header needs \"n m\", got %q", clip(t))
			}
			if n, err = l.atoi(f[0], "node count"); err != nil {
				return err
			}
			if m, err = l.atoi(f[1], "edge count"); err != nil {
				return err
			}
			if n < 0 || m < 0 {
				return l.errorf("negative count in header %q", clip(t))
			}
			if len(f) >= 3 && strings.Trim(f[2], "0") != "" {
				return l.errorf("weighted METIS graphs (fmt %s) are not supported", clip(f[2]))
			}
			if n == 0 {
				return l.errorf("the header declares no nodes: an empty graph")
			}
			if err := budget.Nodes(l.at(), n); err != nil {
				return err
			}
			if header != nil {
				header(n, m)
			}
			continue
		}
		if node >= n {
			if t == "" {
				continue
			}
			return l.errorf("more adjacency lines than the %d nodes in the header", n)
		}
		for _, s := range f {
			v, err := l.atoi(s, "neighbour")
			if err != nil {
				return err
			}
			if v < 1 || v > n {
				return l.errorf("neighbour %d outside 1..%d", v, n)
			}
			half++
			switch w := v - 1; {
			case w > node: // keep each undirected edge once
				up += pairHash(node, w)
				if err := upper(int32(node), int32(w)); err != nil {
					return err
				}
			case w < node:
				down += pairHash(w, node)
				if lower != nil {
					lower(int32(w), int32(node))
				}
			}
		}
		node++
	}
	if err := l.err(); err != nil {
		return err
	}
	if m < 0 {
		return l.eofErrorf("no header line")
	}
	if node != n {
		return l.eofErrorf("%d adjacency lines, header declares %d nodes (truncated file?)", node, n)
	}
	if half != 2*m {
		return l.eofErrorf("%d adjacency entries, header declares %d edges (each must be listed from both ends)", half, m)
	}
	if up != down {
		return fmt.Errorf("%s: %w: an edge is listed from one end only, and METIS lists each edge at both its ends", p, errAsymmetric)
	}
	return nil
}

// pairHash mixes an edge (splitmix64's finalizer): sums of it over two
// lists of edges agree only if the lists hold the same edges.
func pairHash(u, v int) uint64 {
	z := uint64(u)<<32 | uint64(uint32(v))
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// findAsymmetric names an edge of a METIS file listed from one end only,
// reading it again for the edges listed from their higher ends (e holds
// those listed from their lower ends). nil if none is found.
func findAsymmetric(p string, e *Edges) error {
	key := func(u, v int32) uint64 { return uint64(u)<<32 | uint64(uint32(v)) }
	ups := make([]uint64, len(e.Src))
	for i := range e.Src {
		ups[i] = key(e.Src[i], e.Dst[i])
	}
	var downs []uint64
	if scanMETIS(p, nil, func(int32, int32) error { return nil }, func(u, v int32) { downs = append(downs, key(u, v)) }) == nil {
		return nil
	}
	slices.Sort(ups)
	slices.Sort(downs)
	// name reports edge k as listed by its lower end, or by its higher.
	name := func(k uint64, byHigher bool) error {
		u, v := int(k>>32)+1, int(uint32(k))+1
		if byHigher {
			u, v = v, u
		}
		return fmt.Errorf("%s: %v: node %d lists %d, but node %d does not list %d: METIS lists each edge at both its ends", p, errAsymmetric, u, v, v, u)
	}
	i, j := 0, 0
	for i < len(ups) && j < len(downs) {
		switch {
		case ups[i] < downs[j]:
			return name(ups[i], false)
		case ups[i] > downs[j]:
			return name(downs[j], true)
		}
		i, j = i+1, j+1
	}
	if i < len(ups) {
		return name(ups[i], false)
	}
	if j < len(downs) {
		return name(downs[j], true)
	}
	return nil
}
