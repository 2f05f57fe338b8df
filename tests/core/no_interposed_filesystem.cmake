# Fails when a source file calls std::filesystem::remove_all or uses
# recursive_directory_iterator. PyTorch's pip wheels export their own copies
# of these (pytorch/pytorch#133437) and, in a process that links libtorch, the
# dynamic linker binds our calls to them; their remove_all jumps to address 0.
# kforge::remove_tree (kforge/core/remove_tree.h) is the replacement.
#   cmake -DROOT=<source dir> -P no_interposed_filesystem.cmake
file(GLOB_RECURSE sources RELATIVE "${ROOT}"
  "${ROOT}/core/*.cpp" "${ROOT}/core/*.h" "${ROOT}/env/*.cpp" "${ROOT}/env/*.h" "${ROOT}/reward/*.cpp"
  "${ROOT}/reward/*.h" "${ROOT}/rollout/*.cpp" "${ROOT}/rollout/*.h" "${ROOT}/data_synth/*.cpp"
  "${ROOT}/data_synth/*.h" "${ROOT}/cli/*.cpp" "${ROOT}/cli/*.h" "${ROOT}/tests/*.cpp" "${ROOT}/tests/*.h"
  "${ROOT}/bench/*.cpp" "${ROOT}/bench/*.h" "${ROOT}/fuzz/*.cpp" "${ROOT}/fuzz/*.h")
set(found "")
foreach(f IN LISTS sources)
  if(f STREQUAL "core/include/kforge/core/remove_tree.h")
    continue()
  endif()
  file(STRINGS "${ROOT}/${f}" hits REGEX "(::remove_all[ (]|recursive_directory_iterator)")
  foreach(h IN LISTS hits)
    # Comments may name them.
    if(NOT h MATCHES "^[ \t]*//")
      string(APPEND found "\n  ${f}: ${h}")
    endif()
  endforeach()
endforeach()
list(LENGTH sources n)
if(n LESS 100)
  message(FATAL_ERROR "found only ${n} source files under ${ROOT}: wrong ROOT?")
endif()
if(found)
  message(FATAL_ERROR "use kforge::remove_tree (kforge/core/remove_tree.h) instead; libtorch interposes these:${found}")
endif()
message(STATUS "${n} source files, none calls std::filesystem::remove_all or recursive_directory_iterator")
