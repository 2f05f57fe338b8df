#include "kforge/core/document.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "document_parsers.h"
#include "kforge/core/input_limits.h"

namespace kforge {
namespace {

std::string lower_extension(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext;
}

std::string type_name(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string display_pointer(const std::string& pointer) { return pointer.empty() ? "/" : pointer; }

}  // namespace

std::string read_text_file(const std::filesystem::path& path, size_t max_bytes) {
  // open(2) and read(2) rather than a stream: the size is checked before
  // anything is read, and a device or pipe (/dev/zero) is read only up to the
  // limit.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) throw InputError(path.string() + ": no such file");
    throw InputError(path.string() + ": cannot be read (" + std::strerror(err) + ")");
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw InputError(path.string() + ": is a directory, not a file");
    if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > max_bytes) {
      throw InputError(path.string() + ": " + std::to_string(st.st_size) + " bytes is more than the limit of " +
                       std::to_string(max_bytes) + " bytes");
    }
  }
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw InputError(path.string() + ": read failed (" + std::strerror(errno) + ")");
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > max_bytes) {
      throw InputError(path.string() + ": more than the limit of " + std::to_string(max_bytes) +
                       " bytes (not a regular file of that size: a device or a pipe?)");
    }
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
}

Document Document::from_file(const std::filesystem::path& path) {
  // The type first: a path without a document extension is refused before
  // anything is opened.
  const std::string ext = lower_extension(path);
  if (ext != ".json" && ext != ".yaml" && ext != ".yml") {
    throw InputError(path.string() + ": unknown file type '" + ext + "'; expected .json, .yaml or .yml");
  }
  const std::string text = read_text_file(path, limits::kMaxDocumentBytes);
  if (ext == ".json") return from_json_text(text, path.string());
  return from_yaml_text(text, path.string());
}

Document Document::from_json_text(const std::string& text, std::string source) {
  Document doc;
  doc.source = std::move(source);
  internal::parse_json_document(text, &doc);
  return doc;
}

Document Document::from_yaml_text(const std::string& text, std::string source) {
  Document doc;
  doc.source = std::move(source);
  internal::parse_yaml_document(text, &doc);
  return doc;
}

Document Document::from_value(json value, std::string source) {
  internal::check_value_bounds(value, source);
  Document doc;
  doc.source = std::move(source);
  doc.root = std::move(value);
  return doc;
}

std::string Document::where(const std::string& pointer) const {
  auto it = locations.find(pointer);
  if (it == locations.end()) return source;
  return source + ":" + std::to_string(it->second.first) + ":" + std::to_string(it->second.second);
}

ObjectReader Document::root_object() const { return Field(*this, root, "").as_object(); }

std::string json_pointer_append(const std::string& pointer, const std::string& key) {
  std::string escaped;
  for (char c : key) {
    if (c == '~') {
      escaped += "~0";
    } else if (c == '/') {
      escaped += "~1";
    } else {
      escaped += c;
    }
  }
  return pointer + "/" + escaped;
}

std::string json_pointer_append(const std::string& pointer, size_t index) {
  return pointer + "/" + std::to_string(index);
}

std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  // Edit distance costs the product of the lengths: a word longer than any
  // name we suggest is not a typo of one.
  if (word.size() > limits::kMaxSuggestionChars) return "";
  const size_t threshold = std::max<size_t>(2, word.size() / 3);
  std::string best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const auto& c : candidates) {
    // The distance is at least the difference in length.
    const size_t gap = c.size() > word.size() ? c.size() - word.size() : word.size() - c.size();
    if (gap > threshold || c.size() > limits::kMaxSuggestionChars) continue;
    size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  // Only suggest when the typo is small relative to the word.
  if (best.empty() || best_d > threshold) return "";
  return best;
}

std::string describe_value(const json& value) {
  // A long string is cut before it is quoted, so describing a megabyte costs
  // nothing; invalid UTF-8 (YAML does not check it) is replaced, not thrown.
  std::string s;
  if (value.is_string() && value.get_ref<const std::string&>().size() > 60) {
    s = json(value.get_ref<const std::string&>().substr(0, 56)).dump(-1, ' ', false, json::error_handler_t::replace);
  } else {
    s = value.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return type_name(value) + " " + s;
}

size_t utf8_prefix_bytes(std::string_view text, size_t max_bytes) {
  size_t cut = std::min(text.size(), max_bytes);
  while (cut < text.size() && cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return cut;
}

// ---- Field ----

void Field::fail(const std::string& expected) const {
  throw InputError(doc_->where(pointer_) + ": field " + display_pointer(pointer_) + ": expected " + expected +
                   ", got " + describe_value(*value_));
}

void Field::fail_message(const std::string& message) const {
  throw InputError(doc_->where(pointer_) + ": field " + display_pointer(pointer_) + ": " + message);
}

std::string Field::as_string() const {
  if (!value_->is_string()) fail("a string");
  return value_->get<std::string>();
}

bool Field::as_bool() const {
  if (!value_->is_boolean()) fail("true or false");
  return value_->get<bool>();
}

double Field::as_number() const {
  if (!value_->is_number()) fail("a number");
  double v = value_->get<double>();
  if (!std::isfinite(v)) fail("a finite number");
  return v;
}

double Field::as_positive_number() const {
  if (!value_->is_number() || !(value_->get<double>() > 0) || !std::isfinite(value_->get<double>())) {
    fail("a positive number");
  }
  return value_->get<double>();
}

double Field::as_nonnegative_number() const {
  if (!value_->is_number() || !(value_->get<double>() >= 0) || !std::isfinite(value_->get<double>())) {
    fail("a number >= 0");
  }
  return value_->get<double>();
}

double Field::as_number_in(double lo, double hi) const {
  auto text = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", v);
    return std::string(buf);
  };
  if (!value_->is_number()) fail("a number in [" + text(lo) + ", " + text(hi) + "]");
  const double v = value_->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi) fail("a number in [" + text(lo) + ", " + text(hi) + "]");
  return v;
}

