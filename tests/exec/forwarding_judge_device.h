// A judge device that passes every call to a real one (the CPU judge device
// in the tests): a test overrides the one behaviour it examines, and the
// judge code, the runners and the arena stay real.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "judge/judge_device.h"

namespace kforge::testing {

class ForwardingJudgeDevice : public judge::JudgeDevice {
 public:
  explicit ForwardingJudgeDevice(std::unique_ptr<judge::JudgeDevice> inner) : inner_(std::move(inner)) {}

  bool runner_times_on_device() const override { return inner_->runner_times_on_device(); }
  bool work_is_host_cpu_time() const override { return inner_->work_is_host_cpu_time(); }
  std::string backend() const override { return inner_->backend(); }
  bool has_profile_stage() const override { return inner_->has_profile_stage(); }
  std::string name() const override { return inner_->name(); }
  at::Device device() const override { return inner_->device(); }
  uint64_t page_size() const override { return inner_->page_size(); }
  std::unique_ptr<judge::SharedArena> create_arena(const judge::ArenaLayout& layout) override {
    return inner_->create_arena(layout);
  }
  void copy_into(at::Tensor& arena_view, const at::Tensor& source) override { inner_->copy_into(arena_view, source); }
  void poison(at::Tensor& arena_view) override { inner_->poison(arena_view); }
  void flush_cache() override { inner_->flush_cache(); }
  uint64_t flush_bytes() const override { return inner_->flush_bytes(); }
  void synchronize() override { inner_->synchronize(); }
  double time_ms(const std::function<void()>& fn) override { return inner_->time_ms(fn); }
  judge::json clocks() override { return inner_->clocks(); }
  double peak_memory_bytes_per_s() const override { return inner_->peak_memory_bytes_per_s(); }
  uint64_t task_memory_bytes() const override { return inner_->task_memory_bytes(); }
  PeakRates peak_rates() const override { return inner_->peak_rates(); }
  uint64_t arena_alignment() const override { return inner_->arena_alignment(); }
  std::string context_error() override { return inner_->context_error(); }

 private:
  std::unique_ptr<judge::JudgeDevice> inner_;
};

}  // namespace kforge::testing
