#include "kforge/rollout/jsonl_sink.h"

namespace kforge::rollout {

JsonlTrajectorySink::JsonlTrajectorySink(const std::filesystem::path& path, bool append, bool sync)
    : writer_(path, append ? JsonlWriter::Mode::kAppend : JsonlWriter::Mode::kTruncate, sync) {}

void JsonlTrajectorySink::write(const Trajectory& trajectory) {
  const json j = to_json(trajectory);
  std::lock_guard<std::mutex> lock(mu_);
  writer_.write(j);
}

bool JsonlTrajectorySink::flush(std::chrono::milliseconds /*timeout*/) { return true; }

size_t JsonlTrajectorySink::written() const {
  std::lock_guard<std::mutex> lock(mu_);
  return writer_.records_written();
}

std::vector<Trajectory> read_trajectories(const std::filesystem::path& path) {
  std::vector<Trajectory> out;
  JsonlReadOptions options;
  options.allow_torn_tail = true;
  for_each_jsonl_line(
      path, [&](const Document& doc, size_t /*line*/) { out.push_back(parse_trajectory(doc)); }, options);
  return out;
}

}  // namespace kforge::rollout
