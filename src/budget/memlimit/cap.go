package memlimit

import (
	"flag"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

var capOnce sync.Once

// CapFuzzWorker caps the address space of a fuzzing worker process at its
// size now plus extra bytes, once: an input that slips past a reader's
// budget then crashes the worker, which the fuzzer reports with the
// input, instead of taking the machine's memory. Budget checks see the
// cap (launch.Available reads the limit), so a reader refuses what would
// not fit under it. Outside a worker (a plain go test running the seeds)
// it does nothing: the limit would outlive the fuzz target.
func CapFuzzWorker(extra int64) {
	capOnce.Do(func() {
		if f := flag.Lookup("test.fuzzworker"); f == nil || f.Value.String() != "true" {
			return
		}
		b, err := os.ReadFile("/proc/self/status")
		if err != nil {
			return
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmSize:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				var rl syscall.Rlimit
				syscall.Getrlimit(syscall.RLIMIT_AS, &rl)
				rl.Cur = uint64(kb<<10 + extra)
				syscall.Setrlimit(syscall.RLIMIT_AS, &rl)
			}
		}
	})
}
