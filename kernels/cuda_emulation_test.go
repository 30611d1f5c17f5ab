package kernels

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestCUDAAttentionEmulated: GAT's CUDA kernels (cuda/sancus.cu), compiled
// for the CPU by g++ and run over an emulated thread grid, compute what
// the CPU's attention computes (cuda/testdata/emulate.cpp), so that the
// kernels' arithmetic is checked on every machine, not only where a GPU is.
func TestCUDAAttentionEmulated(t *testing.T) {
	cxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("no g++ (make deps installs it): the CUDA kernels' emulation is not checked")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "emulate")
	stub := filepath.Join(dir, "level.c")
	if err := os.WriteFile(stub, []byte("int sc_simd_level(void) { return 0; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	steps := [][]string{
		{"gcc", "-O2", "-c", "gat.c", "-o", filepath.Join(dir, "gat.o")},
		{"gcc", "-O2", "-c", stub, "-o", filepath.Join(dir, "level.o")},
		{cxx, "-O1", "-std=c++17", "-w", "-I.", "cuda/testdata/emulate.cpp", filepath.Join(dir, "gat.o"), filepath.Join(dir, "level.o"), "-lm", "-o", bin},
		{bin},
	}
	for _, s := range steps {
		out, err := exec.Command(s[0], s[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", s, err, out)
		}
		if s[0] == bin {
			t.Logf("%s", out)
		}
	}
}
