package kernels

import (
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// threads is the number of goroutines kernels split work into.
var threads = runtime.GOMAXPROCS(0)

// SetThreads sets how many goroutines a kernel uses (≥1). Results do not
// depend on it.
func SetThreads(n int) {
	if n < 1 {
		n = 1
	}
	threads = n
}

// Threads reports the kernel thread count.
func Threads() int { return threads }

// piecesPerThread is how many pieces a kernel's work is cut into per
// thread. The threads take the pieces in turn as they finish one, so a
// thread slowed by whatever shares its core takes fewer of them, where
// with one piece a thread every call waited for the slower, and the finer
// the cut the less the caller waits at a call's end for a helper's last
// piece. Results do not depend on the cut (sameForThreads), so neither on
// who takes which piece.
const piecesPerThread = 32

// pieces is how many pieces the kernels cut their work into.
func pieces() int {
	if threads == 1 {
		return 1
	}
	return threads * piecesPerThread
}

// forRanges calls f on the consecutive ranges [lo, hi) that cut points
// give, on up to threads goroutines, each taking the next range when done.
func forRanges(cuts []int, f func(lo, hi int)) {
	n := len(cuts) - 1
	var next atomic.Int64
	run := func() {
		for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
			if cuts[i] < cuts[i+1] {
				f(cuts[i], cuts[i+1])
			}
		}
	}
	helpers.do(min(threads, n)-1, run)
}

// helpers is the kernels' pool of helper goroutines.
var helpers pool

// spinFor is how long an idle helper polls for the next call before it
// sleeps. A sleeping goroutine can take from tens of µs to ms to wake, the
// caller meanwhile running the call's ranges alone; the gaps between an
// epoch's kernels are shorter than this.
const spinFor = 2 * time.Millisecond

// sharedFor is how long after a call found the helpers busy they sleep at
// once instead of polling: calls contending for the pool (runs or ranks in
// one process) mean more goroutines want the cores than there are, and a
// polling helper would take a core from one of them.
const sharedFor = 100 * time.Millisecond

// pool runs a call's ranges on the caller and on helper goroutines started
// once, which poll for the next call for spinFor after each before they
// sleep. One call at a time uses it; a call that finds it busy (ranks in
// one process) starts goroutines of its own, and the helpers then sleep
// at once for sharedFor.
type pool struct {
	busy    sync.Mutex // held by the call using the helpers
	mu      sync.Mutex // guards started, asleep and wake
	wake    *sync.Cond
	started int
	asleep  int
	cur     atomic.Pointer[poolJob] // the latest call
	shared  atomic.Int64            // when a call last found the pool busy (Unix ns)
}

// poolJob is one call: run until its ranges are taken, by the caller and
// by up to slots helpers.
type poolJob struct {
	run   func()
	slots atomic.Int64
	done  sync.WaitGroup
}

// do runs run on the caller and k helpers, and returns when all are done.
func (p *pool) do(k int, run func()) {
	if k < 1 {
		run()
		return
	}
	if !p.busy.TryLock() {
		p.shared.Store(time.Now().UnixNano())
		var wg sync.WaitGroup
		for range k {
			wg.Add(1)
			go func() {
				defer wg.Done()
				run()
			}()
		}
		run()
		wg.Wait()
		return
	}
	defer p.busy.Unlock()
	j := &poolJob{run: run}
	j.slots.Store(int64(k))
	j.done.Add(k)
	p.mu.Lock()
	p.ensure(k)
	p.cur.Store(j)
	if p.asleep > 0 {
		p.wake.Broadcast()
	}
	p.mu.Unlock()
	run()
	// The slots no helper took are not waited for.
	if left := j.slots.Swap(-1 << 40); left > 0 {
		j.done.Add(-int(left))
	}
	j.done.Wait()
}

// ensure starts helpers until there are k (p.mu held). They have seen
// the calls before this one.
func (p *pool) ensure(k int) {
	if p.wake == nil {
		p.wake = sync.NewCond(&p.mu)
	}
	for ; p.started < k; p.started++ {
		go p.help(p.cur.Load())
	}
}

// help is a helper's loop: it takes a slot in each call it sees (once: a
// call that came while it waited is the one it has seen). seen stays
// referenced, so no later call is allocated at its address.
func (p *pool) help(seen *poolJob) {
	for {
		p.await(seen)
		j := p.cur.Load()
		seen = j
		if j.slots.Add(-1) >= 0 {
			j.run()
			j.done.Done()
		}
	}
}

// await returns once a call after seen has come: polled for spinFor,
// then slept for (at once while the pool is shared). The poll does not
// yield: a helper that yields is queued to run again, and the scheduler
// then woke threads to run it while the kernels held the cores.
func (p *pool) await(seen *poolJob) {
	start := time.Now()
	for p.polls(start) && time.Since(start) < spinFor {
		if p.cur.Load() != seen {
			return
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asleep++
	for p.cur.Load() == seen {
		p.wake.Wait()
	}
	p.asleep--
}

// polls reports whether a helper idle since now polls for the next call:
// not within sharedFor of a call that found the pool busy.
func (p *pool) polls(now time.Time) bool {
	return now.UnixNano()-p.shared.Load() >= int64(sharedFor)
}

// inPieces calls f on [0, n) cut into pieces() near-equal ranges of at
// least minLen (forRanges over evenCuts).
func inPieces(n, minLen int, f func(lo, hi int)) { forRanges(evenCuts(n, pieces(), minLen), f) }

// byNonzeros calls f on row ranges of a CSR's rows cut into pieces() of
// about equal nonzeros (forRanges over nnzCuts).
func byNonzeros(rowptr []int64, f func(lo, hi int)) { forRanges(nnzCuts(rowptr, pieces()), f) }

// evenCuts splits [0, n) into at most parts ranges of near-equal length,
// with at least minLen elements per range so tiny work stays on one thread.
func evenCuts(n, parts, minLen int) []int {
	if minLen < 1 {
		minLen = 1
	}
	if p := n / minLen; p < parts {
		parts = p
	}
	if parts < 1 {
		parts = 1
	}
	cuts := make([]int, parts+1)
	for t := 0; t <= parts; t++ {
		cuts[t] = t * n / parts
	}
	return cuts
}

// nnzCuts splits rows so that each range holds about the same number of
// nonzeros (plus one unit per row, so empty rows still count).
func nnzCuts(rowptr []int64, parts int) []int {
	rows := len(rowptr) - 1
	total := rowptr[rows] + int64(rows)
	if total < 4096 || parts == 1 {
		return []int{0, rows}
	}
	// rowptr[r] + r rises strictly with r: a binary search finds each cut
	// (not a scan over every row, once per product).
	cuts := []int{0}
	for t := 1; t < parts; t++ {
		target := total * int64(t) / int64(parts)
		cuts = append(cuts, sort.Search(rows, func(r int) bool { return rowptr[r]+int64(r) >= target }))
	}
	return append(cuts, rows)
}

// ParallelRows calls f on ranges of rows [0, n) over the kernel threads,
// at least 256 rows a range, for callers whose rows are independent,
// so results do not depend on the split.
func ParallelRows(n int, f func(lo, hi int)) {
	if n > 0 {
		inPieces(n, 256, f)
	}
}
