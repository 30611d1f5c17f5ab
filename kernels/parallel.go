package kernels

import (
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
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
// with one piece a thread every call waited for the slower. Results do not
// depend on the cut (sameForThreads), so neither on who takes which piece.
const piecesPerThread = 8

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
	// The caller runs ranges itself at once, while the other goroutines
	// wait for a thread to wake (tens of µs when it had gone idle).
	var wg sync.WaitGroup
	for t := 1; t < min(threads, n); t++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run()
		}()
	}
	run()
	wg.Wait()
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
