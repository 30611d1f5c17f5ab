/* Type-checking stand-in for the CUDA driver API header: enough
   declarations for `make vet-cuda` to type-check the cuda-tagged Go code
   (cgo reads these to learn the C types) on a host without the CUDA
   toolkit. Nothing built from it links or runs; the real cuda.h is used
   by every build. */
#pragma once
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef unsigned long long CUdeviceptr;
#define CUDA_SUCCESS 0
#define CUDA_ERROR_NOT_FOUND 500
#define CU_STREAM_NON_BLOCKING 1
#include <stddef.h>
CUresult cuInit(unsigned int flags);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuDeviceGet(CUdevice *dev, int ordinal);
CUresult cuDeviceGetCount(int *n);
CUresult cuDeviceGetName(char *name, int len, CUdevice dev);
CUresult cuDeviceTotalMem(size_t *bytes, CUdevice dev);
CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev);
CUresult cuDevicePrimaryCtxRelease(CUdevice dev);
CUresult cuGetErrorName(CUresult r, const char **s);
CUresult cuStreamCreate(CUstream *s, unsigned int flags);
CUresult cuStreamDestroy(CUstream s);
CUresult cuStreamSynchronize(CUstream s);
CUresult cuModuleLoadData(CUmodule *m, const void *image);
CUresult cuModuleUnload(CUmodule m);
CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name);
CUresult cuMemAlloc(CUdeviceptr *p, size_t bytes);
CUresult cuMemFree(CUdeviceptr p);
CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t bytes, CUstream s);
CUresult cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t bytes, CUstream s);
CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s);
CUresult cuMemsetD32Async(CUdeviceptr p, unsigned int v, size_t n, CUstream s);
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shmem, CUstream s, void **args, void **extra);
