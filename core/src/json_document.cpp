// JSON documents through nlohmann's SAX interface: its parser is iterative,
// and building the value here (rather than with json::parse) is what lets the
// depth, value-count and duplicate-key rules stop a document while it is read.
#include <algorithm>
#include <utility>
#include <vector>

#include "document_parsers.h"
#include "kforge/core/input_limits.h"

namespace kforge::internal {
namespace {

std::string display_pointer(const std::string& pointer) { return pointer.empty() ? "/" : pointer; }

class BoundedJsonBuilder {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  explicit BoundedJsonBuilder(json* root) : root_(root) {}

  bool null() { return add(nullptr) != nullptr; }
  bool boolean(bool v) { return add(v) != nullptr; }
  bool number_integer(number_integer_t v) { return add(v) != nullptr; }
  bool number_unsigned(number_unsigned_t v) { return add(v) != nullptr; }
  bool number_float(number_float_t v, const string_t& /*text*/) { return add(v) != nullptr; }
  bool string(string_t& v) { return add(std::move(v)) != nullptr; }
  // JSON text never produces binary values; accepted for the interface.
  bool binary(binary_t& v) { return add(json::binary(std::move(v))) != nullptr; }

  bool start_object(std::size_t /*unknown size*/) { return open(json::object()); }
  bool end_object() {
    stack_.pop_back();
    return true;
  }
  bool start_array(std::size_t /*unknown size*/) { return open(json::array()); }
  bool end_array() {
    stack_.pop_back();
    return true;
  }

  bool key(string_t& k) {
    Frame& top = stack_.back();
    if (top.value->contains(k)) {
      return fail("field " + display_pointer(pointer()) + ": duplicate key \"" + k +
                  "\" (a key may appear once per object; JSON readers disagree on which copy wins)");
    }
    top.key = k;
    top.slot = &(*top.value)[k];
    return true;
  }

  bool parse_error(std::size_t position, const std::string& /*last_token*/, const json::exception& e) {
    syntax_error_ = true;
    error_position_ = position;
    error_ = e.what();
    return false;
  }

  const std::string& error() const { return error_; }
  bool syntax_error() const { return syntax_error_; }
  size_t error_position() const { return error_position_; }

 private:
  struct Frame {
    json* value;
    std::string key;       // objects: the key being read
    json* slot = nullptr;  // objects: where that key's value goes
  };

  bool fail(std::string message) {
    error_ = std::move(message);
    return false;
  }

  // The JSON pointer of the innermost open container.
  std::string pointer() const {
    std::string p;
    for (size_t i = 0; i + 1 < stack_.size(); ++i) {
      if (stack_[i].value->is_object()) {
        p = json_pointer_append(p, stack_[i].key);
      } else {
        p = json_pointer_append(p, stack_[i].value->size() - 1);
      }
    }
    return p;
  }

  json* add(json value) {
    if (++values_ > limits::kMaxDocumentValues) {
      fail("more than " + std::to_string(limits::kMaxDocumentValues) +
           " values (limits::kMaxDocumentValues); split the document");
      return nullptr;
    }
    if (stack_.empty()) {
      *root_ = std::move(value);
      return root_;
    }
    Frame& top = stack_.back();
    if (top.value->is_array()) {
      top.value->push_back(std::move(value));
      return &top.value->back();
    }
    *top.slot = std::move(value);
    return top.slot;
  }

  bool open(json container) {
    if (static_cast<int>(stack_.size()) >= limits::kMaxDocumentDepth) {
      return fail("field " + display_pointer(pointer()) + ": nested deeper than " +
                  std::to_string(limits::kMaxDocumentDepth) + " levels (limits::kMaxDocumentDepth)");
    }
    json* placed = add(std::move(container));
    if (placed == nullptr) return false;
    stack_.push_back({placed, "", nullptr});
    return true;
  }

  json* root_;
  std::vector<Frame> stack_;
  size_t values_ = 0;
  std::string error_;
  bool syntax_error_ = false;
  size_t error_position_ = 0;
};

// "line:column" (1-based) of a byte offset.
std::string line_column(const std::string& text, size_t offset) {
  offset = std::min(offset, text.size());
  int line = 1;
  int col = 1;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

}  // namespace

void parse_json_document(const std::string& text, Document* doc) {
  json root;
  BoundedJsonBuilder builder(&root);
  const bool ok = json::sax_parse(text, &builder, json::input_format_t::json, /*strict=*/true);
  if (ok) {
    doc->root = std::move(root);
    return;
  }
  if (builder.syntax_error()) {
    // nlohmann reports the byte after the offending one.
    const size_t at = builder.error_position() == 0 ? 0 : builder.error_position() - 1;
    std::string what = builder.error();
    const auto pos = what.find("syntax error");
    throw InputError(doc->source + ":" + line_column(text, at) +
                     ": invalid JSON: " + (pos == std::string::npos ? what : what.substr(pos)));
  }
  throw InputError(doc->source + ": " + builder.error());
}

void check_value_bounds(const json& value, const std::string& source) {
  // Iterative: the value may be as deep as whatever produced it allowed.
  struct Item {
    const json* value;
    int depth;
  };
  std::vector<Item> todo = {{&value, 1}};
  size_t values = 0;
  while (!todo.empty()) {
    const Item item = todo.back();
    todo.pop_back();
    if (++values > limits::kMaxDocumentValues) {
      throw InputError(source + ": more than " + std::to_string(limits::kMaxDocumentValues) +
                       " values (limits::kMaxDocumentValues)");
    }
    if (!item.value->is_structured()) continue;
    if (item.depth > limits::kMaxDocumentDepth) {
      throw InputError(source + ": nested deeper than " + std::to_string(limits::kMaxDocumentDepth) +
                       " levels (limits::kMaxDocumentDepth)");
    }
    for (const auto& child : *item.value) todo.push_back({&child, item.depth + 1});
  }
}

}  // namespace kforge::internal
