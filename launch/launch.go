// Package launch tells a process where it stands in a parallel job — rank,
// size, local rank on its node — from the environment that mpirun (OpenMPI),
// a PMIx server or Slurm's srun sets, and picks a device per local rank.
package launch

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Env is a process's place in the job.
type Env struct {
	Launcher  string // "openmpi", "pmix", "slurm" or "none"
	Rank      int
	Size      int
	LocalRank int
	LocalSize int
	JobID     string // Slurm job id, if any
}

// Parallel reports whether the process was started as one of several ranks
// by a launcher that provides MPI wire-up.
func (e Env) Parallel() bool { return e.Launcher != "none" }

// SharedMemory reports whether every rank is on this node and OpenMPI may
// move their messages through shared memory (its btl list, when set,
// names vader or sm): then no network lies between them.
func (e Env) SharedMemory() bool {
	if e.LocalSize != e.Size {
		return false
	}
	btl, set := os.LookupEnv("OMPI_MCA_btl")
	if !set {
		return true
	}
	named := strings.Contains(btl, "vader") || strings.Contains(btl, "sm")
	if strings.HasPrefix(btl, "^") { // a list of what to leave out
		return !named
	}
	return named
}

type source struct {
	name                             string
	rank, size, localRank, localSize string
}

// Checked in order: OpenMPI's own variables are the most specific; PMIx
// covers srun --mpi=pmix; plain Slurm variables come last (srun without MPI).
var sources = []source{
	{"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
	{"pmix", "PMIX_RANK", "", "", ""},
	{"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
}

// Detect reads the environment. A variable that is present but not a
// number is an error: a half-set environment should not silently become a
// 1-rank run.
func Detect() (Env, error) { return detect(os.Getenv) }

func detect(get func(string) string) (Env, error) {
	env := Env{Launcher: "none", Size: 1, LocalSize: 1, JobID: get("SLURM_JOB_ID")}
	for _, s := range sources {
		if get(s.rank) == "" {
			continue
		}
		env.Launcher = s.name
		var err error
		num := func(key string, def int) int {
			if key == "" || get(key) == "" || err != nil {
				return def
			}
			v, e := strconv.Atoi(get(key))
			if e != nil || v < 0 {
				err = fmt.Errorf("launch: %s=%q is not a non-negative integer", key, get(key))
			}
			return v
		}
		env.Rank = num(s.rank, 0)
		env.Size = num(s.size, 0)
		if env.Size == 0 { // PMIx: size comes from the library; Slurm may give it
			env.Size = num("SLURM_NTASKS", 0)
		}
		env.LocalRank = num(s.localRank, num("SLURM_LOCALID", 0))
		env.LocalSize = num(s.localSize, 1)
		if err != nil {
			return env, err
		}
		if env.Size > 0 && env.Rank >= env.Size {
			return env, fmt.Errorf("launch: rank %d is not below size %d (%s)", env.Rank, env.Size, s.name)
		}
		return env, nil
	}
	return env, nil
}

// Device picks the accelerator for a local rank: the local rank modulo the
// visible devices, so ranks on a node spread over its GPUs (CUDA_VISIBLE_DEVICES
// set by Slurm's --gpus-per-task is respected by counting only visible ones).
func Device(localRank, devices int) (int, error) {
	if devices <= 0 {
		return -1, fmt.Errorf("launch: no devices visible to local rank %d", localRank)
	}
	return localRank % devices, nil
}

// TasksOnNode is the number of ranks the launcher placed on this node, as far
// as the environment tells before MPI starts (0 if unknown).
func TasksOnNode() int {
	if v, err := strconv.Atoi(os.Getenv("OMPI_COMM_WORLD_LOCAL_SIZE")); err == nil {
		return v
	}
	// Slurm: "4", "4(x2)" or "4,2": the leading count is this node's when
	// uniform, a fair guess otherwise.
	s := os.Getenv("SLURM_STEP_TASKS_PER_NODE")
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			break
		}
		n = n*10 + int(r-'0')
	}
	return n
}

// PrepareMPI adjusts the environment before MPI starts: when more ranks
// than cores share a node (or the host, under HostCoresVar), OpenMPI must
// yield the CPU while it waits, or spinning ranks starve the ones doing
// work (mpirun --oversubscribe does this itself where it sees more ranks
// than slots; srun does not).
func PrepareMPI(cores int) {
	size, _ := strconv.Atoi(os.Getenv("OMPI_COMM_WORLD_SIZE"))
	h, err := sharing(os.Getenv(HostCoresVar), TasksOnNode(), size, cores)
	if err == nil && h.Ranks > h.Cores && os.Getenv("OMPI_MCA_mpi_yield_when_idle") == "" {
		os.Setenv("OMPI_MCA_mpi_yield_when_idle", "1")
	}
}
