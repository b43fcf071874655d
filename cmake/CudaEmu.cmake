# GPT_CUDA_EMU=ON also compiles the CUDA sources of cuda/ with the host compiler against cuda/emu/, the
# emulation of the CUDA execution model, so every kernel runs in CI on machines without a GPU. It is a
# test build: it adds the library gpt_cuda_emu (the host code with the CUDA backend on the emulator:
# train.backend cuda trains there) and the test executable gpt_cuda_emu_tests, and never changes what
# gpt-train itself links (the real CUDA backend, or the no_cuda stub).
#
# The same .cu file cannot be compiled both by nvcc (gpt_cuda_backend) and as C++ in one CMake directory
# (LANGUAGE is a per-file property), so each .cu gets a generated one-line .cpp that includes it.
option(GPT_CUDA_EMU "Build the CUDA kernels on the host emulator (cuda/emu) with their tests" OFF)

if(GPT_CUDA_EMU)
  file(GLOB_RECURSE GPT_CUDA_EMU_RUNTIME_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/cuda/emu/*.cpp)
  file(GLOB_RECURSE GPT_CUDA_EMU_KERNEL_SOURCES CONFIGURE_DEPENDS
    ${CMAKE_SOURCE_DIR}/cuda/common/*.cu ${CMAKE_SOURCE_DIR}/cuda/kernels/*.cu ${CMAKE_SOURCE_DIR}/cuda/gemm/*.cu
    ${CMAKE_SOURCE_DIR}/cuda/backend/*.cu)
  # Host-only sources of the backend (cuda/*/*.cpp) compile as they are, against the emulator's headers;
  # cuda/comm's NCCL communicator runs on cuda/emu/nccl.cpp, NCCL emulated over MPI.
  file(GLOB_RECURSE GPT_CUDA_EMU_HOST_SOURCES CONFIGURE_DEPENDS
    ${CMAKE_SOURCE_DIR}/cuda/common/*.cpp ${CMAKE_SOURCE_DIR}/cuda/backend/*.cpp ${CMAKE_SOURCE_DIR}/cuda/gemm/*.cpp
    ${CMAKE_SOURCE_DIR}/cuda/comm/*.cpp)
  set(GPT_CUDA_EMU_WRAPPERS)
  foreach(cu ${GPT_CUDA_EMU_KERNEL_SOURCES})
    file(RELATIVE_PATH rel ${CMAKE_SOURCE_DIR}/cuda ${cu})
    string(REPLACE "/" "__" flat ${rel})
    set(wrapper ${CMAKE_BINARY_DIR}/cuda_emu_sources/${flat}.cpp)
    file(GENERATE OUTPUT ${wrapper} CONTENT "#include \"${cu}\"\n")
    list(APPEND GPT_CUDA_EMU_WRAPPERS ${wrapper})
  endforeach()
  # Under ASan the emulator's own functions (shuffles, warp collectives, the block scheduler's fiber
  # switches), called for every emulated thread at every step, keep their frames on the real stack rather
  # than ASan's fake stack: CudaTrainer.TenStepsLogTheCpuLosses in 28 s instead of 40 (2026-12-07, Zen 5).
  # The kernels, the backend and every other file still run with detect_stack_use_after_return; the
  # runtime is checked for every other kind of access.
  if(GPT_SANITIZE)
    set_source_files_properties(${GPT_CUDA_EMU_RUNTIME_SOURCES} PROPERTIES COMPILE_OPTIONS -fsanitize-address-use-after-return=never)
  endif()
  add_library(gpt_cuda_emu STATIC ${GPT_CUDA_EMU_RUNTIME_SOURCES} ${GPT_CUDA_EMU_WRAPPERS} ${GPT_CUDA_EMU_HOST_SOURCES})
  target_include_directories(gpt_cuda_emu PUBLIC ${CMAKE_SOURCE_DIR}/cuda ${CMAKE_SOURCE_DIR}/src)
  target_compile_definitions(gpt_cuda_emu PUBLIC GPT_CUDA_EMU=1)
  # Boost.Context: the fibers a block's threads run on (cuda/emu/scheduler.cpp).
  find_package(Boost 1.74 REQUIRED COMPONENTS context)
  # gpt_host's objects, not gpt_core: this archive's CUDA backend is the emulated one, and gpt_core holds
  # the real one (or the stub).
  target_link_libraries(gpt_cuda_emu PUBLIC gpt_host Boost::context spdlog::spdlog fmt::fmt)
  gpt_set_warnings(gpt_cuda_emu)
  # gpt-train with its CUDA backend on the emulator: `train.backend: cuda` runs the real kernels on the
  # host (slowly), for trying the backend and its errors on a machine without a GPU.
  add_executable(gpt-train-emu ${CMAKE_SOURCE_DIR}/src/main.cpp)
  target_link_libraries(gpt-train-emu PRIVATE gpt_cuda_emu)
  gpt_set_warnings(gpt-train-emu)
  message(STATUS "gpt-train: CUDA emulator build ON (gpt_cuda_emu, gpt_cuda_emu_tests)")
endif()
