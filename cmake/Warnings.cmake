function(gpt_set_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wno-unused-parameter
    # GCC 12 reports a false -Wrestrict inside libstdc++'s operator+ on strings (GCC bug 105329).
    $<$<CXX_COMPILER_ID:GNU>:-Wno-restrict>>)
endfunction()
