# GPT_CUDA=AUTO compiles the CUDA backend when nvcc is found; OFF (or AUTO without nvcc) links
# cuda/no_cuda, which reports "built without CUDA" when a CUDA backend is asked for.
set(GPT_WITH_CUDA OFF)
# Turing (T4, RTX 20xx, GTX 16xx: the oldest CUDA 13 compiles for), Ampere and Ada consumer cards, and
# Hopper (H100/H200): the release default of CMAKE_CUDA_ARCHITECTURES.
set(GPT_DEFAULT_CUDA_ARCHITECTURES "75;80;86;89;90")
if(GPT_CUDA STREQUAL "ON" OR GPT_CUDA STREQUAL "AUTO")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(GPT_WITH_CUDA ON)
  elseif(GPT_CUDA STREQUAL "ON")
    message(FATAL_ERROR "GPT_CUDA=ON but no CUDA compiler (nvcc) was found")
  endif()
elseif(NOT GPT_CUDA STREQUAL "OFF")
  message(FATAL_ERROR "GPT_CUDA must be AUTO, ON or OFF, not '${GPT_CUDA}'")
endif()

if(GPT_WITH_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES ${GPT_DEFAULT_CUDA_ARCHITECTURES})
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 does not know nvcc's C++20 flag; device code needs no more
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)
  file(GLOB_RECURSE GPT_CUDA_SOURCES CONFIGURE_DEPENDS
    ${CMAKE_SOURCE_DIR}/cuda/common/*.cu ${CMAKE_SOURCE_DIR}/cuda/common/*.cpp
    ${CMAKE_SOURCE_DIR}/cuda/backend/*.cu ${CMAKE_SOURCE_DIR}/cuda/backend/*.cpp
    ${CMAKE_SOURCE_DIR}/cuda/kernels/*.cu ${CMAKE_SOURCE_DIR}/cuda/gemm/*.cu ${CMAKE_SOURCE_DIR}/cuda/gemm/*.cpp
    ${CMAKE_SOURCE_DIR}/cuda/comm/*.cpp)
  # NCCL (data parallelism on GPUs, cuda/comm): the CUDA 13 toolkit ships it; older ones need the
  # distribution's libnccl-dev.
  find_path(GPT_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(GPT_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  if(NOT GPT_NCCL_INCLUDE_DIR OR NOT GPT_NCCL_LIBRARY)
    message(FATAL_ERROR "the CUDA backend needs NCCL (nccl.h and libnccl), found neither under the CUDA toolkit "
                        "(${CUDAToolkit_INCLUDE_DIRS}) nor on the system: install libnccl-dev, or configure with "
                        "-DGPT_CUDA=OFF")
  endif()
  add_library(gpt_cuda_backend OBJECT ${GPT_CUDA_SOURCES})
  target_include_directories(gpt_cuda_backend PUBLIC ${GPT_NCCL_INCLUDE_DIR})
  target_link_libraries(gpt_cuda_backend PUBLIC CUDA::cudart CUDA::cublasLt ${GPT_NCCL_LIBRARY} fmt::fmt spdlog::spdlog)
  target_compile_definitions(gpt_cuda_backend PUBLIC GPT_WITH_CUDA=1)
  # Device code calls the constexpr helpers of precision/float_formats.h and core/dtype.h.
  target_compile_options(gpt_cuda_backend PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
  message(STATUS "gpt-train: CUDA backend ON (architectures ${CMAKE_CUDA_ARCHITECTURES})")
else()
  add_library(gpt_cuda_backend OBJECT ${CMAKE_SOURCE_DIR}/cuda/no_cuda/no_cuda.cpp)
  target_link_libraries(gpt_cuda_backend PUBLIC fmt::fmt spdlog::spdlog)
  message(STATUS "gpt-train: CUDA backend OFF (stub linked)")
endif()
target_include_directories(gpt_cuda_backend PUBLIC ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/cuda)
set_target_properties(gpt_cuda_backend PROPERTIES POSITION_INDEPENDENT_CODE ON)

# The architectures cuda/backend/device_support.cpp checks a device against before using it: those built,
# or, for an emulator build without nvcc (which builds none), the release default. A source property, so
# both the real backend's objects and the emulator's (cmake/CudaEmu.cmake) take it, and changing the list
# recompiles that one file.
if(DEFINED CMAKE_CUDA_ARCHITECTURES)
  string(REPLACE ";" "," GPT_BUILT_CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}")
else()
  string(REPLACE ";" "," GPT_BUILT_CUDA_ARCHITECTURES "${GPT_DEFAULT_CUDA_ARCHITECTURES}")
endif()
set_property(SOURCE ${CMAKE_SOURCE_DIR}/cuda/backend/device_support.cpp APPEND PROPERTY
             COMPILE_DEFINITIONS GPT_CUDA_ARCHITECTURES="${GPT_BUILT_CUDA_ARCHITECTURES}")
