package launch

import (
	"fmt"
	"os"
	"runtime"
	"strings"
)

// HostLimit is the most kernel threads a rank, or ranks mpirun puts on
// this host, that sancus starts: past 8 a core they only contend, and a
// few thousand processes exhaust the host's memory and process table
// before the first epoch.
func HostLimit() int { return max(64, 8*runtime.NumCPU()) }

// Threads is how many kernel threads a process runs: flag when given (> 0),
// else the process's cores shared by its in-process ranks or, under MPI
// (ranksOnNode > 0), by the ranks on its node — all of its cores when the
// launcher bound it to fewer cores than the node has (mpirun binds each rank
// to a core by default).
func Threads(flag, inProcessRanks, ranksOnNode int) int {
	return threads(flag, inProcessRanks, ranksOnNode, runtime.GOMAXPROCS(0), runtime.NumCPU(), nodeCPUs())
}

func threads(flag, inProcessRanks, ranksOnNode, procs, ownCPUs, nodeCPUs int) int {
	switch {
	case flag > 0:
	case ranksOnNode <= 0:
		flag = procs / max(1, inProcessRanks)
	case ownCPUs < nodeCPUs: // bound to its own cores
		flag = ownCPUs
	default:
		flag = ownCPUs / ranksOnNode
	}
	return max(1, flag)
}

// Procs is the GOMAXPROCS for a process with busy goroutines in kernel
// calls at once (its in-process ranks' kernel threads): with two or more,
// one P more than them, so that one is always idle, and one for the ranks'
// own Go work, or the runtime's count where that is more. Go's scheduler
// takes the P of a goroutine in a C call, waking a thread to hold it, when
// no P is idle: with no more Ps than kernel threads it did so inside the
// kernel calls, and the woken threads took the cores. A process with one
// kernel thread keeps the runtime's count: an MPI rank bound to one core
// switched threads more often with spare Ps, its other goroutines then
// running beside the kernel on that core.
func Procs(busy, procs int) int {
	if busy < 2 {
		return procs
	}
	return max(procs, busy+2)
}

// ProbesMPI reports whether the MPI thread should probe while transfers
// are in flight, so that MPI moves them as the rank computes. Not where
// that can only take time from the compute: the ranks share memory, so no
// link drains meanwhile, and the rank computes on one core, the one the
// probes would wake on. A peer's rows then move inside the rank's waits,
// on the core they would have taken anyway.
func ProbesMPI(threads int, sharedMemory bool) bool {
	return !sharedMemory || threads > 1
}

// nodeCPUs counts the node's online cores ("0-15" or "0-3,8-11").
func nodeCPUs() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return runtime.NumCPU()
	}
	n := 0
	for _, part := range strings.Split(strings.TrimSpace(string(b)), ",") {
		var lo, hi int
		if c, _ := fmt.Sscanf(part, "%d-%d", &lo, &hi); c == 2 {
			n += hi - lo + 1
		} else {
			n++
		}
	}
	return max(n, 1)
}
