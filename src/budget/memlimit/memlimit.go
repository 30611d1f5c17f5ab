// Package memlimit runs a test whose failure would be an allocation of
// gigabytes in a child process under `ulimit -v`: should the check it
// tests regress, the child dies of its limit and the test fails, instead
// of the machine running out of memory under every other job on it.
package memlimit

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

const envChild = "SANCUS_MEMLIMIT_CHILD"

// Child reports whether this process is the limited child that runs t's
// body. In the test's own process it runs t again in a child whose
// address space is capped at limit bytes, fails t if the child fails,
// dies or takes over two minutes, and returns false: the caller returns.
//
//	if !memlimit.Child(t, 3<<30) {
//		return
//	}
//	... what must be refused before it allocates
func Child(t *testing.T, limit int64) bool {
	t.Helper()
	if os.Getenv(envChild) == t.Name() {
		return true
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to set a ulimit with")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, "-c", `ulimit -v "$1" && exec "$2" -test.run="$3" -test.count=1 -test.v`,
		"memlimit", strconv.FormatInt(limit>>10, 10), os.Args[0], "^"+regexp.QuoteMeta(t.Name())+"$")
	cmd.Env = append(os.Environ(), envChild+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("under ulimit -v %d MB the test failed (%v):\n%s", limit>>20, err, tail(string(out), 4000))
	}
	return false
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
