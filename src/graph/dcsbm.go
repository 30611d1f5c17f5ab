package graph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// The degree-corrected stochastic block model (Karrer and Newman 2011),
// sancus gen --generator dcsbm: node v has a weight θ_v drawn from a power law
// p(θ) ∝ θ^−γ on [MinDegree, MaxDegree]; an edge picks an endpoint u with
// probability ∝ θ_u, then, with probability Homophily, the other among u's
// class ∝ θ, else among the other classes ∝ θ. A node's expected degree is
// its weight (scaled to the edge count when one is given), so a few hubs
// hold a large share of the nonzeros, as in ogbn-arxiv, ogbn-products or
// Reddit; the fraction of edges inside a class is Homophily. Features are
// the planted model's: a node's ones fall in its class's band with
// probability FeatureSig, so accuracy rests on both the graph and the
// features (a contextual SBM). Memory is O(nodes): the edges stream out.

// Like is a preset with the scale and shape of a real graph: its nodes,
// edges (undirected), feature width and classes as published, and a degree
// law whose largest weight is the published maximum degree (the exponent
// is a modelling choice, not a measurement). Its features are few ones per
// row (LikeFeatureNNZ), so that with tens of classes and a narrow class
// band a 2-layer GCN at the Kipf–Welling settings learns the task within
// 200 epochs whatever the seed (results/README.md, "Learnability and the ÂX shortcut").
type Like struct {
	Name              string
	Nodes             int
	Edges             int64
	Features, Classes int
	Exponent          float64
	MaxDegree         int
	Homophily         float64 // edge homophily, as commonly reported
}

// LikeFeatureNNZ is the ones per feature row of every preset. With the
// planted default of 16, arxiv's 40 classes get bands of 3 of 128
// features, under an eighth of a row's mass: training at the Kipf–Welling
// settings sat near a uniform output for tens of epochs, and where it left
// it varied with the seed by tens of points.
const LikeFeatureNNZ = 4

// Likes are the presets of gen --like.
var Likes = map[string]Like{
	"arxiv":    {Name: "ogbn-arxiv", Nodes: 169343, Edges: 1166243, Features: 128, Classes: 40, Exponent: 2.5, MaxDegree: 13161, Homophily: 0.655},
	"products": {Name: "ogbn-products", Nodes: 2449029, Edges: 61859140, Features: 100, Classes: 47, Exponent: 2.3, MaxDegree: 17481, Homophily: 0.807},
	"reddit":   {Name: "Reddit", Nodes: 232965, Edges: 57307946, Features: 602, Classes: 41, Exponent: 2.1, MaxDegree: 21657, Homophily: 0.756},
}

// Apply sets c's size and shape to l's, scaled in nodes and edges by
// scale (the maximum degree is kept).
func (l Like) Apply(c *GenConfig, scale float64) {
	c.Model = "dcsbm"
	c.Nodes = max(2, int(math.Round(float64(l.Nodes)*scale)))
	c.Edges = int64(math.Round(float64(l.Edges) * scale))
	c.Features, c.Classes, c.Exponent, c.Homophily = l.Features, l.Classes, l.Exponent, l.Homophily
	c.FeatureNNZ = LikeFeatureNNZ
	c.MinDegree, c.MaxDegree = 0, min(l.MaxDegree, c.Nodes-1)
}

// validateDCSBM checks the degree law's flags.
func (c GenConfig) validateDCSBM() error {
	switch {
	case !(c.Exponent > 1) || c.Exponent > 10:
		return fmt.Errorf("gen: --degree-exponent %g must be in (1, 10]", c.Exponent)
	case c.MaxDegree < 1 || c.MaxDegree >= c.Nodes:
		return fmt.Errorf("gen: --max-degree %d must be in 1..nodes-1 (%d)", c.MaxDegree, c.Nodes-1)
	case c.MinDegree < 0 || c.MinDegree > c.MaxDegree:
		return fmt.Errorf("gen: --min-degree %d must be in 0..--max-degree (%d); 0 derives it from --edges", c.MinDegree, c.MaxDegree)
	case c.MinDegree == 0 && c.Edges <= 0:
		return fmt.Errorf("gen: dcsbm needs --min-degree or --edges (the mean degree)")
	case !(c.Homophily >= 0 && c.Homophily <= 1):
		return fmt.Errorf("gen: --homophily %g must be in [0, 1]", c.Homophily)
	case c.Homophily < 1 && c.Classes < 2:
		return fmt.Errorf("gen: --homophily below 1 needs 2 or more classes")
	}
	if c.MinDegree == 0 {
		if mean := 2 * float64(c.Edges) / float64(c.Nodes); mean >= float64(c.MaxDegree) {
			return fmt.Errorf("gen: mean degree %.1f (2·edges/nodes) is not below --max-degree %d", mean, c.MaxDegree)
		}
	}
	return nil
}

