//go:build linux

package matrix

import (
	"syscall"
	"unsafe"
)

// adviseHuge asks Linux to back the 2 MiB-aligned part of the n bytes at p
// with transparent huge pages (where THP is "madvise", as on most hosts).
func adviseHuge(p unsafe.Pointer, n uintptr) {
	const huge = 2 << 20
	start := (uintptr(p) + huge - 1) &^ (huge - 1)
	end := (uintptr(p) + n) &^ (huge - 1)
	if end > start {
		syscall.Syscall(syscall.SYS_MADVISE, start, end-start, 14) // MADV_HUGEPAGE
	}
}
