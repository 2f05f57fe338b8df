// The bounded JSON and YAML readers behind Document (internal to kforge_core).
//
// Both build the document's JSON value themselves, event by event, with an
// explicit stack instead of recursion, and refuse a document as soon as it
// nests deeper than limits::kMaxDocumentDepth, holds more than
// limits::kMaxDocumentValues values (YAML aliases counted as the copies they
// expand to) or repeats a key in an object. Errors are InputErrors that name
// the source, the JSON pointer and, where the parser knows it, line:column.
// The text's size is bounded where it comes from: files by read_text_file
// (limits::kMaxDocumentBytes), JSONL lines by their reader, messages by the
// server's maximum message size.
#pragma once

#include <string>

#include "kforge/core/document.h"

namespace kforge::internal {

void parse_json_document(const std::string& text, Document* doc);
void parse_yaml_document(const std::string& text, Document* doc);

// The same depth and value bounds for a value built elsewhere (decoded
// MessagePack, a value assembled in code); iterative.
void check_value_bounds(const json& value, const std::string& source);

}  // namespace kforge::internal