// weights are Chung–Lu's: θ_i = MaxDegree·(i0/(i + i0))^α for the ranks
// i = 0..n−1, α = 1/(γ−1), so the largest is MaxDegree and the share of
// nodes above x falls as x^−(γ−1), the tail of p(θ) ∝ θ^−γ. i0 sets the
// smallest (MinDegree) or the mean (2·Edges/Nodes); given both, the
// weights are scaled to the edge count. The ranks go to random nodes.
func (c GenConfig) weights(r *rand.Rand) (theta []float64, edges int64) {
	n, hi, a := float64(c.Nodes), float64(c.MaxDegree), 1/(c.Exponent-1)
	var i0 float64
	if c.MinDegree > 0 {
		if q := math.Pow(float64(c.MinDegree)/hi, 1/a); q < 1 {
			i0 = math.Max(q*(n-1)/(1-q), 1e-9)
		} else {
			i0 = 1e18 // every weight MaxDegree
		}
	} else {
		i0 = i0ForMean(a, hi, n, 2*float64(c.Edges)/n)
	}
	theta = make([]float64, c.Nodes)
	var sum float64
	for i, v := range r.Perm(c.Nodes) {
		theta[v] = hi * math.Pow(i0/(float64(i)+i0), a)
		sum += theta[v]
	}
	edges = c.Edges
	if edges <= 0 {
		edges = int64(math.Round(sum / 2))
	}
	return theta, edges
}

// i0ForMean is the offset whose weights (see weights) have the given mean,
// through the sum's integral (bisection: the mean grows with i0).
func i0ForMean(a, hi, n, mean float64) float64 {
	m := func(i0 float64) float64 { // (1/n)·Σ_i hi·(i0/(i+i0))^a
		var integral float64
		if math.Abs(a-1) < 1e-9 {
			integral = math.Log((n + i0) / i0)
		} else {
			integral = (math.Pow(n+i0, 1-a) - math.Pow(i0, 1-a)) / (1 - a)
		}
		return hi * math.Pow(i0, a) * integral / n
	}
	lo, up := 1e-9, 1e12
	for range 200 {
		mid := math.Sqrt(lo * up)
		if m(mid) < mean {
			lo = mid
		} else {
			up = mid
		}
	}
	return math.Sqrt(lo * up)
}

// alias is Walker's alias table: a draw ∝ weight in O(1).
type alias struct {
	prob  []float64
	alias []int32
	ids   []int32 // the node each slot stands for (nil: slot i is node i)
}

func newAlias(w []float64, ids []int32) alias {
	n := len(w)
	t := alias{prob: make([]float64, n), alias: make([]int32, n), ids: ids}
	var sum float64
	for _, x := range w {
		sum += x
	}
	var small, large []int32
	for i, x := range w {
		t.prob[i] = x * float64(n) / sum
		if t.prob[i] < 1 {
			small = append(small, int32(i))
		} else {
			large = append(large, int32(i))
		}
	}
	for len(small) > 0 && len(large) > 0 {
		s, l := small[len(small)-1], large[len(large)-1]
		small = small[:len(small)-1]
		t.alias[s] = l
		t.prob[l] -= 1 - t.prob[s]
		if t.prob[l] < 1 {
			large = large[:len(large)-1]
			small = append(small, l)
		}
	}
	for _, i := range slices.Concat(small, large) { // rounding leftovers
		t.prob[i] = 1
	}
	return t
}

func (t alias) draw(r *rand.Rand) int32 {
	i := r.IntN(len(t.prob))
	if r.Float64() >= t.prob[i] {
		i = int(t.alias[i])
	}
	if t.ids != nil {
		return t.ids[i]
	}
	return int32(i)
}

// dcsbmSampler draws the model's edges.
type dcsbmSampler struct {
	all     alias
	byClass []alias
	labels  []int32
	h       float64
	// Two nodes of weights θ_u, θ_v are joined about θ_u·θ_v/2E times:
	// between heavy nodes (θ ≥ √(2E/20)) repeats are likely, so those
	// pairs are kept and a repeat is drawn again; elsewhere one is rare.
	heavy  []bool
	joined map[uint64]struct{}
}

func newDCSBM(theta []float64, labels []int32, byClass [][]int32, h float64, edges int64) *dcsbmSampler {
	s := &dcsbmSampler{all: newAlias(theta, nil), labels: labels, h: h, byClass: make([]alias, len(byClass)),
		heavy: make([]bool, len(theta)), joined: map[uint64]struct{}{}}
	cut := math.Sqrt(2 * float64(edges) / 20)
	for v, w := range theta {
		s.heavy[v] = w >= cut
	}
	for k, members := range byClass {
		w := make([]float64, len(members))
		for i, v := range members {
			w[i] = theta[v]
		}
		if len(members) > 0 {
			s.byClass[k] = newAlias(w, members)
		}
	}
	return s
}

// edge draws one edge u ≠ v: u ∝ θ; v in u's class with probability h,
// else in another class, ∝ θ in either.
func (s *dcsbmSampler) edge(r *rand.Rand) (int, int) {
	for {
		u := s.all.draw(r)
		var v int32
		if r.Float64() < s.h {
			v = s.byClass[s.labels[u]].draw(r)
		} else {
			for v = s.all.draw(r); s.labels[v] == s.labels[u]; v = s.all.draw(r) {
			}
		}
		if u == v {
			continue
		}
		if s.heavy[u] && s.heavy[v] {
			k := uint64(min(u, v))<<32 | uint64(max(u, v))
			if _, seen := s.joined[k]; seen {
				continue
			}
			s.joined[k] = struct{}{}
		}
		return int(u), int(v)
	}
}
