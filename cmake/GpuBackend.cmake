# Selects how src/**/*.cu files are compiled. One source tree serves both
# vendors: the CUDA build compiles .cu with nvcc; the HIP build compiles the
# same files with hipcc/clang as HIP (`-x hip`), for every gfx target listed.
#   hf_add_gpu_sources(<target> <files...>)
# adds the files with the right language and links the GPU runtime.
set(HIPFORMERS_GPU OFF)
if(HIPFORMERS_BACKEND STREQUAL "cuda")
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    # sm_90 machine code plus compute_90 PTX so newer GPUs can JIT it.
    set(CMAKE_CUDA_ARCHITECTURES "90-real;90-virtual")
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  # CMake 3.25 predates nvcc's C++20 support: teach it the flag.
  if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set(HIPFORMERS_GPU_FLAGS --expt-relaxed-constexpr)
  set(HIPFORMERS_GPU ON)
elseif(HIPFORMERS_BACKEND STREQUAL "hip")
  # Host code is compiled by clang; .cu files are compiled by the same clang as
  # HIP (`-x hip`). This works with Debian's ROCm packages (ROCm under /usr) and
  # with an /opt/rocm install, without CMake's HIP language (CMake 3.25 cannot
  # find Debian's hip-lang package).
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "the hip backend needs a clang CMAKE_CXX_COMPILER (clang++ or amdclang++); got ${CMAKE_CXX_COMPILER_ID}")
  endif()
  set(HIPFORMERS_HIP_ARCHITECTURES "gfx90a;gfx940;gfx1030" CACHE STRING
      "AMD GPU targets (a current ROCm also knows gfx942, gfx950, gfx1100, gfx1151)")
  if(EXISTS /opt/rocm)
    set(_rocm_default /opt/rocm)
  else()
    set(_rocm_default /usr)
  endif()
  set(HIPFORMERS_ROCM_PATH ${_rocm_default} CACHE PATH "ROCm root (/opt/rocm, or /usr for Debian's packages)")
  find_package(hip REQUIRED CONFIG HINTS ${HIPFORMERS_ROCM_PATH})
  set(HIPFORMERS_GPU_FLAGS -x hip --rocm-path=${HIPFORMERS_ROCM_PATH})
  # Debian keeps the device bitcode libraries under the multiarch lib dir.
  if(EXISTS /usr/lib/x86_64-linux-gnu/amdgcn/bitcode AND HIPFORMERS_ROCM_PATH STREQUAL "/usr")
    list(APPEND HIPFORMERS_GPU_FLAGS --hip-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode)
  endif()
  foreach(arch ${HIPFORMERS_HIP_ARCHITECTURES})
    list(APPEND HIPFORMERS_GPU_FLAGS --offload-arch=${arch})
  endforeach()
  set(HIPFORMERS_GPU ON)
elseif(NOT HIPFORMERS_BACKEND STREQUAL "cpu")
  message(FATAL_ERROR "HIPFORMERS_BACKEND must be cpu, cuda or hip (got '${HIPFORMERS_BACKEND}')")
endif()

function(hf_add_gpu_sources target)
  if(HIPFORMERS_BACKEND STREQUAL "cuda")
    set_source_files_properties(${ARGN} PROPERTIES LANGUAGE CUDA)
    target_link_libraries(${target} PUBLIC CUDA::cudart)
    target_compile_definitions(${target} PUBLIC HIPFORMERS_WITH_CUDA=1)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${HIPFORMERS_GPU_FLAGS}>)
  else()
    set_source_files_properties(${ARGN} PROPERTIES LANGUAGE CXX COMPILE_OPTIONS "${HIPFORMERS_GPU_FLAGS}")
    target_link_libraries(${target} PUBLIC hip::host)
    target_compile_definitions(${target} PUBLIC HIPFORMERS_WITH_HIP=1)
  endif()
  target_sources(${target} PRIVATE ${ARGN})
endfunction()
