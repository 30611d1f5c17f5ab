package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"

	"sancus/src/atomicfile"
	"sancus/src/graph"
)

func runExportMetis(args []string) error {
	fs := newFlags("export-metis", "export-metis --data DIR --out FILE")
	data := fs.String("data", "", "dataset directory (required)")
	out := fs.String("out", "", "METIS graph `FILE` to write (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *data == "" || *out == "" {
		return fmt.Errorf("--data and --out are required")
	}
	if err := outFile(*out, "the METIS graph file", filepath.Base(filepath.Clean(*data))+".graph"); err != nil {
		return err
	}
	ds, err := graph.Load(*data, graph.LoadOptions{Classes: -1}) // the graph alone
	if err != nil {
		return err
	}
	a := ds.Adj
	return atomicfile.Write(*out, func(w io.Writer) error {
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
			if _, err := w.Write(append(buf, '\n')); err != nil {
				return err
			}
		}
		return nil
	})
}