int64_t Field::as_int() const {
  if (value_->is_number_integer() || value_->is_number_unsigned()) {
    if (value_->is_number_unsigned() && value_->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      fail("an integer that fits in 64 bits");
    }
    return value_->get<int64_t>();
  }
  // YAML/JSON writers sometimes emit 3.0 for 3: accept integral floats.
  if (value_->is_number_float()) {
    double d = value_->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return static_cast<int64_t>(d);
  }
  fail("an integer");
}

int64_t Field::as_int_in(int64_t lo, int64_t hi) const {
  int64_t v = as_int();
  if (v < lo || v > hi) fail("an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

std::vector<int64_t> Field::as_shape() const {
  if (!value_->is_array()) fail("an array of positive integers (a shape such as [4096, 1024])");
  std::vector<int64_t> out;
  size_t i = 0;
  for (const auto& item : *value_) {
    Field f(*doc_, item, json_pointer_append(pointer_, i++));
    int64_t v = 0;
    if (item.is_number_integer() || item.is_number_unsigned()) {
      v = item.get<int64_t>();
    } else {
      f.fail("a positive integer (shape dimension)");
    }
    if (v <= 0) f.fail("a positive integer (shape dimension)");
    out.push_back(v);
  }
  return out;
}

std::vector<std::string> Field::as_string_list() const {
  if (!value_->is_array()) fail("an array of strings");
  std::vector<std::string> out;
  for (const auto& f : as_array()) out.push_back(f.as_string());
  return out;
}

std::string Field::as_enum(const std::vector<std::string>& allowed) const {
  std::string list;
  for (size_t i = 0; i < allowed.size(); ++i) list += (i ? ", " : "") + ("\"" + allowed[i] + "\"");
  if (!value_->is_string()) fail("one of " + list);
  const std::string v = value_->get<std::string>();
  if (std::find(allowed.begin(), allowed.end(), v) != allowed.end()) return v;
  std::string hint = closest_match(v, allowed);
  fail_message("\"" + v + "\" is not one of " + list + (hint.empty() ? "" : "; did you mean \"" + hint + "\"?"));
}

ObjectReader Field::as_object() const {
  if (!value_->is_object()) fail("an object");
  return ObjectReader(*doc_, *value_, pointer_);
}

std::vector<Field> Field::as_array() const {
  if (!value_->is_array()) fail("an array");
  std::vector<Field> out;
  size_t i = 0;
  for (const auto& item : *value_) out.emplace_back(*doc_, item, json_pointer_append(pointer_, i++));
  return out;
}

// ---- ObjectReader ----

ObjectReader::ObjectReader(const Document& doc, const json& value, std::string pointer)
    : doc_(&doc), value_(&value), pointer_(std::move(pointer)) {}

Field ObjectReader::required(const std::string& key) {
  known_.push_back(key);
  auto it = value_->find(key);
  if (it == value_->end()) {
    throw InputError(doc_->where(pointer_) + ": field " + display_pointer(pointer_) + ": missing required key \"" +
                     key + "\"");
  }
  return Field(*doc_, *it, json_pointer_append(pointer_, key));
}

std::optional<Field> ObjectReader::optional(const std::string& key) {
  known_.push_back(key);
  auto it = value_->find(key);
  if (it == value_->end() || it->is_null()) return std::nullopt;
  return Field(*doc_, *it, json_pointer_append(pointer_, key));
}

bool ObjectReader::has(const std::string& key) const { return value_->contains(key); }

void ObjectReader::allow(const std::string& key) { known_.push_back(key); }

void ObjectReader::finish() const {
  for (auto it = value_->begin(); it != value_->end(); ++it) {
    if (std::find(known_.begin(), known_.end(), it.key()) != known_.end()) continue;
    std::string list;
    std::vector<std::string> sorted = known_;
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    for (size_t i = 0; i < sorted.size(); ++i) list += (i ? ", " : "") + sorted[i];
    std::string hint = closest_match(it.key(), sorted);
    const std::string child = json_pointer_append(pointer_, it.key());
    throw InputError(doc_->where(child) + ": field " + display_pointer(pointer_) + ": unknown key \"" + it.key() +
                     "\"" + (hint.empty() ? "" : " (did you mean \"" + hint + "\"?)") + "; allowed keys: " + list);
  }
}

}  // namespace kforge
