# Compiles through ccache where it is installed (scripts/install_deps.sh installs it), so a file compiled
# before with the same command, in this tree or in another clone on the machine, costs a lookup instead of a
# compile. A cold build pays for hashing each preprocessed file and storing each object on top; CI, a fresh
# clone on the machine the change was built on, finds the objects that build left.
#   - CCACHE_BASEDIR: paths under the source tree enter the key relative to it, so clones in other folders
#     share entries; CCACHE_NOHASHDIR: the working directory stays out of the key in builds with debug
#     information too (the sanitizer build's -gline-tables-only), whose objects may then name another
#     clone's build folder as their compilation directory (reports still give file and line).
#   - CCACHE_NAMESPACE: the key is the command line, and -march=native names no CPU, so one cache used on two
#     CPUs would hand one's objects to the other (ccache issue 824); the options -march=native resolves to
#     on this machine, hashed, keep each CPU's entries apart.
# GPT_CCACHE=OFF compiles without it.
option(GPT_CCACHE "Compile through ccache when it is installed" ON)
find_program(GPT_CCACHE_PROGRAM ccache)
if(GPT_CCACHE AND GPT_CCACHE_PROGRAM)
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -march=native -### -E -x c++ /dev/null
                  ERROR_VARIABLE gpt_native_options OUTPUT_VARIABLE gpt_native_stdout RESULT_VARIABLE gpt_native_result)
  string(MD5 gpt_cpu_key "${gpt_native_result}${gpt_native_stdout}${gpt_native_options}")
  set(gpt_launcher ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${CMAKE_SOURCE_DIR} CCACHE_NOHASHDIR=1
                   CCACHE_NAMESPACE=gpt-train-${gpt_cpu_key} ${GPT_CCACHE_PROGRAM})
  foreach(lang C CXX CUDA)
    if(NOT DEFINED CMAKE_${lang}_COMPILER_LAUNCHER)
      set(CMAKE_${lang}_COMPILER_LAUNCHER ${gpt_launcher})
    endif()
  endforeach()
  message(STATUS "gpt-train: compiling through ${GPT_CCACHE_PROGRAM} (GPT_CCACHE=OFF to compile without)")
endif()
