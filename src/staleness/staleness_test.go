package staleness

import (
	"fmt"
	"math"
	"testing"
)

// schedule runs a policy for epochs on one rank and returns the epochs root
// j broadcast. For a policy that needs drift, every rank votes alike in this
// script (as the engine's gather would deliver it).
func schedule(t *testing.T, p Policy, p2 int, epochs int, depends [][]bool, drift func(epoch int) float64) [][]int {
	last := make([]int, p2)
	for j := range last {
		last[j] = -1
	}
	out := make([][]int, p2)
	active := make([]bool, p2)
	for e := 0; e < epochs; e++ {
		in := Input{Epoch: e, Rank: 0, Last: last, Depends: depends}
		if p.NeedsDrift() {
			vote := p.Vote(in, drift(e))
			in.Votes = make([]bool, p2)
			for j := range in.Votes {
				in.Votes[j] = vote
			}
		}
		p.Active(in, active)
		for j, a := range active {
			if a {
				out[j] = append(out[j], e)
				last[j] = e
			}
		}
	}
	return out
}

func dense(p int) [][]bool {
	d := make([][]bool, p)
	for i := range d {
		d[i] = make([]bool, p)
		for j := range d[i] {
			d[i][j] = true
		}
	}
	return d
}

func TestSchedules(t *testing.T) {
	noDrift := func(int) float64 { return 0 }
	cases := []struct {
		name   string
		p      Policy
		deps   [][]bool
		drift  func(int) float64
		root   int
		expect string
	}{
		{"none", Capped{None{}, 100}, dense(2), noDrift, 0, "[0 1 2 3 4 5 6 7 8 9]"},
		{"eps_E=1 broadcasts every 2nd epoch", Capped{EpochFixed{Eps: 1}, 100}, dense(2), noDrift, 1, "[0 2 4 6 8]"},
		{"eps_E=2 every 3rd", Capped{EpochFixed{Eps: 2}, 100}, dense(2), noDrift, 0, "[0 3 6 9]"},
		{"eps_E=3 capped at 2", Capped{EpochFixed{Eps: 3}, 2}, dense(2), noDrift, 0, "[0 2 4 6 8]"},
		{"eps_A=1 with dependents behaves like eps_E=1", Capped{EpochAdaptive{Eps: 1}, 100}, dense(2), noDrift, 0, "[0 2 4 6 8]"},
		// Root 1 is used by nobody (not even itself): only the cap refreshes it.
		{"eps_A=1 root without dependents", Capped{EpochAdaptive{Eps: 1}, 4}, [][]bool{{true, false}, {true, false}}, noDrift, 1, "[0 4 8]"},
		{"eps_H=0.02 broadcasts when drift exceeds it", Capped{VariationGap{0.02}, 100}, dense(2),
			func(e int) float64 { return []float64{0, 0.05, 0.01, 0.015, 0.03, 0, 0, 0, 0.5, 0}[e] }, 0, "[0 1 4 8]"},
		{"eps_H with cap", Capped{VariationGap{0.02}, 3}, dense(2), noDrift, 0, "[0 3 6 9]"},
	}
	for _, c := range cases {
		got := fmt.Sprint(schedule(t, c.p, 2, 10, c.deps, c.drift)[c.root])
		if got != c.expect {
			t.Errorf("%s: root %d broadcast in epochs %s, want %s", c.name, c.root, got, c.expect)
		}
	}
}

func TestKindPolicy(t *testing.T) {
	for _, bad := range []struct {
		name string
		eps  float64
		cap  int
	}{{"epoch-fixed", 1.5, 5}, {"variation-gap", math.Inf(1), 5}, {"bogus", 1, 5}, {"epoch-fixed", 1, 0}} {
		k, err := ParseKind(bad.name)
		if err == nil {
			_, err = k.Policy(bad.eps, bad.cap)
		}
		if err == nil {
			t.Errorf("%q, %g, %d accepted", bad.name, bad.eps, bad.cap)
		}
	}
	for _, c := range []struct {
		name string
		eps  float64
		want string
	}{{"H", 0.01, "variation-gap(0.01),cap=8"}, {"scs-h", -1, "variation-gap(0.03),cap=8"}, {"E", -1, "epoch-fixed(1),cap=8"}, {"Epoch-Adaptive", 2, "epoch-adaptive(2),cap=8"}} {
		k, err := ParseKind(c.name)
		if err != nil {
			t.Fatal(err)
		}
		p, err := k.Policy(c.eps, 8)
		if err != nil || p.Name() != c.want {
			t.Fatalf("%s, %g: got %v, %v; want %s", c.name, c.eps, p, err, c.want)
		}
	}
}

// A policy given by its alias is written by its full name: results and
// charts never see "h".
func TestKindWritesItsFullName(t *testing.T) {
	var k Kind
	if err := k.Set("h"); err != nil {
		t.Fatal(err)
	}
	if b, _ := k.MarshalText(); string(b) != "variation-gap" {
		t.Fatalf("--staleness h is written as %q", b)
	}
}
