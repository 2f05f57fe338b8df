// Fuzz target: a chat-completions server's reply body (outside input) through
// the bounded parser the HTTP policy uses. Whatever the bytes, the parser must
// return a reply or an error string: no crash, no exception, no unbounded work,
// and whatever it returns must serialize (it goes into trajectories).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kforge/rollout/policy/openai_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const kforge::rollout::ChatResponse r = kforge::rollout::parse_chat_response(body);
  kforge::json reply = {{"content", r.reply.content},
                        {"tool_calls", r.reply.tool_calls},
                        {"finish_reason", r.reply.finish_reason},
                        {"usage", r.usage}};
  if (r.reply.token_ids) reply["token_ids"] = *r.reply.token_ids;
  if (r.reply.logprobs) reply["logprobs"] = *r.reply.logprobs;
  reply["model"] = r.model;
  reply["error"] = r.error;
  (void)reply.dump();
  (void)kforge::json(kforge::rollout::error_body_message(body)).dump();
  return 0;
}
