#include "kforge/core/jsonl.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace kforge {
namespace {

std::string errno_message() { return std::strerror(errno); }

}  // namespace

JsonlWriter::JsonlWriter(const std::filesystem::path& path, Mode mode, bool sync) : path_(path), sync_(sync) {
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (mode == Mode::kAppend ? O_APPEND : O_TRUNC);
  fd_ = ::open(path.c_str(), flags, 0644);
  if (fd_ < 0) throw InputError(path.string() + ": cannot open for writing: " + errno_message());
}

JsonlWriter::~JsonlWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void JsonlWriter::write(const json& value) {
  // Invalid UTF-8 is replaced rather than thrown: a record is never lost for
  // one bad byte in a policy's text.
  std::string line = value.dump(-1, ' ', false, json::error_handler_t::replace);
  line.push_back('\n');
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw SystemError(path_.string() + ": write failed: " + errno_message());
    done += static_cast<size_t>(n);
  }
  if (sync_ && ::fsync(fd_) != 0) throw SystemError(path_.string() + ": fsync failed: " + errno_message());
  ++written_;
}

void for_each_jsonl_line(const std::filesystem::path& path, const std::function<void(const Document&, size_t)>& fn,
                         const JsonlReadOptions& options) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw InputError(path.string() + ": not a regular file (expected a .jsonl file)");
  }
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > options.max_file_bytes) {
    throw InputError(path.string() + ": " + std::to_string(size) + " bytes is more than the limit of " +
                     std::to_string(options.max_file_bytes) + " bytes for a JSONL file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string() + ": cannot open: " + errno_message());
  size_t line_no = 0;
  char buf[1 << 16];
  std::string pending;
  bool eof = false;
  // Reads line by line in chunks so that a line's length is checked while it
  // is read, not after it was buffered whole.
  while (!eof) {
    in.read(buf, sizeof(buf));
    const std::streamsize got = in.gcount();
    if (got <= 0) eof = true;
    size_t start = 0;
    for (std::streamsize i = 0; i < got; ++i) {
      if (buf[i] != '\n') continue;
      pending.append(buf + start, static_cast<size_t>(i) - start);
      start = static_cast<size_t>(i) + 1;
      ++line_no;
      if (pending.size() > options.max_line_bytes) {
        throw InputError(path.string() + ":" + std::to_string(line_no) + ": line longer than " +
                         std::to_string(options.max_line_bytes) + " bytes");
      }
      if (pending.find_first_not_of(" \t\r") != std::string::npos) {
        fn(Document::from_json_text(pending, path.string() + ":" + std::to_string(line_no)), line_no);
      }
      pending.clear();
    }
    pending.append(buf + start, static_cast<size_t>(got) - start);
    if (pending.size() > options.max_line_bytes) {
      throw InputError(path.string() + ":" + std::to_string(line_no + 1) + ": line longer than " +
                       std::to_string(options.max_line_bytes) + " bytes");
    }
  }
  if (pending.find_first_not_of(" \t\r") == std::string::npos) return;
  ++line_no;
  if (options.allow_torn_tail) return;  // a record cut short by a killed writer
  fn(Document::from_json_text(pending, path.string() + ":" + std::to_string(line_no)), line_no);
}

}  // namespace kforge
