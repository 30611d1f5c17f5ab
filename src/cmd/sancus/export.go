package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"

	"sancus/src/graph"
)

func init() {
	register("export-metis", "write a dataset's graph as a METIS graph file (for gpmetis)", runExportMetis)
}

func runExportMetis(args []string) error {
	fs := newFlags("export-metis", "export-metis --data DIR --out FILE")
	data := fs.String("data", "", "dataset directory (required)")
	out := fs.String("out", "", "METIS graph file to write (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *data == "" || *out == "" {
		return fmt.Errorf("--data and --out are required")
	}
	ds, err := graph.Load(*data, graph.LoadOptions{})
	if err != nil {
		return err
	}
	f, err := os.Create(*out + ".tmp")
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	a := ds.Adj
	fmt.Fprintf(w, "%d %d\n", a.Rows, a.NNZ()/2)
	var buf []byte
	for r := 0; r < a.Rows; r++ {
		buf = buf[:0]
		for p := a.RowPtr[r]; p < a.RowPtr[r+1]; p++ {
			if p > a.RowPtr[r] {
				buf = append(buf, ' ')
			}
			buf = strconv.AppendInt(buf, int64(a.ColIdx[p])+1, 10)
		}
		buf = append(buf, '\n')
		w.Write(buf)
	}
	err = w.Flush()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(*out + ".tmp")
		return fmt.Errorf("writing %s: %w", *out, err)
	}
	return os.Rename(*out+".tmp", *out)
}
