// JSON Lines: one JSON value per line. The format of task sets, synthesized
// datasets, trajectory exports and batch-evaluation results.
//
// JsonlWriter appends whole lines only: each record is serialized first and
// written with one write(2) of the line plus its newline, so a process killed
// mid-record leaves at most a torn last line, which for_each_jsonl_line()
// skips when `allow_torn_tail` is set (a resumable writer's reader). With
// `sync`, each record is fsync'd before write() returns, so a record that was
// reported written survives a machine crash.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>

#include "kforge/core/document.h"

namespace kforge {

class JsonlWriter {
 public:
  enum class Mode { kTruncate, kAppend };
  // InputError naming the path when the file cannot be opened.
  JsonlWriter(const std::filesystem::path& path, Mode mode, bool sync = false);
  ~JsonlWriter();
  JsonlWriter(const JsonlWriter&) = delete;
  JsonlWriter& operator=(const JsonlWriter&) = delete;

  // One record: `value.dump()` plus '\n'. SystemError if the write fails.
  void write(const json& value);
  const std::filesystem::path& path() const { return path_; }
  size_t records_written() const { return written_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  bool sync_ = false;
  size_t written_ = 0;
};

struct JsonlReadOptions {
  // A last line without its newline is a record cut short by a killed writer:
  // skipped instead of reported (resumable outputs), when set.
  bool allow_torn_tail = false;
  // Lines longer than this are an InputError naming the line: no record of
  // ours comes close, and a reader must not buffer an unbounded line.
  size_t max_line_bytes = 64u << 20;
  // The file as a whole; checked before reading.
  size_t max_file_bytes = size_t{4} << 30;
};

// Calls `fn(document, line_number)` for every non-blank line, parsed as JSON
// (Document::from_json_text, so depth and duplicate-key rules apply) with
// source "<path>:<line>". Reads the file incrementally. InputError naming the
// file and line for a line that does not parse or is too long.
void for_each_jsonl_line(const std::filesystem::path& path, const std::function<void(const Document&, size_t)>& fn,
                         const JsonlReadOptions& options = {});

}  // namespace kforge
