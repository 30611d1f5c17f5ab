package train

import (
	"testing"

	"sancus/collectives/wire"
)

// Two senders of sums for the same rows round them with different draws,
// and one sender with the same draws every time for an epoch: the sums a
// row receives from several ranks carry independent rounding errors, and a
// run is repeatable.
func TestReductionRoundsEachSenderApart(t *testing.T) {
	r := &reduction{widths: []int{8}, bits: 2, stream: wireStream(0, dirGradient),
		enc: [][][]byte{{nil}, {nil}}, rowHash: [][]uint64{{wire.RowHash(7), wire.RowHash(8)}, {wire.RowHash(7), wire.RowHash(8)}}}
	x := []float32{0.1, 0.2, 0.33, 0.4, 0.55, 0.6, 0.77, 0.8, 0.15, 0.25, 0.35, 0.45, 0.5, 0.65, 0.7, 0.85}
	enc := func(sender int) string {
		return string(r.encode(0, 0, x, r.key(1, 5, sender)))
	}
	if enc(0) != enc(0) {
		t.Fatal("one sender rounds the same sums differently")
	}
	if enc(0) == enc(1) {
		t.Fatal("two senders round the same sums with the same draws")
	}
	if r.key(1, 5, 0) == r.key(1, 6, 0) {
		t.Fatal("two epochs round with the same key")
	}
}
