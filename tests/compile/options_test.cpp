#include "kforge/env/compile/options.h"

#include <gtest/gtest.h>

namespace kforge::env {
namespace {

using Args = std::vector<std::string>;

TEST(HostOptionsTest, AllowsCodegenFlagsInOrder) {
  const CheckedOptions c = check_host_options(
      {"-O2 -march=native", "-ffast-math", "-DTILE=32", "-D", "USE_X", "-std=c++20", "-funroll-loops"});
  EXPECT_EQ(c.error, "");
  EXPECT_EQ(c.args,
            (Args{"-O2", "-march=native", "-ffast-math", "-DTILE=32", "-DUSE_X", "-std=c++20", "-funroll-loops"}));
  EXPECT_TRUE(c.sets_std);
  EXPECT_FALSE(check_host_options({"-O3"}).sets_std);
}

TEST(HostOptionsTest, RefusesEscapesWithTheFlagAndTheReason) {
  struct Case {
    std::string flag;
    std::string reason;
  };
  for (const Case& c : std::vector<Case>{{"-fopenmp", "libgomp"},
                                         {"-lgomp", "linking is fixed"},
                                         {"-L/tmp", "linking is fixed"},
                                         {"-Wl,-rpath,/tmp", "linking is fixed"},
                                         {"-I/work", "include paths are fixed"},
                                         {"-isystem/usr/include/torch", "include paths are fixed"},
                                         {"-include", "include paths are fixed"},
                                         {"-fplugin=./evil.so", "files chosen by the solution"},
                                         {"-B/tmp", "files chosen by the solution"},
                                         {"--specs=x.specs", "files chosen by the solution"},
                                         {"@args.txt", "files chosen by the solution"},
                                         {"-o/tmp/out.so", "managed by the environment"},
                                         {"-pthread", "runtime"},
                                         {"-fsanitize=address", "runtime"},
                                         {"-DBAD-NAME", ""},
                                         {"-std=c++98", ""},
                                         {"--whatever", ""}}) {
    const CheckedOptions r = check_host_options({"-O3", c.flag});
    EXPECT_NE(r.error.find("option \"" + c.flag + "\" is not allowed"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find(c.reason), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("Allowed options: -O0"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("-DNAME[=VALUE]"), std::string::npos) << r.error;
    EXPECT_TRUE(r.args.empty());
  }
}

TEST(NvccOptionsTest, AllowsCudaCodegenFlagsAndNormalizesValues) {
  const CheckedOptions c =
      check_nvcc_options({"--use_fast_math", "-maxrregcount", "64", "-Xptxas -O3,-v", "-Xcompiler", "-O2,-march=native",
                          "--ftz=true", "-lineinfo", "-DBLOCK=256", "--extra-device-vectorization"});
  EXPECT_EQ(c.error, "");
  EXPECT_EQ(c.args, (Args{"--use_fast_math", "--maxrregcount=64", "--ptxas-options=-O3,-v",
                          "--compiler-options=-O2,-march=native", "--ftz=true", "-lineinfo", "-DBLOCK=256",
                          "--extra-device-vectorization"}));
  EXPECT_FALSE(c.sets_opt_level);  // -O3 inside -Xptxas is ptxas' level, not nvcc's
  EXPECT_TRUE(check_nvcc_options({"-O1"}).sets_opt_level);
}

TEST(NvccOptionsTest, RefusesArchitectureLinkingAndHostEscapes) {
  EXPECT_NE(check_nvcc_options({"-arch=sm_80"}).error.find("architecture is fixed"), std::string::npos);
  EXPECT_NE(check_nvcc_options({"-gencode=arch=compute_80,code=sm_80"}).error.find("architecture"), std::string::npos);
  EXPECT_NE(check_nvcc_options({"-lcublas"}).error.find("libraries the task allows"), std::string::npos);
  EXPECT_NE(check_nvcc_options({"-G"}).error.find("debug"), std::string::npos);
  EXPECT_NE(check_nvcc_options({"--default-stream", "per-thread"}).error.find("stream"), std::string::npos);
  EXPECT_NE(check_nvcc_options({"-rdc=true"}).error.find("separate compilation"), std::string::npos);
  EXPECT_NE(check_nvcc_options({"-ccbin", "/tmp/cc"}).error.find("host compiler is fixed"), std::string::npos);
  const std::string xcompiler = check_nvcc_options({"-Xcompiler", "-O3,-fopenmp"}).error;
  EXPECT_NE(xcompiler.find("\"-Xcompiler -fopenmp\" is not allowed"), std::string::npos) << xcompiler;
  EXPECT_NE(xcompiler.find("libgomp"), std::string::npos) << xcompiler;
  const std::string ptxas = check_nvcc_options({"-Xptxas", "--extensible-whole-program"}).error;
  EXPECT_NE(ptxas.find("Allowed after -Xptxas"), std::string::npos) << ptxas;
  const std::string regs = check_nvcc_options({"-maxrregcount=4096"}).error;
  EXPECT_NE(regs.find("16 to 255"), std::string::npos) << regs;
  const std::string unknown = check_nvcc_options({"--keep"}).error;
  EXPECT_NE(unknown.find("Allowed options: -O0..-O3, --use_fast_math"), std::string::npos) << unknown;
}

TEST(NvrtcOptionsTest, AllowsNvrtcFlagsAndExplainsMinusO) {
  const CheckedOptions c =
      check_nvrtc_options({"--use_fast_math", "-maxrregcount=32", "-Xptxas=-O3", "--fmad=false", "-std=c++20"});
  EXPECT_EQ(c.error, "");
  EXPECT_EQ(c.args,
            (Args{"--use_fast_math", "--maxrregcount=32", "--ptxas-options=-O3", "--fmad=false", "-std=c++20"}));
  EXPECT_TRUE(c.sets_std);
  const std::string o3 = check_nvrtc_options({"-O3"}).error;
  EXPECT_NE(o3.find("NVRTC has no -O flag"), std::string::npos) << o3;
  EXPECT_NE(o3.find("-Xptxas=-O3"), std::string::npos) << o3;
  EXPECT_NE(check_nvrtc_options({"--gpu-architecture=sm_80"}).error.find("architecture"), std::string::npos);
  EXPECT_NE(check_nvrtc_options({"--include-path=/etc"}).error.find("include paths"), std::string::npos);
  EXPECT_NE(check_nvrtc_options({"--dlink-time-opt"}).error.find("device linking"), std::string::npos);
}

}  // namespace
}  // namespace kforge::env
