package launch

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// Wait is how an MPI rank's thread waits for its messages and
// collectives, parsed once from --mpi-wait and resolved once per process
// (Resolve); what differs is asked of it (Nap), never of a name.
type Wait uint8

const (
	WaitAuto Wait = iota // spin where every rank on the host has a core, else nap
	WaitSpin             // in MPI's blocking calls, which busy-poll: the least latency, a core a rank
	WaitNap              // test, then sleep NapEvery: ranks outnumber the host's cores
)

var waitNames = [...]string{WaitAuto: "auto", WaitSpin: "spin", WaitNap: "nap"}

// ParseWait reads a policy's name: auto (also ""), spin or nap.
func ParseWait(s string) (Wait, error) {
	if s == "" {
		return WaitAuto, nil
	}
	for w, name := range waitNames {
		if s == name {
			return Wait(w), nil
		}
	}
	return WaitAuto, fmt.Errorf("unknown MPI wait %q (auto, spin or nap)", s)
}

func (w Wait) String() string {
	if int(w) < len(waitNames) {
		return waitNames[w]
	}
	return fmt.Sprintf("Wait(%d)", uint8(w))
}

// Set and Type make a Wait a command-line flag.
func (w *Wait) Set(s string) (err error) {
	*w, err = ParseWait(s)
	return err
}
func (w Wait) Type() string { return "wait" }

// Resolve turns auto into spin or nap for the ranks sharing a host's
// cores (Sharing): a spinning rank keeps its core for its whole time
// slice, so where ranks outnumber cores the peer it waits for may not run
// until the slice ends, and each round of messages can cost a scheduler
// period. Napping gives the core up between tests.
func (w Wait) Resolve(h Host) Wait {
	if w != WaitAuto {
		return w
	}
	if h.Ranks > h.Cores {
		return WaitNap
	}
	return WaitSpin
}

// Nap is how long the MPI thread sleeps between tests (0: it spins).
func (w Wait) Nap() time.Duration {
	if w == WaitNap {
		return NapEvery
	}
	return 0
}

// NapEvery is short next to a scheduler's time slice (a few ms), which
// is what a spinning peer costs, and long next to a test (about 1 µs).
const NapEvery = 50 * time.Microsecond

// Host is the ranks that share a rank's cores and those cores.
type Host struct{ Ranks, Cores int }

// HostCoresVar, set by slurm/emu-nodes.sh, says that every rank of the job
// runs on one host of that many cores, however many nodes MPI sees.
const HostCoresVar = "SANCUS_HOST_CORES"

// Sharing is the Host of a rank with ranksOnNode ranks on its node, of
// size in all: the node and its cores, or under HostCoresVar every rank
// and the host's cores.
func Sharing(ranksOnNode, size int) (Host, error) {
	return sharing(os.Getenv(HostCoresVar), ranksOnNode, size, nodeCPUs())
}

func sharing(hostCores string, ranksOnNode, size, nodeCPUs int) (Host, error) {
	if hostCores == "" {
		return Host{Ranks: max(1, ranksOnNode), Cores: nodeCPUs}, nil
	}
	c, err := strconv.Atoi(hostCores)
	if err != nil || c < 1 {
		return Host{}, fmt.Errorf("launch: %s=%q: give the host's cores, a whole number ≥ 1, or unset it", HostCoresVar, hostCores)
	}
	return Host{Ranks: max(1, size), Cores: c}, nil
}
