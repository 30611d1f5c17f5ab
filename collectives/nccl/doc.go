// Package nccl moves device-resident blocks between GPUs with NCCL (built
// only with the cuda tag): in-place broadcast from a root, SANCUS's
// skip-broadcast as one NCCL group of the active roots' broadcasts (stale
// roots send nothing), and a sum allreduce. A communicator is bootstrapped
// over an existing collectives.Comm (MPI or in-process), which carries the
// NCCL unique id from rank 0 to the others; each rank uses the GPU its
// kernels backend opened (local rank modulo the devices on the node).
package nccl
