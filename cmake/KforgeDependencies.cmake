# Third-party dependencies. All come from Debian packages on dev/CI machines
# (see `run`); on the GPU machine libtorch comes from PyTorch's CMake prefix and
# ZeroMQ from unpacked .deb files (shared/device/README.md).

find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(cppzmq REQUIRED)
find_package(CLI11 REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
find_package(PkgConfig REQUIRED)
pkg_check_modules(SECCOMP REQUIRED IMPORTED_TARGET libseccomp)
# Capstone decodes a candidate's machine code for the system-call check
# (env/src/judge/syscall_scan.h). Debian's libcapstone-dev; on the GPU
# machine an unpacked .deb (scripts/gpu/fetch_extra_debs.sh). Linked
# statically (Debian's archive is position-independent): the judge and the
# tools then need no libcapstone.so at run time, inside a sandbox or on a
# machine without the package. Not through pkg-config: its .pc names
# /usr/include/capstone, which an unpacked .deb does not have.
find_path(CAPSTONE_INCLUDE_DIR capstone/capstone.h REQUIRED)
find_library(CAPSTONE_LIBRARY NAMES libcapstone.a capstone REQUIRED)
add_library(kforge_capstone INTERFACE)
target_include_directories(kforge_capstone SYSTEM INTERFACE ${CAPSTONE_INCLUDE_DIR})
target_link_libraries(kforge_capstone INTERFACE ${CAPSTONE_LIBRARY})
# libiberty's callback demangler, whose output can be bounded (kforge/core/
# demangle.h): Debian's libiberty-dev, a static library (on the GPU machine an
# unpacked .deb, needed at build time only).
find_path(LIBIBERTY_INCLUDE_DIR libiberty/demangle.h REQUIRED)
find_library(LIBIBERTY_LIBRARY NAMES libiberty.a iberty REQUIRED)
add_library(kforge_libiberty INTERFACE)
target_include_directories(kforge_libiberty SYSTEM INTERFACE ${LIBIBERTY_INCLUDE_DIR})
target_link_libraries(kforge_libiberty INTERFACE ${LIBIBERTY_LIBRARY})
# libcurl: the OpenAI-compatible HTTP policy (rollout/). Debian's
# libcurl4-openssl-dev on dev/CI; where it is missing (the GPU machine may
# lack the headers) that policy is left out and everything else builds.
find_package(CURL QUIET)

# yaml-cpp 0.7 (Debian 12) exports `yaml-cpp`, 0.8 exports `yaml-cpp::yaml-cpp`.
if(TARGET yaml-cpp::yaml-cpp)
  set(KFORGE_YAML_TARGET yaml-cpp::yaml-cpp)
else()
  set(KFORGE_YAML_TARGET yaml-cpp)
endif()

# libtorch: 1.13 CPU-only from Debian on CI, 2.x with CUDA on GPU machines.
find_package(Torch REQUIRED)
add_library(kforge_torch INTERFACE)
target_link_libraries(kforge_torch INTERFACE ${TORCH_LIBRARIES})
separate_arguments(_kforge_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
target_compile_options(kforge_torch INTERFACE ${_kforge_torch_flags})
# PyTorch 2.x wheels export std::filesystem symbols of a statically linked
# libstdc++ (pytorch/pytorch#133437); when libtorch precedes libstdc++ in the
# lookup order, our std::filesystem calls bind to that copy and crash. Putting
# libstdc++ first among the DT_NEEDED entries makes the system one win.
target_link_options(kforge_torch INTERFACE "LINKER:--push-state,--no-as-needed" "-lstdc++" "LINKER:--pop-state")

# CUDA toolkit: NVRTC, CUPTI, cudart and the driver API compile and link on
# machines without a GPU; only running them needs one.
set(KFORGE_HAVE_CUDA OFF)
if(NOT KFORGE_CUDA STREQUAL "OFF")
  if(KFORGE_CUDA STREQUAL "ON")
    find_package(CUDAToolkit 12 REQUIRED)
  else()
    find_package(CUDAToolkit 12 QUIET)
  endif()
  if(CUDAToolkit_FOUND)
    set(KFORGE_HAVE_CUDA ON)
    message(STATUS "KernelForge: CUDA backend ON (toolkit ${CUDAToolkit_VERSION} at ${CUDAToolkit_BIN_DIR})")
  else()
    message(STATUS "KernelForge: CUDA toolkit not found, CUDA backend OFF")
  endif()
endif()

if(KFORGE_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(KFORGE_BUILD_BENCH)
  find_package(benchmark QUIET)
  if(NOT benchmark_FOUND)
    message(STATUS "KernelForge: Google Benchmark not found, bench/ is skipped")
    set(KFORGE_BUILD_BENCH OFF)
  endif()
endif()

# Interpreter used by tests and scripts: Debian's own, which has python3-zmq and
# friends (the `python3` first on PATH on dev machines may be a pyenv one).
if(NOT KFORGE_PYTHON)
  if(EXISTS /usr/bin/python3)
    set(KFORGE_PYTHON /usr/bin/python3)
  else()
    find_program(KFORGE_PYTHON python3 REQUIRED)
  endif()
endif()
set(KFORGE_PYTHON "${KFORGE_PYTHON}" CACHE FILEPATH "Python used by tests and scripts")
