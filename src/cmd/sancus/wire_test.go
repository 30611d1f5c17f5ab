package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sancus/collectives"
	"sancus/src/result"
	"sancus/src/train"
)

// TestChooseWireKeepsItsChoice: ranks that share no memory (a btl list
// without shared memory) measure their link and choose a width, which a
// checkpoint directory keeps; a run resumed there sends as the first did,
// without measuring, on every rank, and a kept value that no link would
// choose (auto, or none) is measured afresh. Two in-process ranks measure
// memory, at a rate that depends on the load: each run is held to what
// train.WireForLink makes of the rate it measured.
func TestChooseWireKeepsItsChoice(t *testing.T) {
	t.Setenv("OMPI_MCA_btl", "tcp,self")
	dir := t.TempDir()
	kept := filepath.Join(dir, "wire-choice")
	choose := func() ([]string, []*result.Run) {
		t.Helper()
		wires, reps := make([]string, 2), make([]*result.Run, 2)
		err := collectives.NewWorld(2, time.Minute).Run(func(c collectives.Comm) error {
			cfg, rep := train.Config{}, &result.Run{}
			cfg.Run.CheckpointDir = dir
			shared, err := oneHostSharedMemory(c)
			if err == nil {
				err = chooseWire(&cfg, c, rep, shared)
			}
			wires[c.Rank()], reps[c.Rank()] = cfg.Wire.Fwd, rep
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return wires, reps
	}
	read := func() string {
		t.Helper()
		b, err := os.ReadFile(kept)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	measured := func(what string, wires []string, reps []*result.Run) {
		t.Helper()
		want, _ := train.WireForLink(reps[0].LinkGBs)
		if reps[0].LinkGBs <= 0 || wires[0] != want || wires[1] != want || read() != want {
			t.Fatalf("%s: wires %q, measured %g GB/s, kept %q; want %s measured and kept", what, wires, reps[0].LinkGBs, read(), want)
		}
	}
	wires, reps := choose()
	measured("first run", wires, reps)
	if err := os.WriteFile(kept, []byte("int2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wires, reps = choose()
	for r := range 2 {
		if wires[r] != "int2" || reps[r].LinkGBs != 0 || !strings.Contains(reps[r].WireChosen, "keeps from the run this continues") {
			t.Fatalf("resumed, rank %d: wire %q, measured %g GB/s, said %q; want the kept int2, unmeasured", r, wires[r], reps[r].LinkGBs, reps[r].WireChosen)
		}
	}
	for _, bad := range []string{"auto", "", "int3"} {
		if err := os.WriteFile(kept, []byte(bad+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		wires, reps = choose()
		measured("kept "+bad, wires, reps)
	}
}
