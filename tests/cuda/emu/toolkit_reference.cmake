# The tests that compare the emulator with the CUDA toolkit (toolkit_reference.cpp: the toolkit's host
# conversions; test_cublaslt_enums.cpp: cublasLt.h's enumerator values) need only the toolkit's headers,
# not nvcc or a GPU. They are compiled against the toolkit's include directory when it is found, and skip
# with a reason otherwise.
find_path(GPT_CUDA_TOOLKIT_INCLUDE_DIR cuda_bf16.h
          HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{CUDA_HOME}/include /usr/local/cuda/include)
if(GPT_CUDA_TOOLKIT_INCLUDE_DIR)
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/toolkit_reference.cpp
                              ${CMAKE_CURRENT_LIST_DIR}/test_cublaslt_enums.cpp
                              PROPERTIES COMPILE_OPTIONS "-isystem;${GPT_CUDA_TOOLKIT_INCLUDE_DIR}")
  message(STATUS "gpt-train: emulator tests compare with the CUDA headers in ${GPT_CUDA_TOOLKIT_INCLUDE_DIR}")
else()
  message(STATUS "gpt-train: CUDA headers not found; the emulator's toolkit comparisons will skip")
endif()
