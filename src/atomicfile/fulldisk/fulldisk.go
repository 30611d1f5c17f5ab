// Package fulldisk gives tests a real full disk: a small tmpfs mounted on
// a temporary directory, unmounted when the test ends. Where mounting is
// not permitted (not root), the test is skipped, saying why.
package fulldisk

import (
	"os/exec"
	"testing"
)

// Dir returns a directory on a file system of the given size ("64k").
func Dir(t testing.TB, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs here (%v: %s): a full disk needs root", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	return dir
}
