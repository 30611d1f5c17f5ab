package matrix

// Dropout masks are a pure function of (seed, stream, global row, column):
// no state, nothing stored for the backward pass, and the same mask whatever
// the number of ranks or threads. That is what lets a P-rank run reproduce
// the 1-rank run exactly. The hot loops are C (kernels) and CUDA
// (kernels/cuda); Keep is the same function in Go, the reference for both.

// Mask identifies one dropout application: a seed, a stream (epoch and layer)
// and the global id of the first local row.
type Mask struct {
	P      float32 // drop probability; 0 disables
	Seed   uint64
	Stream uint64
	Row0   int     // global id of local row 0 (when IDs is nil)
	IDs    []int64 // global id of every local row (a gathered or reordered block)
}

// ID is the global id that keys local row r's draws.
func (m Mask) ID(r int) uint64 {
	if m.IDs != nil {
		return uint64(m.IDs[r])
	}
	return uint64(m.Row0 + r)
}

func mix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Threshold and KeepScale are the mask's integer cut (a 16-bit draw below it
// drops the element) and the scale of kept elements, for the kernels that
// must draw exactly the same masks.
func (m Mask) Threshold() uint32  { return uint32(float64(m.P) * 65536) }
func (m Mask) KeepScale() float32 { return float32(1 / (1 - float64(m.P))) }

// Hash32 is a 32-bit avalanche hash of (key, i) (dropout_rng.h's
// sc_hash32): the dropout draws and the wire's rounding draws come from it.
func Hash32(key, i uint32) uint32 {
	h := i*0x9e3779b9 ^ key
	h ^= h >> 16
	h *= 0x7feb352d
	h ^= h >> 15
	h *= 0x846ca68b
	h ^= h >> 16
	return h
}

// Keep reports whether element (local row r, column c) survives: the row's
// 32-bit key, then half of a 32-bit avalanche hash of (key, pair), columns
// c and c+16 of each 32-column group sharing one hash (dropout_rng.h).
func (m Mask) Keep(r, c int) bool {
	k := mix64(m.Seed ^ mix64(m.Stream+0x632be59bd9b4e019*(m.ID(r)+1)))
	h := Hash32(uint32(k)^uint32(k>>32), uint32(c>>5)*16+uint32(c&15))
	draw := h & 0xffff
	if c&16 != 0 {
		draw = h >> 16
	}
	return draw >= min(m.Threshold(), 0xffff)
}
