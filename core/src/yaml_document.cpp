// YAML documents through yaml-cpp's event interface. YAML::Load would build a
// node graph in which aliases share their anchor's node; turning that into
// JSON copies each alias, so nested aliases ("billion laughs") expand
// exponentially. Here every alias is charged the size of what it copies
// before it is copied, and depth is checked as each collection opens.
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include "document_parsers.h"
#include "kforge/core/input_limits.h"

namespace kforge::internal {
namespace {

// Resolves a plain YAML scalar the way YAML 1.2's core schema does, so that
// `3`, `1e-2`, `true` and `null` become numbers, booleans and null while
// quoted scalars stay strings.
json resolve_plain_scalar(const std::string& text) {
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") return nullptr;
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  // Integers: optional sign, digits only.
  {
    size_t i = (text[0] == '-' || text[0] == '+') ? 1 : 0;
    if (i < text.size() && std::all_of(text.begin() + static_cast<long>(i), text.end(), ::isdigit)) {
      try {
        size_t used = 0;
        long long v = std::stoll(text, &used);
        if (used == text.size()) return v;
      } catch (const std::exception&) {
        // Out of range: fall through to floating point.
      }
    }
  }
  if (text == ".inf" || text == "+.inf" || text == ".Inf") return std::numeric_limits<double>::infinity();
  if (text == "-.inf" || text == "-.Inf") return -std::numeric_limits<double>::infinity();
  if (text == ".nan" || text == ".NaN") return std::numeric_limits<double>::quiet_NaN();
  {
    bool has_digit = std::any_of(text.begin(), text.end(), ::isdigit);
    bool numeric_chars = std::all_of(text.begin(), text.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+';
    });
    if (has_digit && numeric_chars) {
      try {
        size_t used = 0;
        double v = std::stod(text, &used);
        if (used == text.size()) return v;
      } catch (const std::exception&) {
        // Not a number after all: keep it a string.
      }
    }
  }
  return text;
}

// Values in a JSON value (itself included), and how deep it nests.
struct Extent {
  size_t values = 0;
  int depth = 0;
};

Extent measure(const json& value) {
  struct Item {
    const json* value;
    int depth;
  };
  Extent e;
  std::vector<Item> todo = {{&value, value.is_structured() ? 1 : 0}};
  while (!todo.empty()) {
    const Item item = todo.back();
    todo.pop_back();
    ++e.values;
    e.depth = std::max(e.depth, item.depth);
    if (item.value->is_structured()) {
      for (const auto& child : *item.value) todo.push_back({&child, item.depth + (child.is_structured() ? 1 : 0)});
    }
  }
  return e;
}

class BoundedYamlBuilder : public YAML::EventHandler {
 public:
  explicit BoundedYamlBuilder(Document* doc) : doc_(doc) {}

  void OnDocumentStart(const YAML::Mark& /*mark*/) override {}
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    if (expecting_key()) key_error(mark);
    charge(mark, {1, 0});
    place(mark, nullptr, anchor);
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    if (expecting_key()) key_error(mark);
    auto it = anchors_.find(anchor);
    if (it == anchors_.end()) fail(mark, "an alias to an anchor that is not defined");
    // Charged before the copy is made: the copy is the expensive part.
    charge(mark, it->second.extent);
    place(mark, it->second.value, 0);
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    if (expecting_key()) {
      Frame& top = stack_.back();
      if (top.value.contains(value)) {
        fail(mark, "duplicate key '" + value + "' in " + display(top.pointer));
      }
      top.key = value;
      top.has_key = true;
      count(mark, 1);
      return;
    }
    // yaml-cpp tags quoted scalars "!": they are always strings.
    charge(mark, {1, 0});
    place(mark, tag == "!" ? json(value) : resolve_plain_scalar(value), anchor);
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value /*style*/) override {
    open(mark, json::array(), anchor);
  }
  void OnSequenceEnd() override { close(); }

  void OnMapStart(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value /*style*/) override {
    open(mark, json::object(), anchor);
  }
  void OnMapEnd() override { close(); }

