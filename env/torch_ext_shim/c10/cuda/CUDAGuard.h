// KernelForge torch_ext shim (docs/torch-ext.md): everything is in one header.
#pragma once
#include "kforge/torch_ext_tensor.h"
