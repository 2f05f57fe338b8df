#include "kforge/env/compiler.h"
#include "kforge/env/cuda/launch_plan.h"

namespace kforge::env {

CompileContext compile_context_for(const TaskSpec& task, CompileContext base) {
  base.libraries = task.libraries;
  base.tensor_names = launch_tensor_names(task);
  return base;
}

}  // namespace kforge::env
