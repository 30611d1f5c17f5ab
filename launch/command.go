package launch

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
)

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
		argv = []string{"--mpi=pmix", "-n", fmt.Sprint(np)}
	case "mpirun":
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
