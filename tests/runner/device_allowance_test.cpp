// The runner's count of a candidate's device memory (runner/device_allowance.h):
// what is admitted and refused against the lane's share, with the pools'
// reservations and the kernels' local memory in the footprint, and the
// messages the candidate's out-of-memory verdict carries. Pure bookkeeping:
// the GPU tests drive it through the real allocation calls
// (tests/cuda/cuda_lane_memory_test.cpp, CudaLaneMemory.*).
#include "runner/device_allowance.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace kforge::runner {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;
using Pool = DeviceAllowance::Pool;

// Distinct pointers as the runtime would hand them out.
const void* at(uintptr_t address) { return reinterpret_cast<const void*>(address); }

TEST(DeviceAllowance, ReservationsAreAQuarterOfTheLimitAtMost) {
  // Small arenas: four times the arena plus 64 MiB.
  EXPECT_EQ(DeviceAllowance::pool_reserve(8 * kGiB, 60 * kGiB, 16 * kMiB), 4 * 16 * kMiB + 64 * kMiB);
  // Large arenas: a quarter of the limit.
  EXPECT_EQ(DeviceAllowance::pool_reserve(8 * kGiB, 60 * kGiB, 4 * kGiB), 2 * kGiB);
  // Little free memory: a quarter of it.
  EXPECT_EQ(DeviceAllowance::pool_reserve(8 * kGiB, 1 * kGiB, 4 * kGiB), kGiB / 4);
  // No limit: the arena and the free memory decide.
  EXPECT_EQ(DeviceAllowance::pool_reserve(0, 80 * kGiB, 4 * kGiB), 4 * 4 * kGiB + 64 * kMiB);
  EXPECT_EQ(DeviceAllowance::pool_reserve(0, 60 * kGiB, 4 * kGiB), 15 * kGiB);
}

TEST(DeviceAllowance, AllocationsUpToTheLimitBesideTheReservationsAreAdmitted) {
  DeviceAllowance a(8 * kGiB);
  a.set_reserves(kGiB, kGiB);
  EXPECT_EQ(a.footprint(), 2 * kGiB) << "the reservations are held from the start";
  // Within the stream pool's reservation: nothing new.
  EXPECT_TRUE(a.admits(Pool::kStream, kGiB));
  a.allocated(at(0x1000), Pool::kStream, kGiB);
  EXPECT_EQ(a.footprint(), 2 * kGiB);
  // Growing it: up to the limit less the graph pool's reservation.
  EXPECT_TRUE(a.admits(Pool::kStream, 6 * kGiB));
  EXPECT_FALSE(a.admits(Pool::kStream, 6 * kGiB + 1));
  a.allocated(at(0x2000), Pool::kStream, 6 * kGiB);
  EXPECT_EQ(a.footprint(), 8 * kGiB);
  EXPECT_EQ(a.live_bytes(), 7 * kGiB);
  EXPECT_FALSE(a.admits(Pool::kStream, 1));
  // Freed memory stays with the pool (its release threshold is raised), so
  // the footprint keeps the high-water mark; reusing it is admitted.
  EXPECT_TRUE(a.freed(at(0x2000)));
  EXPECT_EQ(a.footprint(), 8 * kGiB);
  EXPECT_EQ(a.live_bytes(), kGiB);
  EXPECT_TRUE(a.admits(Pool::kStream, 6 * kGiB));
  EXPECT_FALSE(a.admits(Pool::kStream, 6 * kGiB + 1));
  // ...but not in the graph pool, which does not share it.
  EXPECT_FALSE(a.admits(Pool::kGraph, kGiB + 1));
  EXPECT_TRUE(a.admits(Pool::kGraph, kGiB));
  // A pointer it never saw is left alone.
  EXPECT_FALSE(a.freed(at(0x9999)));
  EXPECT_EQ(a.live_bytes(), kGiB);
}

TEST(DeviceAllowance, GraphMemoryCountsBesideTheStreamPool) {
  DeviceAllowance a(4 * kGiB);
  a.set_reserves(kGiB, kGiB);
  a.allocated(at(0x1000), Pool::kGraph, 3 * kGiB);
  EXPECT_EQ(a.footprint(), 4 * kGiB);
  EXPECT_FALSE(a.admits(Pool::kGraph, 1));
  EXPECT_TRUE(a.admits(Pool::kStream, kGiB)) << "the stream pool's own reservation is already counted";
  EXPECT_FALSE(a.admits(Pool::kStream, kGiB + 1));
}

