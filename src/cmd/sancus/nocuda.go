//go:build !cuda

package main

// useBuild names what the build adds to the CPU backend: nothing here (a
// CUDA build's cuda.go adds the GPU's).
func useBuild() {}
