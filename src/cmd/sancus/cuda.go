//go:build cuda

package main

// The CUDA build registers the "cuda" kernels backend (--device cuda).
import _ "sancus/kernels/cuda"
