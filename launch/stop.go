package launch

import (
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

// ExitRequeue is the exit status after a stop request was honoured and a
// checkpoint written: "requeue me". slurm/*.sbatch requeue on it; a site can
// also set RequeueExit=85 in slurm.conf.
const ExitRequeue = 85

// ExitDiverged is the exit status of a run that stopped because training
// diverged (a non-finite loss, gradient or weight, or a loss past
// --max-loss-growth). Its results JSON is written, with status "diverged";
// requeueing it would only diverge again.
const ExitDiverged = 86

// Stops is how a run learns of the stop signals: SIGTERM (Slurm's warning
// before the walltime, --signal=TERM@secs, delivered to every rank by
// srun), SIGUSR1 (which mpirun forwards to its ranks; it cannot forward
// SIGTERM, see Command) and ^C.
type Stops struct {
	requested, training atomic.Bool
}

// Requested reports whether a stop was asked for: the run honours it at
// its next epoch boundary, with a checkpoint.
func (s *Stops) Requested() bool { return s.requested.Load() }

// Training marks the start of the epochs. Before it a stop has no epoch
// to wait for (loading a graph, partitioning, setting up can take long, or
// hang on a peer): the process exits at once, with nothing to checkpoint.
func (s *Stops) Training() { s.training.Store(true) }

// WatchStops starts watching the stop signals. A second ^C quits at once,
// as does a first stop before Training: quit runs first (releasing what
// the run holds), then the process exits. who names the process in what
// it prints.
func WatchStops(who string, quit func()) *Stops {
	s := &Stops{}
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGINT)
	go func() {
		for sig := range ch {
			if !s.training.Load() {
				exit := func() {
					fmt.Fprintf(os.Stderr, "sancus: %s: %v before training started (loading or setting up): exiting %d now, nothing to checkpoint\n", who, sig, ExitRequeue)
					quit()
					os.Exit(ExitRequeue)
				}
				if sig == syscall.SIGTERM { // perhaps mpirun ending a failed job: see below
					time.AfterFunc(2*time.Second, func() {
						if s.training.Load() { // the epochs began meanwhile: stop at the next boundary
							s.requested.Store(true)
							return
						}
						exit()
					})
					continue
				}
				exit()
			}
			if s.requested.Swap(true) {
				if sig == syscall.SIGINT { // a second ^C: the user will not wait for the epoch
					fmt.Fprintf(os.Stderr, "sancus: %s: second interrupt: exiting now, without a checkpoint\n", who)
					quit()
					os.Exit(130)
				}
				continue
			}
			msg := fmt.Sprintf("sancus: %s: %v: stopping after this epoch (checkpoint, then exit %d; ^C again to quit at once)\n", who, sig, ExitRequeue)
			if sig != syscall.SIGTERM {
				fmt.Fprint(os.Stderr, msg)
				continue
			}
			// mpirun also sends SIGTERM to the ranks of a job it aborts
			// (another rank failed), then SIGKILL a second later: say
			// nothing unless the process outlives that, so an aborted rank
			// does not report a clean stop.
			time.AfterFunc(2*time.Second, func() { fmt.Fprint(os.Stderr, msg) })
		}
	}()
	return s
}
