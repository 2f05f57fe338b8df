// The canary check on host memory (judge/arena_canary.h), through the CPU
// judge device's own arena: what an out-of-bounds write looks like in the
// report. The same code runs on CUDA arenas (views are device tensors there);
// the end-to-end GPU case is tests/adversarial/cuda/write_out_of_bounds.cu.
#include "judge/arena_canary.h"

#include <gtest/gtest.h>

#include <cstring>

namespace kforge::judge {
namespace {

struct Fixture {
  std::unique_ptr<JudgeDevice> device = make_judge_device("cpu", 0);
  judge::ArenaLayout layout = judge::plan_arena({4096 * 4, 8192 * 4}, device->page_size(), 64);
  std::unique_ptr<SharedArena> arena = device->create_arena(layout);
  uint64_t x = layout.data_offset(0, 4096 * 4);
  uint64_t out = layout.data_offset(1, 4096 * 4);  // the base shape of a slot sized for 8192
  uint8_t* bytes() { return static_cast<uint8_t*>(arena->view(0, {1}, at::kByte).data_ptr()); }
  ArenaCanary armed() {
    ArenaCanary c;
    c.arm(arena.get(), {{"input x", {x, 4096 * 4}}, {"output out", {out, 4096 * 4}}});
    return c;
  }
};

TEST(ArenaCanary, CleanCallsPass) {
  Fixture f;
  ArenaCanary c = f.armed();
  std::memset(f.bytes() + f.out, 0, 4096 * 4);  // writes inside the tensors are the call's business
  std::memset(f.bytes() + f.x, 7, 4096 * 4);
  EXPECT_EQ(c.check(), "");
  EXPECT_EQ(f.bytes()[f.out - 1], judge::kCanaryByte);
}

TEST(ArenaCanary, AWritePastTheEndOfATensorIsNamed) {
  Fixture f;
  // x is end-aligned in its slot: the bytes after it are the guard page.
  ArenaCanary c = f.armed();
  const float past[3] = {1, 2, 3};
  std::memcpy(f.bytes() + f.x + 4096 * 4 + 8, past, sizeof(past));
  EXPECT_EQ(c.check(), "kf_forward wrote 12 bytes outside its tensors, the first 8 bytes past the end of input x");
}

TEST(ArenaCanary, AWriteBeforeTheStartIsNamed) {
  Fixture f;
  ArenaCanary c = f.armed();
  f.bytes()[f.out - 4] = 0;
  EXPECT_EQ(c.check(), "kf_forward wrote 1 byte outside its tensors, the first 4 bytes before the start of output out");
}

TEST(ArenaCanary, FarOutsideTheBandsIsNotSeen) {
  Fixture f;
  ArenaCanary c = f.armed();
  // out's slot has 16 KiB of slack before it, all within the 64 KiB band.
  f.bytes()[f.out - 16000] = 0;
  EXPECT_NE(c.check(), "");
  ArenaCanary narrow;
  narrow.arm(f.arena.get(), {{"input x", {f.x, 4096 * 4}}, {"output out", {f.out, 4096 * 4}}}, 1024);
  f.bytes()[f.out - 16000] = 0;
  EXPECT_EQ(narrow.check(), "");
}

}  // namespace
}  // namespace kforge::judge
