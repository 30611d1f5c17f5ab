package report

import (
	"regexp"

	"sancus/src/result"
)

// Cores is what the results show of a host's cores: between Lo and Hi (Hi
// 0: no bound above). A results JSON does not record the cores; the kernel
// threads of its in-process runs bound them (launch.Threads).
type Cores struct{ Lo, Hi int }

// Known reports whether the runs pinned the count down.
func (c Cores) Known() bool { return c.Lo > 0 && c.Lo == c.Hi }

var threadsFlag = regexp.MustCompile(`(^|\s)--threads[= ]`)

// HostCores bounds each host's cores by its in-process runs (launcher
// none: every rank in one process on that host) that let train choose the
// threads. Such a run of P ranks gets max(1, cores/P) kernel threads a
// rank, so a run of one rank shows the count itself; an MPI run's ranks may
// span hosts and say nothing of one host.
func HostCores(runs []*result.Run) map[string]Cores {
	out := map[string]Cores{}
	for _, r := range runs {
		if r.Launcher != "none" || r.Host == "" || r.Result == nil || threadsFlag.MatchString(r.Command) {
			continue
		}
		p, t := r.Result.Ranks, r.Result.Threads
		if p < 1 || t < 1 {
			continue
		}
		lo, hi := p*t, p*t+p-1 // cores/P rounded down is t
		if t == 1 {
			lo, hi = 1, 2*p-1 // or cores < P, raised to one
		}
		c, seen := out[r.Host]
		if !seen {
			c = Cores{Lo: lo, Hi: hi}
		}
		c.Lo, c.Hi = max(c.Lo, lo), min(c.Hi, hi)
		out[r.Host] = c
	}
	return out
}

// Oversubscribed reports whether a run had more kernel threads than its
// host's cores (cores: the most it had). An in-process run's ranks all ran
// on its host, so sure is true; the results of an MPI run name rank 0's
// host alone, so for one it holds only if all its ranks ran there.
func Oversubscribed(r *result.Run, hosts map[string]Cores) (cores int, over, sure bool) {
	if r.Result == nil {
		return 0, false, false
	}
	if r.Cores > 0 && r.RanksOnHost > 0 { // the run says
		return r.Cores, r.RanksOnHost*max(1, r.Result.Threads) > r.Cores, true
	}
	c, ok := hosts[r.Host]
	if !ok || r.Result == nil || c.Hi < c.Lo {
		return 0, false, false
	}
	threads := r.Result.Ranks * max(1, r.Result.Threads)
	return c.Hi, threads > c.Hi, r.Launcher == "none"
}
