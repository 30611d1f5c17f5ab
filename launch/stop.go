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

// WatchStops turns the stop signals into a request that the run honours
// at its next epoch boundary, and returns what reports it: SIGTERM
// (Slurm's warning before the walltime, --signal=TERM@secs, delivered to
// every rank by srun), SIGUSR1 (which mpirun forwards to its ranks; it
// cannot forward SIGTERM, see Command) and ^C. A second ^C quits at once:
// quit runs first (releasing what the run holds), then the process exits
// 130. who names the process in what it prints.
func WatchStops(who string, quit func()) (requested func() bool) {
	var stop atomic.Bool
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGINT)
	go func() {
		for s := range ch {
			if stop.Swap(true) {
				if s == syscall.SIGINT { // a second ^C: the user will not wait for the epoch
					fmt.Fprintf(os.Stderr, "sancus: %s: second interrupt: exiting now, without a checkpoint\n", who)
					quit()
					os.Exit(130)
				}
				continue
			}
			msg := fmt.Sprintf("sancus: %s: %v: stopping after this epoch (checkpoint, then exit %d; ^C again to quit at once)\n", who, s, ExitRequeue)
			if s != syscall.SIGTERM {
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
	return stop.Load
}
