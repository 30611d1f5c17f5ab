package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestREADMETutorial runs every command of the README's Tutorial section
// as written, in a scratch directory holding the checkout's testdata and
// the built binaries under bin/, so the README cannot drift from what
// sancus does; as root, also as an unprivileged user. The sbatch line needs a Slurm cluster: slurm/test-local.sh
// submits the same script. The README stays a guide, not a manual: at
// most 250 lines.
func TestREADMETutorial(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the README's tutorial: run without -short")
	}
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(readme), "\n"); n > 250 {
		t.Errorf("README.md has %d lines, more than 250", n)
	}
	_, tutorial, ok := strings.Cut(string(readme), "\n## Tutorial\n")
	if !ok {
		t.Fatal("README.md has no Tutorial section")
	}
	tutorial, _, _ = strings.Cut(tutorial, "\n## ")
	var cmds []string
	for _, line := range strings.Split(tutorial, "\n") {
		if strings.HasPrefix(line, "    ") {
			cmds = append(cmds, strings.TrimSpace(line))
		}
	}
	if len(cmds) < 6 {
		t.Fatalf("the tutorial shows %d commands", len(cmds))
	}
	exe, err := os.ReadFile(bin) // a copy: report finds sancus-report beside the binary it runs as
	if err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(t.TempDir(), "sancus-report")
	if out, err := exec.Command("go", "build", "-o", report, "../sancus-report").CombinedOutput(); err != nil {
		t.Fatalf("building sancus-report: %v\n%s", err, out)
	}
	t.Run("as this user", func(t *testing.T) { runTutorial(t, cmds, exe, report, nil) })
	if os.Geteuid() == 0 {
		// Most cluster login containers run as root, most users are not:
		// the same commands must work for both.
		t.Run("as nobody", func(t *testing.T) {
			runTutorial(t, cmds, exe, report, &syscall.Credential{Uid: 65534, Gid: 65534})
		})
	}
}

// runTutorial runs the tutorial's commands in a scratch directory holding
// a copy of testdata/cora and the binaries under bin/, as cred's user
// (nil: this one), and checks what they leave.
func runTutorial(t *testing.T, cmds []string, exe []byte, report string, cred *syscall.Credential) {
	base := t.TempDir()
	if cred != nil {
		base = "/tmp" // the test's own temporary directories are root's alone
	}
	dir, err := os.MkdirTemp(base, "sancus-tutorial-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.CopyFS(filepath.Join(dir, "testdata", "cora"), os.DirFS("../../../testdata/cora")); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(dir, "bin"), 0o755)
	os.WriteFile(filepath.Join(dir, "bin", "sancus"), exe, 0o755)
	rep, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "bin", "sancus-report"), rep, 0o755)
	// As a user's shell has it: no opt-in to OpenMPI as root, which the
	// README's commands must not need.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OMPI_ALLOW_RUN_AS_ROOT") && !strings.HasPrefix(kv, "OMPI_MCA_rmaps_base_oversubscribe") {
			env = append(env, kv)
		}
	}
	if cred != nil {
		filepath.WalkDir(dir, func(p string, _ fs.DirEntry, _ error) error { return os.Chown(p, int(cred.Uid), int(cred.Gid)) })
		env = append(env, "HOME="+dir, "TMPDIR="+dir)
	}
	for _, c := range cmds {
		if strings.Contains(c, "sbatch ") || strings.Contains(c, "local-cluster.sh") { // slurm/test-local.sh runs these
			continue
		}
		if strings.Contains(c, " launch ") {
			needMPI(t)
		}
		cmd := exec.Command("bash", "-c", c)
		cmd.Dir, cmd.Env = dir, env
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("README tutorial (in %s): %s: %v\n%s", dir, c, err, out)
		}
	}
	for _, want := range []string{"results/runs/cora.json", "results/runs/cora-P2-vg.json", "data/cora-P2/meta.json", "results/runs/cora.sancus", "results/runs/pred/index.json", "results/runs/summary.csv"} {
		if _, err := os.Stat(filepath.Join(dir, want)); err != nil {
			t.Errorf("after the tutorial: %v", err)
		}
	}
	if rep := readReport(t, filepath.Join(dir, "results/runs/cora.json")); rep.Result.TestAtBest < 0.78 {
		t.Errorf("the tutorial's Cora run reached %.3f test accuracy; the README says near 81%%", rep.Result.TestAtBest)
	}
}

// TestREADMELayoutIsTheImports: the README's Layout lists every package of
// the build, each with the packages of sancus it imports, as go list says:
// the map a newcomer reads is the code's.
func TestREADMELayoutIsTheImports(t *testing.T) {
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, layout, ok := strings.Cut(string(readme), "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no Layout section")
	}
	layout, _, _ = strings.Cut(layout, "\n## ")
	_, block, _ := strings.Cut(layout, "```\n")
	block, _, _ = strings.Cut(block, "```")
	listed := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		i := strings.LastIndex(line, " → ")
		if f := strings.Fields(line); i > 0 && len(f) > 0 {
			listed[f[0]] = line[i+len(" → "):]
		}
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}", "../../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imps, _ := strings.Cut(line, "|")
		pkg = strings.TrimPrefix(pkg, "sancus/")
		var own []string
		for _, i := range strings.Fields(imps) {
			if rest, ok := strings.CutPrefix(i, "sancus/"); ok {
				own = append(own, rest)
			}
		}
		want := strings.Join(own, ", ")
		if want == "" {
			want = "nothing of sancus"
		}
		got, ok := listed[pkg]
		if !ok {
			t.Errorf("README Layout does not list %s (→ %s)", pkg, want)
			continue
		}
		if got != want {
			t.Errorf("README Layout: %s → %s; its imports are → %s", pkg, got, want)
		}
		delete(listed, pkg)
	}
	for pkg := range listed {
		t.Errorf("README Layout lists %s, which is not a package of the build", pkg)
	}
}
