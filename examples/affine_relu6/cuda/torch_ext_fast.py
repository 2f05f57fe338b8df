# A KernelBench-style solution (load_inline), as policies trained on
# KernelBench write them; `kforge eval --mode torch_ext` builds its
# cuda_sources against KernelForge's torch shim (docs/torch-ext.md) and calls
# affine_relu6_cuda with the task's tensors: x, then the params w and b.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

affine_relu6_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void affine_relu6_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                    const float* __restrict__ b, float* __restrict__ y, int64_t n, int64_t cols) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t c = i % cols;
        y[i] = fminf(fmaxf(x[i] * __ldg(&w[c]) + __ldg(&b[c]), 0.0f), 6.0f);
    }
}

torch::Tensor affine_relu6_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous(), "x must be a contiguous CUDA tensor");
    TORCH_CHECK(w.numel() == x.size(-1), "w must have one value per column");
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    const int threads = 256;
    int64_t blocks = (n + threads - 1) / threads;
    if (blocks > 132 * 8) blocks = 132 * 8;
    affine_relu6_kernel<<<(unsigned)blocks, threads>>>(x.data_ptr<float>(), w.data_ptr<float>(),
                                                       b.data_ptr<float>(), y.data_ptr<float>(), n, x.size(-1));
    return y;
}
"""

affine_relu6_cpp_source = "torch::Tensor affine_relu6_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

affine_relu6 = load_inline(
    name="affine_relu6",
    cpp_sources=affine_relu6_cpp_source,
    cuda_sources=affine_relu6_source,
    functions=["affine_relu6_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.w = nn.Parameter(torch.rand(channels) * 2.5 + 0.5)
        self.b = nn.Parameter(torch.rand(channels))
        self.affine_relu6 = affine_relu6

    def forward(self, x):
        return self.affine_relu6.affine_relu6_cuda(x, self.w, self.b)
