# Build options and the warning policy for project code.

set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
set(CMAKE_EXPORT_COMPILE_COMMANDS ON)

if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE RelWithDebInfo CACHE STRING "Build type" FORCE)
endif()

option(KFORGE_BUILD_TESTS "Build the GoogleTest suites" ON)
option(KFORGE_BUILD_BENCH "Build the benchmarks in bench/" ON)
option(KFORGE_WERROR "Treat warnings in project code as errors" ON)
# AUTO: build the CUDA backend when the toolkit is found (it compiles and is
# unit-tested without a GPU); ON: fail if it is missing; OFF: CPU backend only.
set(KFORGE_CUDA AUTO CACHE STRING "Build the CUDA backend: AUTO, ON or OFF")
set_property(CACHE KFORGE_CUDA PROPERTY STRINGS AUTO ON OFF)

find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM)
  set(CMAKE_CXX_COMPILER_LAUNCHER "${CCACHE_PROGRAM}")
  set(CMAKE_C_COMPILER_LAUNCHER "${CCACHE_PROGRAM}")
endif()

# Warnings are errors in project code only: third-party headers come in through
# imported targets, which CMake marks as SYSTEM include directories.
function(kforge_target_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow
                                           -Wnon-virtual-dtor -Wno-unused-parameter)
  if(KFORGE_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  # GCC's -Wmaybe-uninitialized misreads the sanitizers' instrumentation:
  # under -fsanitize=address it fires inside libstdc++'s <regex> (std::function
  # in _NFA::_M_insert_lookahead), in code that builds cleanly without it.
  if(KFORGE_SANITIZERS AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -Wno-maybe-uninitialized)
  endif()
endfunction()

# kforge_library(name SOURCES ... DEPS ...): a module library with public
# headers under <module>/include and warnings on.
function(kforge_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${name} ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include
                                     PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  kforge_target_warnings(${name})
endfunction()

# Sanitizers for all project code, e.g. "address,undefined" (preset
# `sanitize`) or "address,undefined,fuzzer-no-link" (preset `fuzz`).
# Undefined behaviour aborts instead of printing and going on, so that a test
# or a fuzz run fails on it. docs/fuzzing.md says how to run them.
set(KFORGE_SANITIZERS "" CACHE STRING "Sanitizers for project code (-fsanitize=...), empty for none")
if(KFORGE_SANITIZERS)
  add_compile_options(-fsanitize=${KFORGE_SANITIZERS} -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  string(REPLACE ",fuzzer-no-link" "" _kforge_link_sanitizers "${KFORGE_SANITIZERS}")
  add_link_options(-fsanitize=${_kforge_link_sanitizers})
endif()
# libFuzzer targets (fuzz/), built by the `fuzz` preset with clang.
option(KFORGE_BUILD_FUZZ "Build the libFuzzer targets in fuzz/ (needs clang)" OFF)

# GPU tests (ctest label `gpu`) need a CUDA device; the `gpu` preset builds them.
option(KFORGE_GPU_TESTS "Build the GPU test suites (label: gpu)" OFF)
