//go:build cuda

package main

// The CUDA build registers the "cuda" kernels backend (--device cuda) and
// the "nccl" device communicator (--device-comm nccl).
import (
	_ "sancus/collectives/nccl"
	_ "sancus/kernels/cuda"
)
