package kernels

import (
	"runtime"
	"sort"
	"sync"
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

// forRanges calls f on consecutive ranges [lo, hi) of [0, n) given by cut
// points, one goroutine per range.
func forRanges(cuts []int, f func(lo, hi int)) {
	if len(cuts) == 2 {
		f(cuts[0], cuts[1])
		return
	}
	// The caller takes the first range itself: it starts at once, while the
	// other ranges' goroutines wait for a thread to wake (tens of µs when
	// it had gone idle).
	var wg sync.WaitGroup
	for t := 1; t+1 < len(cuts); t++ {
		lo, hi := cuts[t], cuts[t+1]
		if lo == hi {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(lo, hi)
		}()
	}
	if cuts[0] < cuts[1] {
		f(cuts[0], cuts[1])
	}
	wg.Wait()
}

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
		forRanges(evenCuts(n, threads, 256), f)
	}
}
