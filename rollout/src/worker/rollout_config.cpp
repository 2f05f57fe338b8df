#include "kforge/rollout/worker/rollout_config.h"

#include <cmath>
#include <cstdint>
#include <string_view>

namespace kforge::rollout {
namespace {

const std::vector<std::string>& normalization_names() {
  static const std::vector<std::string> kNames = {"auto", "none", "mean", "mean_std"};
  return kNames;
}

std::filesystem::path relative_to(const Document& doc, const std::string& path) {
  if (path.empty()) return {};
  std::filesystem::path p(path);
  if (p.is_absolute() || doc.source.empty() || doc.source[0] == '<') return p;
  return std::filesystem::path(doc.source).parent_path() / p;
}

// A config path names a preset when it has no '/' and no config extension
// (as reward and env configs do).
std::string env_reference(const Document& doc, const std::string& value) {
  auto ends_with = [&](const std::string& tail) {
    return value.size() >= tail.size() && value.compare(value.size() - tail.size(), tail.size(), tail) == 0;
  };
  const bool path =
      value.find('/') != std::string::npos || ends_with(".yaml") || ends_with(".yml") || ends_with(".json");
  return path ? relative_to(doc, value).string() : value;
}

double positive_seconds(const Field& f, double max) {
  const double v = f.as_nonnegative_number();
  if (v > max) f.fail("at most " + std::to_string(static_cast<int64_t>(max)) + " seconds");
  return v;
}

// kind: openai hands the whole section to the HTTP policy's own reader
// (docs/policies.md), which knows its fields; `sampling` stays shared.
void read_openai_policy(const Field& field, const Field& kind, ObjectReader* r, PolicyConfig* out) {
  if (auto f = r->optional("sampling")) out->sampling = sampling_params_from_field(*f);
#ifdef KFORGE_HAVE_CURL
  (void)kind;
  out->kind = PolicyKind::kOpenAi;
  out->openai = parse_openai_policy_config(field, {"sampling"});
#else
  (void)field;
  kind.fail_message(
      "\"openai\" needs the HTTP policy, which this kforge was built without (libcurl's headers were not found: "
      "install libcurl4-openssl-dev and reconfigure); use kind template or zmq");
#endif
}

// `template` was called `baseline` until the eager reference timing, which
// "baseline" also named, made the word ambiguous; configs written then keep
// loading, with a warning that says what to write instead.
constexpr const char* kDeprecatedTemplateKind = "baseline";

// "file:line:col: field /policy/kind", as the Field errors say it.
std::string place(const Field& f) { return f.document().where(f.pointer()) + ": field " + f.pointer(); }

void read_template_section(const Field& f, TemplateConfig* out) {
  ObjectReader b = f.as_object();
  if (auto m = b.optional("mode")) out->mode = m->as_enum({"auto", "cpp", "cuda"});
  if (auto m = b.optional("explore_turns")) out->explore_turns = static_cast<int>(m->as_int_in(0, 64));
  if (auto m = b.optional("seed")) out->seed = static_cast<uint64_t>(m->as_int_in(0, INT64_MAX));
  b.finish();
}

void read_policy(const Field& field, PolicyConfig* out, std::vector<std::string>* warnings) {
  ObjectReader r = field.as_object();
  const Field kind = r.required("kind");
  // The alias stays out of as_enum's list so that errors offer only the
  // names to write.
  const bool deprecated_kind = kind.value() == kDeprecatedTemplateKind;
  const std::string kind_name = deprecated_kind ? "template" : kind.as_enum({"template", "zmq", "openai"});
  if (kind_name == "openai") {
    read_openai_policy(field, kind, &r, out);
    return;
  }
  if (deprecated_kind) {
    warnings->push_back(place(kind) +
                        ": policy kind \"baseline\" is deprecated; write \"kind: template\" (the same "
                        "built-in template policy)");
  }
  out->kind = kind_name == "zmq" ? PolicyKind::kZmq : PolicyKind::kTemplate;
  if (auto f = r.optional("endpoint")) {
    out->zmq.endpoint = f->as_string();
    if (out->zmq.endpoint.find("://") == std::string::npos) f->fail("a ZeroMQ endpoint such as tcp://127.0.0.1:5556");
  }
  if (auto f = r.optional("timeout_s")) {
    out->zmq.timeout_s = positive_seconds(*f, 86400);
    if (!(out->zmq.timeout_s > 0)) f->fail("a positive number of seconds");
  }
  if (auto f = r.optional("retries")) out->zmq.retries = static_cast<int>(f->as_int_in(0, 100));
  if (auto f = r.optional("max_batch")) out->zmq.max_batch = static_cast<int>(f->as_int_in(1, 65536));
  if (auto f = r.optional("max_message_bytes")) {
    out->zmq.max_message_bytes = static_cast<size_t>(f->as_int_in(1 << 16, int64_t{1} << 32));
  }
  const std::optional<Field> section = r.optional("template");
  const std::optional<Field> old_section = r.optional(kDeprecatedTemplateKind);
  if (section && old_section) {
    old_section->fail_message("\"baseline\" is the deprecated name of \"template\"; give only \"template\"");
  }
  if (section) read_template_section(*section, &out->template_policy);
  if (old_section) {
    warnings->push_back(place(*old_section) +
                        ": policy section \"baseline\" is deprecated; write \"template:\" (the same fields)");
    read_template_section(*old_section, &out->template_policy);
  }
  if (auto f = r.optional("sampling")) out->sampling = sampling_params_from_field(*f);
  r.finish();
  if (out->kind == PolicyKind::kZmq && !r.has("endpoint")) {
    field.fail_message("kind zmq needs \"endpoint\" (the trainer's PolicyServer, e.g. tcp://127.0.0.1:5556)");
  }
}

// The same rule as the stream's (trainer_bridge/STREAM.md), checked here so
// that the error names the config's field.
void check_worker_id(const Field& f, const std::string& id) {
  bool ok = !id.empty() && id.size() <= 128;
  for (char c : id) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && std::string_view("._:@+-").find(c) == std::string_view::npos) ok = false;
  }
  if (!ok) f.fail("a worker id of 1 to 128 characters from [A-Za-z0-9._:@+-]");
}

