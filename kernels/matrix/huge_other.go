//go:build !linux

package matrix

import "unsafe"

func adviseHuge(unsafe.Pointer, uintptr) {}
