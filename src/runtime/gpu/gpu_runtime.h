// One spelling for the CUDA and HIP runtime APIs. Every GPU source includes
// this instead of cuda_runtime.h or hip/hip_runtime.h, and calls gpu* names;
// the HIP build compiles the very same .cu files.
#pragma once

#if defined(HIPFORMERS_WITH_HIP)
#include <hip/hip_runtime.h>
#define HF_GPU_PLATFORM_NAME "hip"
#define HF_GPU_API(name) hip##name
using gpuError_t = hipError_t;
using gpuDeviceProp_t = hipDeviceProp_t;
using gpuStream_t = hipStream_t;
using gpuEvent_t = hipEvent_t;
constexpr gpuError_t gpuSuccess = hipSuccess;
#elif defined(HIPFORMERS_WITH_CUDA)
#include <cuda_runtime.h>
#define HF_GPU_PLATFORM_NAME "cuda"
#define HF_GPU_API(name) cuda##name
using gpuError_t = cudaError_t;
using gpuDeviceProp_t = cudaDeviceProp;
using gpuStream_t = cudaStream_t;
using gpuEvent_t = cudaEvent_t;
constexpr gpuError_t gpuSuccess = cudaSuccess;
#else
#error "gpu_runtime.h is only for GPU builds (HIPFORMERS_WITH_CUDA or HIPFORMERS_WITH_HIP)"
#endif

#define gpuGetDeviceCount HF_GPU_API(GetDeviceCount)
#define gpuGetDeviceProperties HF_GPU_API(GetDeviceProperties)
#define gpuSetDevice HF_GPU_API(SetDevice)
#define gpuGetDevice HF_GPU_API(GetDevice)
#define gpuMemGetInfo HF_GPU_API(MemGetInfo)
#define gpuRuntimeGetVersion HF_GPU_API(RuntimeGetVersion)
#define gpuDriverGetVersion HF_GPU_API(DriverGetVersion)
#define gpuDeviceGetPCIBusId HF_GPU_API(DeviceGetPCIBusId)
#define gpuGetErrorName HF_GPU_API(GetErrorName)
#define gpuGetErrorString HF_GPU_API(GetErrorString)
#define gpuGetLastError HF_GPU_API(GetLastError)
#define gpuMalloc HF_GPU_API(Malloc)
#define gpuFree HF_GPU_API(Free)
#define gpuMemcpy HF_GPU_API(Memcpy)
#define gpuMemcpyAsync HF_GPU_API(MemcpyAsync)
#define gpuMemset HF_GPU_API(Memset)
#define gpuDeviceSynchronize HF_GPU_API(DeviceSynchronize)
#define gpuStreamCreate HF_GPU_API(StreamCreate)
#define gpuStreamDestroy HF_GPU_API(StreamDestroy)
#define gpuStreamSynchronize HF_GPU_API(StreamSynchronize)
#define gpuEventCreate HF_GPU_API(EventCreate)
#define gpuEventDestroy HF_GPU_API(EventDestroy)
#define gpuEventRecord HF_GPU_API(EventRecord)
#define gpuEventSynchronize HF_GPU_API(EventSynchronize)
#define gpuEventElapsedTime HF_GPU_API(EventElapsedTime)
#define gpuMemcpyHostToDevice HF_GPU_API(MemcpyHostToDevice)
#define gpuMemcpyDeviceToHost HF_GPU_API(MemcpyDeviceToHost)
#define gpuMemcpyDeviceToDevice HF_GPU_API(MemcpyDeviceToDevice)
#define gpuErrorMemoryAllocation HF_GPU_API(ErrorMemoryAllocation)
#define gpuMemsetAsync HF_GPU_API(MemsetAsync)
#define gpuStreamCreateWithFlags HF_GPU_API(StreamCreateWithFlags)
#define gpuStreamNonBlocking HF_GPU_API(StreamNonBlocking)