void read_stream(const Field& field, StreamConfig* out) {
  ObjectReader r = field.as_object();
  Field endpoint = r.required("endpoint");
  out->endpoint = endpoint.as_string();
  if (out->endpoint.find("://") == std::string::npos) {
    endpoint.fail("a ZeroMQ endpoint such as tcp://127.0.0.1:5557 (the trajectory receiver)");
  }
  if (auto f = r.optional("worker_id")) {
    out->worker_id = f->as_string();
    check_worker_id(*f, out->worker_id);
  }
  // Like outputs, the spool is per run: relative to the working directory.
  if (auto f = r.optional("spool_dir")) out->spool_dir = f->as_string();
  if (auto f = r.optional("curve")) {
    ObjectReader c = f->as_object();
    if (auto k = c.optional("server_key")) out->curve_server_key = k->as_string();
    if (auto k = c.optional("secret_key")) out->curve_secret_key = k->as_string();
    c.finish();
  }
  if (auto f = r.optional("flush_timeout_s")) out->flush_timeout_s = positive_seconds(*f, 86400);
  r.finish();
}

}  // namespace

const std::string& group_normalization_name(GroupNormalization g) {
  return normalization_names()[static_cast<size_t>(g)];
}

RolloutConfig parse_rollout_config(const Document& doc) {
  ObjectReader r = doc.root_object();
  RolloutConfig c;
  c.source = doc.source;
  if (auto f = r.optional("env")) c.env = env_reference(doc, f->as_string());
  Field tasks = r.required("tasks");
  c.tasks = relative_to(doc, tasks.as_string());
  if (auto f = r.optional("task_ids")) c.task_ids = f->as_string_list();
  if (auto f = r.optional("order")) c.shuffle = f->as_enum({"shuffle", "sequential"}) == "shuffle";
  if (auto f = r.optional("groups")) c.groups = static_cast<int>(f->as_int_in(0, 1000000));
  if (auto f = r.optional("group_size")) c.group_size = static_cast<int>(f->as_int_in(1, 1024));
  if (auto f = r.optional("concurrency")) c.concurrency = static_cast<int>(f->as_int_in(1, 4096));
  if (auto f = r.optional("episode")) {
    ObjectReader e = f->as_object();
    if (auto m = e.optional("max_turns")) c.max_turns = static_cast<int>(m->as_int_in(1, 1000));
    if (auto m = e.optional("time_budget_s")) c.time_budget_s = positive_seconds(*m, 86400);
    if (auto m = e.optional("wall_time_s")) c.wall_time_s = positive_seconds(*m, 7 * 86400);
    e.finish();
  }
  if (auto f = r.optional("policy")) read_policy(*f, &c.policy, &c.warnings);
  if (auto f = r.optional("exemplars")) c.exemplars = static_cast<int>(f->as_int_in(0, 16));
  if (auto f = r.optional("max_policy_lag")) c.max_policy_lag = static_cast<int>(f->as_int_in(-1, 1000000));
  if (auto f = r.optional("group_normalization")) {
    const std::string n = f->as_enum(normalization_names());
    for (size_t i = 0; i < normalization_names().size(); ++i) {
      if (normalization_names()[i] == n) c.group_normalization = static_cast<GroupNormalization>(i);
    }
  }
  if (auto f = r.optional("output")) {
    ObjectReader o = f->as_object();
    // Outputs are per run: relative to the working directory, not the config.
    if (auto m = o.optional("jsonl")) c.output = m->as_string();
    o.finish();
  }
  if (auto f = r.optional("stream"); f && !f->value().is_null()) read_stream(*f, &c.stream);
  if (auto f = r.optional("seed")) c.seed = static_cast<uint64_t>(f->as_int_in(0, INT64_MAX));
  r.finish();
  if (c.concurrency < c.group_size) {
    // A group's episodes are judged against each other; running them side
    // by side keeps their policy versions close.
    doc.root_object().self().fail_message("concurrency (" + std::to_string(c.concurrency) +
                                          ") must be at least group_size (" + std::to_string(c.group_size) + ")");
  }
  return c;
}

