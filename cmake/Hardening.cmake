# GPT_SANITIZE: AddressSanitizer + UndefinedBehaviorSanitizer on every target (gcc or clang); any UB report
# aborts, so a test that triggers one fails. GPT_FUZZ: also libFuzzer coverage instrumentation and the
# fuzz_* executables of tests/fuzz (clang only). Both belong in a build directory of their own
# (scripts/sanitize.sh, scripts/fuzz.sh use build-san).
option(GPT_SANITIZE "Build everything with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
option(GPT_FUZZ "Build the libFuzzer targets of tests/fuzz (needs clang; turns on GPT_SANITIZE)" OFF)

if(GPT_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "GPT_FUZZ=ON needs clang (libFuzzer), but the C++ compiler is ${CMAKE_CXX_COMPILER_ID}: "
                        "configure with -DCMAKE_CXX_COMPILER=clang++-16 (scripts/install_fuzz_deps.sh installs it)")
  endif()
  set(GPT_SANITIZE ON CACHE BOOL "Build everything with AddressSanitizer and UndefinedBehaviorSanitizer" FORCE)
  add_compile_options(-fsanitize=fuzzer-no-link)
  # The CPU backend's OpenMP loops run threaded here too, on clang's own runtime (libomp-16-dev, from
  # install_fuzz_deps.sh), so the sanitizers see them as the release build runs them. FindOpenMP takes
  # these as given.
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-resource-dir OUTPUT_VARIABLE _gpt_clang_resources
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  find_library(GPT_LIBOMP omp HINTS ${_gpt_clang_resources}/../../ REQUIRED)
  set(OpenMP_CXX_FLAGS "-fopenmp=libomp" CACHE STRING "" FORCE)
  set(OpenMP_CXX_LIB_NAMES "omp" CACHE STRING "" FORCE)
  set(OpenMP_omp_LIBRARY ${GPT_LIBOMP} CACHE FILEPATH "" FORCE)
endif()

# GPT_SANITIZE_FLAGS: debug and optimisation flags of the sanitizer build, after the build type's (the
# last -O wins). The default -g keeps full debug info; scripts/sanitize.sh (and so CI) uses
# "-O1 -gline-tables-only": 0-25% less compile time a file, and every report still gives file:line.
set(GPT_SANITIZE_FLAGS "-g" CACHE STRING "Debug and optimisation flags added in GPT_SANITIZE builds")
if(GPT_SANITIZE)
  separate_arguments(_gpt_sanitize_flags UNIX_COMMAND "${GPT_SANITIZE_FLAGS}")
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
                      ${_gpt_sanitize_flags})
  add_link_options(-fsanitize=address,undefined)
endif()

# GPT_SANITIZE_TEST_FLAGS: flags added after GPT_SANITIZE_FLAGS to the sources of the test executables
# that call gpt_sanitize_test_sources (gpt_tests, gpt_dist_tests, gpt_alloc_tests; tests/CMakeLists.txt
# says why the emulator's tests do not), not to the library they test nor to the fuzz targets.
# scripts/sanitize.sh gives -O0: clang's -O1 on ASan- and UBSan-instrumented test files (GoogleTest's
# expanded assertions)
# took 1.2-3.2 times their -O0 CPU time, 1.8 times over 8 files (test_config.cpp 10.6 s against 3.3 s),
# while the tests' run time is mostly the library's, which keeps GPT_SANITIZE_FLAGS; the instrumentation
# is the same at either level.
set(GPT_SANITIZE_TEST_FLAGS "" CACHE STRING "Flags added to the tests' own sources in GPT_SANITIZE builds")
function(gpt_sanitize_test_sources target)
  if(GPT_SANITIZE AND GPT_SANITIZE_TEST_FLAGS)
    separate_arguments(flags UNIX_COMMAND "${GPT_SANITIZE_TEST_FLAGS}")
    target_compile_options(${target} PRIVATE ${flags})
  endif()
endfunction()
