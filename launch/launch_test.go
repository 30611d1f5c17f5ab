package launch

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDetect(t *testing.T) {
	cases := []struct {
		name string
		vars map[string]string
		want Env
	}{
		{"none", map[string]string{}, Env{Launcher: "none", Size: 1, LocalSize: 1}},
		{"openmpi", map[string]string{"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"},
			Env{Launcher: "openmpi", Rank: 3, Size: 4, LocalRank: 1, LocalSize: 2}},
		{"srun pmix", map[string]string{"PMIX_RANK": "2", "SLURM_NTASKS": "4", "SLURM_LOCALID": "2", "SLURM_JOB_ID": "77", "SLURM_PROCID": "2"},
			Env{Launcher: "pmix", Rank: 2, Size: 4, LocalRank: 2, LocalSize: 1, JobID: "77"}},
		{"plain slurm", map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0"},
			Env{Launcher: "slurm", Rank: 1, Size: 2, LocalSize: 1}},
	}
	for _, c := range cases {
		got, err := detect(envOf(c.vars))
		if err != nil || got != c.want {
			t.Errorf("%s: got %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
}

func TestDetectRejectsGarbage(t *testing.T) {
	for _, vars := range []map[string]string{
		{"OMPI_COMM_WORLD_RANK": "x", "OMPI_COMM_WORLD_SIZE": "4"},
		{"OMPI_COMM_WORLD_RANK": "4", "OMPI_COMM_WORLD_SIZE": "4"},
	} {
		if _, err := detect(envOf(vars)); err == nil {
			t.Errorf("accepted %v", vars)
		}
	}
}

func TestDevice(t *testing.T) {
	if d, _ := Device(5, 4); d != 1 {
		t.Fatalf("local rank 5 on 4 GPUs got %d", d)
	}
	if _, err := Device(0, 0); err == nil {
		t.Fatal("no devices accepted")
	}
}

func TestCommandFlags(t *testing.T) {
	if _, err := Command("mpirun", 0, "x"); err == nil {
		t.Fatal("0 ranks accepted")
	}
	if _, err := Command("pbsdsh", 2, "x"); err == nil {
		t.Fatal("unknown launcher accepted")
	}
	if _, err := Command("mpirun", HostLimit()+1, "x"); err == nil || !strings.Contains(err.Error(), "srun") {
		t.Fatalf("more ranks than this host takes: %v", err)
	}
	cmd, err := Command("mpirun", HostLimit(), "/bin/sancus", "train")
	if err != nil {
		t.Skip(err) // no mpirun on this machine
	}
	s := strings.Join(cmd.Args, " ")
	if !strings.Contains(s, "--oversubscribe") || !strings.HasSuffix(s, fmt.Sprintf("-np %d /bin/sancus train", HostLimit())) {
		t.Fatalf("mpirun command %q", s)
	}
}

// SharedMemory: every rank on this node, and OpenMPI's transports (when
// given) include shared memory.
func TestSharedMemory(t *testing.T) {
	for _, c := range []struct {
		local, size int
		btl         string // "-": unset
		want        bool
	}{{2, 2, "-", true}, {2, 4, "-", false}, {2, 2, "tcp,self", false}, {2, 2, "vader,self", true}, {2, 2, "^tcp", true}, {2, 2, "^vader", false}} {
		if c.btl == "-" {
			t.Setenv("OMPI_MCA_btl", "")
			os.Unsetenv("OMPI_MCA_btl")
		} else {
			t.Setenv("OMPI_MCA_btl", c.btl)
		}
		if got := (Env{Size: c.size, LocalSize: c.local}).SharedMemory(); got != c.want {
			t.Errorf("%d of %d ranks local, btl %q: shared memory %v, want %v", c.local, c.size, c.btl, got, c.want)
		}
	}
}

func TestThreads(t *testing.T) {
	for _, tc := range []struct {
		name                                         string
		flag, inProc, onNode, procs, own, node, want int
	}{
		{"flag wins", 3, 2, 4, 16, 16, 16, 3},
		{"in-process ranks share the process's cores", 0, 4, 0, 16, 16, 16, 4},
		{"one in-process rank", 0, 1, 0, 8, 8, 16, 8},
		{"MPI ranks share the node", 0, 1, 4, 16, 16, 16, 4},
		{"an MPI rank bound to its cores uses them", 0, 1, 4, 2, 2, 16, 2},
		{"never fewer than one", 0, 8, 0, 2, 2, 2, 1},
		{"more ranks than cores", 0, 1, 4, 2, 2, 2, 1},
	} {
		if got := threads(tc.flag, tc.inProc, tc.onNode, tc.procs, tc.own, tc.node); got != tc.want {
			t.Errorf("%s: threads = %d, want %d", tc.name, got, tc.want)
		}
	}
	if n := nodeCPUs(); n < 1 {
		t.Errorf("nodeCPUs = %d", n)
	}
}

func TestProcs(t *testing.T) {
	for _, tc := range []struct{ busy, procs, want int }{
		{2, 2, 4},    // one process, two kernel threads on two cores
		{1, 1, 1},    // an MPI rank bound to one core keeps its one P
		{16, 32, 32}, // the runtime's own count is more
	} {
		if got := Procs(tc.busy, tc.procs); got != tc.want {
			t.Errorf("Procs(%d, %d) = %d, want %d", tc.busy, tc.procs, got, tc.want)
		}
	}
}

func TestProbesMPI(t *testing.T) {
	for _, tc := range []struct {
		name    string
		threads int
		shared  bool
		want    bool
	}{
		{"one core each, in shared memory", 1, true, false},
		{"one core each, over a network", 1, false, true},
		{"spare cores, in shared memory", 8, true, true},
		{"spare cores, over a network", 8, false, true},
	} {
		if got := ProbesMPI(tc.threads, tc.shared); got != tc.want {
			t.Errorf("%s: ProbesMPI = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestStopBeforeTrainingExitsAtOnce: a stop signal that comes before the
// epochs (loading, setting up) ends the process at once with the requeue
// status, releasing what it holds; once training, a stop is a request the
// epoch boundary honours.
func TestStopBeforeTrainingExitsAtOnce(t *testing.T) {
	if mode := os.Getenv("SANCUS_STOPS_CHILD"); mode != "" {
		s := WatchStops("child", func() { fmt.Println("released") })
		if mode == "training" {
			s.Training()
		}
		fmt.Println("ready")
		for !s.Requested() {
			time.Sleep(time.Millisecond)
		}
		fmt.Println("requested")
		os.Exit(0)
	}
	for _, c := range []struct {
		mode string
		sig  syscall.Signal
		code int
		want string
	}{{"setup", syscall.SIGUSR1, ExitRequeue, "before training started"}, {"setup", syscall.SIGTERM, ExitRequeue, "before training started"},
		{"training", syscall.SIGUSR1, 0, "requested"}} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestStopBeforeTrainingExitsAtOnce$")
		cmd.Env = append(os.Environ(), "SANCUS_STOPS_CHILD="+c.mode)
		out, _ := cmd.StdoutPipe()
		cmd.Stderr = cmd.Stdout
		var all strings.Builder
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(out)
		for !strings.Contains(all.String(), "ready") {
			line, err := r.ReadString('\n')
			all.WriteString(line)
			if err != nil {
				t.Fatalf("%s: the child ended before it was ready:\n%s", c.mode, all.String())
			}
		}
		cmd.Process.Signal(c.sig)
		done := make(chan error, 1)
		go func() {
			rest, _ := io.ReadAll(r)
			all.Write(rest)
			done <- cmd.Wait()
		}()
		select {
		case err := <-done:
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			if code != c.code || !strings.Contains(all.String(), c.want) || (c.code != 0 && !strings.Contains(all.String(), "released")) {
				t.Fatalf("%s, %v: exit %d, want %d saying %q:\n%s", c.mode, c.sig, code, c.code, c.want, all.String())
			}
		case <-time.After(2 * time.Minute): // bounds a hang only
			cmd.Process.Kill()
			t.Fatalf("%s, %v: the child still ran 2 minutes later:\n%s", c.mode, c.sig, all.String())
		}
	}
}

func TestSrunWithoutSlurmSaysHowToGetOne(t *testing.T) {
	if _, err := os.Stat("/etc/slurm/slurm.conf"); err == nil {
		t.Skip("this machine has a slurm.conf")
	}
	t.Setenv("SLURM_JOB_ID", "")
	t.Setenv("SLURM_CONF", "")
	_, err := Command("srun", 2, "x")
	if err == nil || !strings.Contains(err.Error(), "local-cluster.sh env") {
		t.Fatalf("srun with no Slurm: %v", err)
	}
}

func TestWait(t *testing.T) {
	for _, tc := range []struct {
		name string
		flag string
		host Host
		want Wait
	}{
		{"a core a rank spins", "", Host{Ranks: 2, Cores: 2}, WaitSpin},
		{"ranks outnumbering cores nap", "auto", Host{Ranks: 8, Cores: 2}, WaitNap},
		{"spin as asked", "spin", Host{Ranks: 8, Cores: 2}, WaitSpin},
		{"nap as asked", "nap", Host{Ranks: 1, Cores: 16}, WaitNap},
	} {
		w, err := ParseWait(tc.flag)
		if err != nil {
			t.Fatal(err)
		}
		if got := w.Resolve(tc.host); got != tc.want {
			t.Errorf("%s: %v resolves to %v, want %v", tc.name, w, got, tc.want)
		}
	}
	if WaitSpin.Nap() != 0 || WaitNap.Nap() <= 0 {
		t.Errorf("naps: spin %v, nap %v", WaitSpin.Nap(), WaitNap.Nap())
	}
	if _, err := ParseWait("yield"); err == nil || !strings.Contains(err.Error(), "spin") {
		t.Errorf("ParseWait(yield): %v, want an error naming the choices", err)
	}
}

func TestSharing(t *testing.T) {
	for _, tc := range []struct {
		name, hostCores    string
		onNode, size, cpus int
		want               Host
	}{
		{"a node's ranks share its cores", "", 4, 16, 8, Host{Ranks: 4, Cores: 8}},
		{"emulated nodes share the host", "2", 2, 8, 2, Host{Ranks: 8, Cores: 2}},
	} {
		got, err := sharing(tc.hostCores, tc.onNode, tc.size, tc.cpus)
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
	if _, err := sharing("two", 1, 2, 2); err == nil || !strings.Contains(err.Error(), HostCoresVar) {
		t.Errorf("a bad %s: %v, want an error naming it", HostCoresVar, err)
	}
}
