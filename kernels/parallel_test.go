package kernels

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Every range of every call runs exactly once, with calls from several
// goroutines at once (ranks in one process: one holds the helpers, the
// others start goroutines of their own).
func TestForRangesRunsEachRangeOnce(t *testing.T) {
	defer SetThreads(Threads())
	SetThreads(4)
	const callers, calls, n = 3, 200, 64
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range calls {
				var hits [n]atomic.Int32
				cuts := evenCuts(n, n, 1)
				forRanges(cuts, func(lo, hi int) {
					for i := lo; i < hi; i++ {
						hits[i].Add(1)
					}
				})
				for i := range hits {
					if h := hits[i].Load(); h != 1 {
						t.Errorf("caller %d call %d: range %d ran %d times", c, k, i, h)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

// A helper that slept (no call for longer than spinFor) wakes for the next
// call: two of its ranges run at once.
func TestPoolHelpersWakeAfterSleeping(t *testing.T) {
	var p pool
	together := func() bool {
		var in atomic.Int32
		met := make(chan bool, 2)
		p.do(1, func() {
			in.Add(1)
			// Bounded only so that a helper that never comes fails the
			// test: a minute is past any scheduling delay under load.
			deadline := time.Now().Add(time.Minute)
			for in.Load() < 2 && time.Now().Before(deadline) {
			}
			met <- in.Load() >= 2
		})
		return <-met
	}
	if !together() {
		t.Fatal("the first call ran on the caller alone")
	}
	// The helper sleeps once it has polled spinFor; a loaded machine may
	// run it late, so wait for that rather than a fixed time.
	asleep := 0
	for deadline := time.Now().Add(time.Minute); asleep != 1 && time.Now().Before(deadline); {
		time.Sleep(spinFor)
		p.mu.Lock()
		asleep = p.asleep
		p.mu.Unlock()
	}
	if asleep != 1 {
		t.Fatalf("%d helpers asleep after a minute idle, want 1", asleep)
	}
	if !together() {
		t.Fatal("a call after the helper slept ran on the caller alone")
	}
}

// A call that finds the pool busy makes its helpers sleep at once, not
// poll, for sharedFor: the cores are wanted by more goroutines than the
// pool's.
func TestSharedPoolStopsPolling(t *testing.T) {
	var p pool
	var ran atomic.Int32
	p.do(1, func() { ran.Add(1) })
	if now := time.Now(); !p.polls(now) {
		t.Fatal("a pool no call found busy does not poll")
	}
	p.busy.Lock() // another caller's call in progress
	p.do(1, func() { ran.Add(1) })
	p.busy.Unlock()
	now := time.Now()
	if p.polls(now) {
		t.Fatal("the helpers poll right after a call found the pool busy")
	}
	if !p.polls(now.Add(sharedFor)) {
		t.Fatalf("the helpers still sleep at once %v after the pool was last found busy", sharedFor)
	}
	if ran.Load() < 2 {
		t.Fatalf("the two calls ran %d times on caller and helpers, want at least 2", ran.Load())
	}
}
