package train

import (
	"strings"

	"sancus/collectives"
)

// purpose is what a communication operation's bytes were for, so the
// epoch line and the results can say what staleness and the wire save
// apart from what they cannot touch.
type purpose uint8

const (
	forExchange  purpose = iota // the layers' blocks and rows: what staleness and the wire act on
	forAllreduce                // the weight gradients, every step
	forControl                  // agreement on metrics, stops, degrees: a few words
)

// purposeOf names the purpose of an operation by the name its Stats entry
// carries: every allreduce is the weight gradients'; the allgathers and
// small flag exchanges are control; everything else moves the layers' data.
func purposeOf(op string) purpose {
	switch {
	case strings.Contains(op, "allreduce"):
		return forAllreduce
	case op == "allgather", op == "batch_degrees":
		return forControl
	}
	return forExchange
}

// byPurpose is the bytes sent between two snapshots of a Stats, by purpose.
func byPurpose(before, after map[string]collectives.OpStats) (out [3]int64) {
	for op, a := range after {
		out[purposeOf(op)] += a.BytesSent - before[op].BytesSent
	}
	return out
}
