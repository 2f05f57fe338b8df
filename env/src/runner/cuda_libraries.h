// The shared objects of a CUDA runner: the libraries a candidate may link
// (cuBLAS, cuBLASLt) warmed up before the running filter, and the list of
// what is loaded, which the profile reports when CUPTI adds to it.
#pragma once

#include <string>
#include <vector>

namespace kforge::runner {

// One handle of each library the candidate linked, created now and never
// destroyed (see the definition for why); appended to `handles`.
void warm_up_libraries(std::vector<void*>* handles);

// The shared objects in the process (dl_iterate_phdr: no system call).
std::vector<std::string> loaded_objects();

}  // namespace kforge::runner