RolloutConfig load_rollout_config(const std::filesystem::path& path) {
  return parse_rollout_config(Document::from_file(path));
}

json to_json(const RolloutConfig& c) {
  json policy = {{"kind", c.policy.kind == PolicyKind::kZmq ? "zmq" : "template"},
                 {"sampling", to_json(c.policy.sampling)}};
  if (c.policy.kind == PolicyKind::kOpenAi) {
#ifdef KFORGE_HAVE_CURL
    policy = to_json(c.policy.openai);
    policy["sampling"] = to_json(c.policy.sampling);
#endif
  } else if (c.policy.kind == PolicyKind::kZmq) {
    policy["endpoint"] = c.policy.zmq.endpoint;
    policy["timeout_s"] = c.policy.zmq.timeout_s;
    policy["retries"] = c.policy.zmq.retries;
    policy["max_batch"] = c.policy.zmq.max_batch;
  } else {
    policy["template"] = {{"mode", c.policy.template_policy.mode},
                          {"explore_turns", c.policy.template_policy.explore_turns},
                          {"seed", c.policy.template_policy.seed}};
  }
  json stream = nullptr;
  if (!c.stream.endpoint.empty()) {
    // Which keys, not the keys: a config dump must not leak a secret.
    stream = {{"endpoint", c.stream.endpoint},
              {"worker_id", c.stream.worker_id},
              {"spool_dir", c.stream.spool_path().string()},
              {"curve", !c.stream.curve_server_key.empty()},
              {"flush_timeout_s", c.stream.flush_timeout_s}};
  }
  json episode = {{"wall_time_s", c.wall_time_s}};
  if (c.max_turns) episode["max_turns"] = *c.max_turns;
  if (c.time_budget_s) episode["time_budget_s"] = *c.time_budget_s;
  return {{"env", c.env},
          {"tasks", c.tasks.string()},
          {"task_ids", c.task_ids},
          {"order", c.shuffle ? "shuffle" : "sequential"},
          {"groups", c.groups},
          {"group_size", c.group_size},
          {"concurrency", c.concurrency},
          {"episode", episode},
          {"policy", policy},
          {"exemplars", c.exemplars},
          {"max_policy_lag", c.max_policy_lag},
          {"group_normalization", group_normalization_name(c.group_normalization)},
          {"output", {{"jsonl", c.output.string()}}},
          {"stream", stream},
          {"seed", c.seed}};
}

}  // namespace kforge::rollout