TEST(DeviceAllowance, SizesBeyondTheLimitAreRefusedWithoutWrapping) {
  DeviceAllowance a(kGiB);
  EXPECT_FALSE(a.admits(Pool::kStream, UINT64_MAX));
  EXPECT_FALSE(a.admits(Pool::kStream, UINT64_MAX - kGiB));
  const std::string msg = a.refusal("cudaMallocAsync", Pool::kStream, UINT64_MAX);
  EXPECT_NE(msg.find("it may use 1.0 GiB"), std::string::npos) << msg;
}

TEST(DeviceAllowance, NoLimitAdmitsEverythingAndStillCounts) {
  DeviceAllowance a;
  EXPECT_TRUE(a.admits(Pool::kStream, UINT64_MAX));
  a.allocated(at(0x1000), Pool::kStream, 3 * kGiB);
  EXPECT_EQ(a.footprint(), 3 * kGiB);
  EXPECT_TRUE(a.local_memory_problem().empty());
}

TEST(DeviceAllowance, TheRefusalSaysWhatWasAskedWhatIsUsedAndWhichKeyChangesIt) {
  DeviceAllowance a(2 * kGiB);
  a.set_reserves(512 * kMiB, 512 * kMiB);
  a.allocated(at(0x1000), Pool::kStream, kGiB);
  ASSERT_FALSE(a.admits(Pool::kStream, kGiB));
  EXPECT_EQ(a.refusal("cudaMallocAsync", Pool::kStream, kGiB),
            "cudaMallocAsync of 1.0 GiB refused with cudaErrorMemoryAllocation (out of memory): the candidate's "
            "device memory would reach 2.5 GiB (1.0 GiB allocated now), and it may use 2.0 GiB, its lane's share of "
            "the GPU's memory (placement.lane_device_memory_mib, placement.lanes_per_device)");
  EXPECT_NE(a.refusal("cudaMallocAsync", Pool::kGraph, 2 * kGiB).find("(in a graph capture)"), std::string::npos);
}

TEST(DeviceAllowance, LocalMemoryForEveryThreadTheGpuHoldsCountsAndMayNotFit) {
  DeviceAllowance a(8 * kGiB);
  a.set_reserves(kGiB, kGiB);
  // 64,000 bytes per thread for 132 SMs x 2048 threads: 16.1 GiB.
  a.set_local_memory({"_Z9big_stackPfi", 64000, 132 * 2048});
  const std::string problem = a.local_memory_problem();
  EXPECT_EQ(problem,
            "kernel _Z9big_stackPfi needs 64000 bytes of local memory per thread, 16.1 GiB for the 270336 threads "
            "the GPU holds at once, more than the 6.0 GiB the candidate may use beside its 2.0 GiB of reserved "
            "scratch memory: CUDA error cudaErrorMemoryAllocation (out of memory) at its launch, within its lane's "
            "share of the GPU's memory (placement.lane_device_memory_mib, placement.lanes_per_device)");
  // A small stack fits, and takes its share of the footprint.
  DeviceAllowance b(8 * kGiB);
  b.set_reserves(kGiB, kGiB);
  b.set_local_memory({"small", 1024, 132 * 2048});
  EXPECT_TRUE(b.local_memory_problem().empty());
  EXPECT_EQ(b.footprint(), 2 * kGiB + 1024 * 132 * 2048);
  // 264 MiB of local memory and the graph pool's 1 GiB leave the stream pool 6.7 GiB.
  EXPECT_TRUE(b.admits(Pool::kStream, 6 * kGiB + 512 * kMiB));
  EXPECT_FALSE(b.admits(Pool::kStream, 6 * kGiB + 768 * kMiB));
}

TEST(DeviceAllowance, AKernelNameIsCut) {
  DeviceAllowance a(kMiB);
  a.set_local_memory({std::string(100000, 'k'), 1 << 20, 1000});
  const std::string problem = a.local_memory_problem();
  EXPECT_LT(problem.size(), 1000u);
  EXPECT_NE(problem.find(std::string(256, 'k') + "... needs"), std::string::npos);
}

}  // namespace
}  // namespace kforge::runner
