//go:build cuda

package main

import (
	"sancus/collectives"
	"sancus/collectives/nccl"
	"sancus/kernels"
	"sancus/kernels/cuda"
)

// useBuild names what a CUDA build adds: the "cuda" kernels backend
// (--device cuda) and the "nccl" device communicator (--device-comm nccl).
func useBuild() {
	kernels.Use(kernels.DeviceCUDA, cuda.Opener)
	collectives.UseBlockComm(collectives.DeviceCommNCCL, nccl.OpenBlockComm)
}
