package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesOnlyOnSuccess(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := WriteBytes(p, []byte("old")); err != nil {
		t.Fatal(err)
	}
	err := Write(p, func(w io.Writer) error {
		w.Write([]byte("half"))
		return errors.New("disk full")
	})
	if err == nil {
		t.Fatal("failure not reported")
	}
	b, _ := os.ReadFile(p)
	if string(b) != "old" {
		t.Fatalf("file became %q after a failed write", b)
	}
	if _, err := os.Stat(p + ".tmp"); err == nil {
		t.Fatal("temporary file left behind")
	}
}