  json take_root() { return std::move(root_); }

 private:
  struct Frame {
    json value;
    std::string pointer;
    YAML::anchor_t anchor = 0;
    std::string key;  // maps: the key whose value comes next
    bool has_key = false;
  };
  struct Anchored {
    json value;
    Extent extent;
  };

  static std::string display(const std::string& pointer) { return pointer.empty() ? "/" : pointer; }

  [[noreturn]] void fail(const YAML::Mark& mark, const std::string& message) const {
    throw InputError(doc_->source + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1) + ": " +
                     message);
  }

  [[noreturn]] void key_error(const YAML::Mark& mark) const { fail(mark, "mapping keys must be plain strings"); }

  bool expecting_key() const { return !stack_.empty() && stack_.back().value.is_object() && !stack_.back().has_key; }

  void count(const YAML::Mark& mark, size_t values) {
    values_ += values;
    if (values_ > limits::kMaxDocumentValues) {
      fail(mark, "the document expands to more than " + std::to_string(limits::kMaxDocumentValues) +
                     " values (limits::kMaxDocumentValues; aliases count as the copies they make)");
    }
  }

  // The pointer of the value about to be placed in the innermost collection.
  std::string child_pointer() const {
    if (stack_.empty()) return "";
    const Frame& top = stack_.back();
    if (top.value.is_array()) return json_pointer_append(top.pointer, top.value.size());
    return json_pointer_append(top.pointer, top.key);
  }

  // Counts the values a new value brings and checks the depth it reaches.
  void charge(const YAML::Mark& mark, const Extent& extent) {
    count(mark, extent.values);
    if (static_cast<int>(stack_.size()) + extent.depth > limits::kMaxDocumentDepth) {
      fail(mark, "field " + display(child_pointer()) + ": nested deeper than " +
                     std::to_string(limits::kMaxDocumentDepth) + " levels (limits::kMaxDocumentDepth)");
    }
  }

  // Puts a scalar or an alias's copy into its parent, or makes it the root.
  void place(const YAML::Mark& mark, json value, YAML::anchor_t anchor) {
    if (mark.line >= 0) doc_->locations[child_pointer()] = {mark.line + 1, mark.column + 1};
    if (anchor != 0) anchors_[anchor] = {value, measure(value)};
    attach(std::move(value));
  }

  void attach(json value) {
    if (stack_.empty()) {
      root_ = std::move(value);
      return;
    }
    Frame& top = stack_.back();
    if (top.value.is_array()) {
      top.value.push_back(std::move(value));
    } else {
      top.value[top.key] = std::move(value);
      top.has_key = false;
    }
  }

  void open(const YAML::Mark& mark, json container, YAML::anchor_t anchor) {
    if (expecting_key()) key_error(mark);
    charge(mark, {1, 1});
    Frame f;
    f.pointer = child_pointer();
    if (mark.line >= 0) doc_->locations[f.pointer] = {mark.line + 1, mark.column + 1};
    f.value = std::move(container);
    f.anchor = anchor;
    stack_.push_back(std::move(f));
  }

  void close() {
    Frame f = std::move(stack_.back());
    stack_.pop_back();
    if (f.anchor != 0) anchors_[f.anchor] = {f.value, measure(f.value)};
    attach(std::move(f.value));
  }

  Document* doc_;
  json root_;
  std::vector<Frame> stack_;
  std::map<YAML::anchor_t, Anchored> anchors_;
  size_t values_ = 0;
};

}  // namespace

void parse_yaml_document(const std::string& text, Document* doc) {
  std::istringstream in(text);
  BoundedYamlBuilder builder(doc);
  try {
    YAML::Parser parser(in);
    // The first document of the stream, as YAML::Load reads it; an empty
    // stream is null.
    parser.HandleNextDocument(builder);
  } catch (const YAML::Exception& e) {
    throw InputError(doc->source + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                     ": invalid YAML: " + e.msg);
  }
  doc->root = builder.take_root();
}

}  // namespace kforge::internal
