// KernelForge torch_ext shim (docs/torch-ext.md): every header is the whole
// shim, through kforge/torch_ext_tensor.h.
#pragma once
#include "kforge/torch_ext_tensor.h"
