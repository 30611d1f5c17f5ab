package launch

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
)

// OpenMPI's mpirun forwards SIGUSR1 and SIGUSR2 to its ranks, but not
// SIGTERM: a SIGTERM to mpirun aborts the job (SIGTERM to the ranks, then
// SIGKILL after odls_base_sigkill_timeout seconds, default 1), tearing down
// the runtime that a checkpoint's barrier needs. So a stop that should keep
// work reaches mpirun as SIGUSR1 (sancus launch converts SIGTERM and SIGINT),
// and srun, which forwards SIGTERM itself, gets it as is. Raising the
// sigkill timeout would not help: the runtime is gone either way, and a
// job aborted because a rank failed would then take that long to end.

// StopSignal is the signal that asks a job started through via to stop
// after its current epoch and checkpoint.
func StopSignal(via string) os.Signal {
	if isMpirun(via) {
		return syscall.SIGUSR1
	}
	return syscall.SIGTERM
}

func isMpirun(path string) bool { return filepath.Base(path) == "mpirun" }

// OwnSessionDir gives an mpirun command a session directory base of its
// own, under OpenMPI 4's name for it and PRRTE's (OpenMPI 5), unless the
// user chose one; the returned func removes it. mpirun makes its session
// directory, $TMPDIR/ompi.HOST.UID, with a check then a mkdir: two jobs
// starting at once on one node can fail there (open-mpi/ompi#8510).
func OwnSessionDir(cmd *exec.Cmd) (remove func(), err error) {
	const orte, prte = "OMPI_MCA_orte_tmpdir_base", "PRTE_MCA_prte_top_session_dir"
	if !isMpirun(cmd.Path) || os.Getenv(orte) != "" || os.Getenv(prte) != "" {
		return func() {}, nil
	}
	dir, err := os.MkdirTemp("", "sancus-mpirun-")
	if err != nil {
		return nil, fmt.Errorf("launch: a session directory for mpirun: %w", err)
	}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, orte+"="+dir, prte+"="+dir)
	return func() { os.RemoveAll(dir) }, nil
}

// Command builds the launcher command that starts np ranks of prog with
// args: srun --mpi=pmix inside a Slurm allocation (Debian's OpenMPI speaks
// PMIx only), mpirun elsewhere — with --oversubscribe when np exceeds the
// cores here and --allow-run-as-root when running as root. via forces
// "srun" or "mpirun" ("" chooses).
func Command(via string, np int, prog string, args ...string) (*exec.Cmd, error) {
	if np < 1 {
		return nil, fmt.Errorf("launch: need at least 1 rank, got %d", np)
	}
	if via == "" {
		via = "mpirun"
		if os.Getenv("SLURM_JOB_ID") != "" {
			if _, err := exec.LookPath("srun"); err == nil {
				via = "srun"
			}
		}
	}
	var argv []string
	switch via {
	case "srun":
		if err := slurmConfigured(); err != nil {
			return nil, err
		}
		argv = []string{"--mpi=pmix", "-n", fmt.Sprint(np)}
	case "mpirun":
		if np > HostLimit() {
			return nil, fmt.Errorf("launch: -n %d: mpirun without an allocation starts every rank on this host, whose %d cores take at most %d; for more ranks, submit through Slurm (srun)", np, runtime.NumCPU(), HostLimit())
		}
		if np > runtime.NumCPU() {
			argv = append(argv, "--oversubscribe")
		}
		if os.Geteuid() == 0 {
			argv = append(argv, "--allow-run-as-root")
		}
		argv = append(argv, "-np", fmt.Sprint(np))
	default:
		return nil, fmt.Errorf("launch: unknown launcher %q (srun or mpirun)", via)
	}
	path, err := exec.LookPath(via)
	if err != nil {
		return nil, fmt.Errorf("launch: %s not found: %w", via, err)
	}
	cmd := exec.Command(path, append(append(argv, prog), args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	return cmd, nil
}

// slurmConfigured refuses srun where it could find no Slurm to ask:
// outside an allocation with no slurm.conf, srun fails with "DNS SRV
// lookup failed", which points nowhere near the fix.
func slurmConfigured() error {
	if os.Getenv("SLURM_JOB_ID") != "" || os.Getenv("SLURM_CONF") != "" {
		return nil
	}
	if _, err := os.Stat("/etc/slurm/slurm.conf"); err == nil {
		return nil
	}
	return fmt.Errorf(`launch: --via srun: no Slurm here (no allocation, SLURM_CONF unset, no /etc/slurm/slurm.conf): run inside sbatch or salloc, or start the local cluster and eval "$(slurm/local-cluster.sh env)"`)
}
