package collectives

import "unsafe"

// Word is an element type that travels as its in-memory bytes. Every rank
// of a job runs on one architecture, so no byte order is converted.
type Word interface {
	~byte | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

// Bytes views s as bytes, without copying: a transfer into the view fills s.
func Bytes[T Word](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*sizeOf[T]())
}

func sizeOf[T Word]() int {
	var z T
	return int(unsafe.Sizeof(z))
}

func byteCounts[T Word](counts []int) []int {
	out := make([]int, len(counts))
	for i, n := range counts {
		out[i] = n * sizeOf[T]()
	}
	return out
}

// Isend, Irecv, Bcast, Allgatherv and Alltoallv are Comm's calls on typed
// slices, with counts in elements.

func Isend[T Word](c Comm, buf []T, dst, tag int) (Request, error) {
	return c.Isend(Bytes(buf), dst, tag)
}

func Irecv[T Word](c Comm, buf []T, src, tag int) (Request, error) {
	return c.Irecv(Bytes(buf), src, tag)
}

func Bcast[T Word](c Comm, buf []T, root int) error { return c.Bcast(Bytes(buf), root) }

func Allgatherv[T Word](c Comm, send, recv []T, counts []int) error {
	return c.Allgatherv(Bytes(send), Bytes(recv), byteCounts[T](counts))
}

func Alltoallv[T Word](c Comm, send []T, sendCounts []int, recv []T, recvCounts []int) error {
	return c.Alltoallv(Bytes(send), byteCounts[T](sendCounts), Bytes(recv), byteCounts[T](recvCounts))
}

// Allgather returns every rank's mine (all of one length), in rank order.
func Allgather[T Word](c Comm, mine []T) ([]T, error) {
	all := make([]T, len(mine)*c.Size())
	if c.Size() == 1 {
		copy(all, mine)
		return all, nil
	}
	counts := make([]int, c.Size())
	for i := range counts {
		counts[i] = len(mine)
	}
	return all, Allgatherv(c, mine, all, counts)
}
