package matrix

import (
	"strings"
	"testing"
)

// TestValidateRefusesWhatWouldCrash: a row pointer past the last nonzero
// (a corrupt shard's) is an error, not an index out of range.
func TestValidateRefusesWhatWouldCrash(t *testing.T) {
	for _, c := range []struct {
		a    CSR
		want string
	}{
		{CSR{Rows: 2, Cols: 3, RowPtr: []int64{0, 5, 2}, ColIdx: []int32{0, 1}, Val: []float32{1, 1}}, "outside 0..2"},
		{CSR{Rows: 2, Cols: 3, RowPtr: []int64{0, 2, 1}, ColIdx: []int32{0}, Val: []float32{1}}, "outside"},
		{CSR{Rows: 1, Cols: 3, RowPtr: []int64{0, 1}, ColIdx: []int32{3}, Val: []float32{1}}, "column 3 outside"},
		{CSR{Rows: 1, Cols: 3, RowPtr: []int64{1, 1}, ColIdx: []int32{0}, Val: []float32{1}}, "row pointer has"},
	} {
		if err := c.a.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.a, err, c.want)
		}
	}
	ok := CSR{Rows: 2, Cols: 3, RowPtr: []int64{0, 1, 2}, ColIdx: []int32{2, 0}, Val: []float32{1, 1}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
}
