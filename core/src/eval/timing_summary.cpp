#include "kforge/core/timing_summary.h"

#include <cmath>
#include <limits>

#include "summary_fields.h"

namespace kforge {
namespace {

using internal::optional_number;
using internal::optional_value;
using internal::put;

// NaN and infinities have no JSON form; a statistic that is not finite is
// reported as absent rather than as a number nobody can parse back.
json number_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

void put(json& j, const char* key, const std::optional<SampleStats>& v) {
  if (v) j[key] = to_json(*v);
}

void put_object(json& j, const char* key, const json& v) {
  if (!v.is_null()) j[key] = v;
}

double number(ObjectReader& r, const char* key) {
  Field f = r.required(key);
  // A statistic the producer could not compute is written as null.
  if (f.value().is_null()) return std::numeric_limits<double>::quiet_NaN();
  return f.as_number();
}

}  // namespace

json to_json(const SampleStats& s) {
  json j = {{"median_ms", number_or_null(s.median_ms)},
            {"p25_ms", number_or_null(s.p25_ms)},
            {"p75_ms", number_or_null(s.p75_ms)},
            {"mean_ms", number_or_null(s.mean_ms)},
            {"min_ms", number_or_null(s.min_ms)},
            {"max_ms", number_or_null(s.max_ms)},
            {"rse", s.rse ? number_or_null(*s.rse) : json(nullptr)},
            {"samples", s.samples}};
  put(j, "energy_j", s.energy_j);
  return j;
}

json to_json(const SpeedupInterval& i) {
  json j = {
      {"lo", number_or_null(i.lo)},       {"hi", number_or_null(i.hi)}, {"confidence", number_or_null(i.confidence)},
      {"level", number_or_null(i.level)}, {"rounds", i.rounds},         {"method", i.method}};
  if (i.median) j["median"] = number_or_null(*i.median);
  return j;
}

json to_json(const TimingSummary& t) {
  json j = {{"schema_version", t.schema_version},
            {"timer", t.timer},
            {"device", t.device},
            {"reference", to_json(t.reference)},
            {"candidate", to_json(t.candidate)},
            {"overhead", to_json(t.overhead)},
            {"stop_reason", t.stop_reason},
            {"warmup_rounds", t.warmup_rounds},
            {"input_sets", t.input_sets},
            {"fresh_inputs", t.fresh_inputs},
            {"timing_seed", t.timing_seed},
            {"cache_flush_bytes", t.cache_flush_bytes},
            {"elapsed_ms", number_or_null(t.elapsed_ms)}};
  put(j, "speedup", t.speedup);
  put(j, "warmup_ms", t.warmup_ms);
  if (t.speedup_interval) j["speedup_interval"] = to_json(*t.speedup_interval);
  put(j, "candidate_self_reported", t.candidate_self_reported);
  put(j, "resolution_ms", t.resolution_ms);
  put(j, "reference_wall", t.reference_wall);
  put(j, "candidate_wall", t.candidate_wall);
  put(j, "overhead_wall", t.overhead_wall);
  put(j, "speedup_wall", t.speedup_wall);
  if (!t.device_clock_rejected.empty()) j["device_clock_rejected"] = t.device_clock_rejected;
  if (!t.self_clock_disagrees.empty()) j["self_clock_disagrees"] = t.self_clock_disagrees;
  put_object(j, "clocks", t.clocks);
  put_object(j, "roofline", t.roofline);
  put_object(j, "drain", t.drain);
  put_object(j, "cuda_graph", t.cuda_graph);
  put_object(j, "launch_gate", t.launch_gate);
  put_object(j, "energy", t.energy);
  put_object(j, "sandbox", t.sandbox);
  return j;
}

SampleStats sample_stats_from_field(const Field& field) {
  ObjectReader r = field.as_object();
  SampleStats s;
  s.median_ms = number(r, "median_ms");
  s.p25_ms = number(r, "p25_ms");
  s.p75_ms = number(r, "p75_ms");
  s.mean_ms = number(r, "mean_ms");
  s.min_ms = number(r, "min_ms");
  s.max_ms = number(r, "max_ms");
  s.rse = optional_number(r, "rse");
  s.samples = r.required("samples").as_int_in(0, std::numeric_limits<int64_t>::max());
  s.energy_j = optional_number(r, "energy_j");
  r.finish();
  return s;
}

SpeedupInterval speedup_interval_from_field(const Field& field) {
  ObjectReader r = field.as_object();
  SpeedupInterval i;
  Field lo = r.required("lo");
  i.lo = lo.as_number();
  Field hi = r.required("hi");
  i.hi = hi.as_number();
  if (!(i.lo > 0 && std::isfinite(i.lo))) lo.fail("a positive number (the interval's lower bound)");
  if (!(i.hi >= i.lo && std::isfinite(i.hi))) hi.fail("a number at least lo (the interval's upper bound)");
  i.confidence = r.required("confidence").as_number_in(0.0, 1.0);
  if (auto f = r.optional("level")) i.level = f->as_number_in(0.0, 1.0);
  i.rounds = r.required("rounds").as_int_in(0, std::numeric_limits<int64_t>::max());
  if (auto f = r.optional("method")) i.method = f->as_string();
  if (auto f = r.optional("median")) {
    i.median = f->as_number();
    if (!(*i.median >= i.lo && *i.median <= i.hi)) f->fail("a number within [lo, hi] (the interval's own estimate)");
  }
  r.finish();
  return i;
}

TimingSummary timing_summary_from_field(const Field& field) {
  ObjectReader r = field.as_object();
  TimingSummary t;
  Field version = r.required("schema_version");
  t.schema_version = static_cast<int>(version.as_int());
  if (t.schema_version != kTimingSummarySchemaVersion) {
    version.fail("timing schema version " + std::to_string(kTimingSummarySchemaVersion) +
                 " (this build reads only that version)");
  }
  t.timer = r.required("timer").as_string();
  if (auto f = r.optional("device")) t.device = f->as_string();
  t.reference = sample_stats_from_field(r.required("reference"));
  t.candidate = sample_stats_from_field(r.required("candidate"));
  t.overhead = sample_stats_from_field(r.required("overhead"));
  t.speedup = optional_number(r, "speedup");
  if (auto f = r.optional("speedup_interval")) t.speedup_interval = speedup_interval_from_field(*f);
  if (auto f = r.optional("candidate_self_reported")) t.candidate_self_reported = sample_stats_from_field(*f);
  t.resolution_ms = optional_number(r, "resolution_ms");
  if (auto f = r.optional("stop_reason")) t.stop_reason = f->as_string();
  if (auto f = r.optional("warmup_rounds")) t.warmup_rounds = static_cast<int>(f->as_int_in(0, INT32_MAX));
  t.warmup_ms = optional_number(r, "warmup_ms");
  if (auto f = r.optional("input_sets")) t.input_sets = static_cast<int>(f->as_int_in(0, INT32_MAX));
  if (auto f = r.optional("fresh_inputs")) t.fresh_inputs = f->as_bool();
  if (auto f = r.optional("timing_seed")) {
    if (!f->value().is_number_unsigned() && !(f->value().is_number_integer() && f->value().get<int64_t>() >= 0)) {
      f->fail("a non-negative integer");
    }
    t.timing_seed = f->value().get<uint64_t>();
  }
  if (auto f = r.optional("cache_flush_bytes")) {
    t.cache_flush_bytes = static_cast<uint64_t>(f->as_int_in(0, std::numeric_limits<int64_t>::max()));
  }
  if (auto v = optional_number(r, "elapsed_ms")) t.elapsed_ms = *v;
  if (auto f = r.optional("reference_wall")) t.reference_wall = sample_stats_from_field(*f);
  if (auto f = r.optional("candidate_wall")) t.candidate_wall = sample_stats_from_field(*f);
  if (auto f = r.optional("overhead_wall")) t.overhead_wall = sample_stats_from_field(*f);
  t.speedup_wall = optional_number(r, "speedup_wall");
  if (auto f = r.optional("device_clock_rejected")) t.device_clock_rejected = f->as_string();
  if (auto f = r.optional("self_clock_disagrees")) t.self_clock_disagrees = f->as_string();
  t.clocks = optional_value(r, "clocks");
  t.roofline = optional_value(r, "roofline");
  t.drain = optional_value(r, "drain");
  t.cuda_graph = optional_value(r, "cuda_graph");
  t.launch_gate = optional_value(r, "launch_gate");
  t.energy = optional_value(r, "energy");
  t.sandbox = optional_value(r, "sandbox");
  r.finish();
  return t;
}

TimingSummary timing_summary_from_json(const json& j, const std::string& source) {
  const Document doc = Document::from_value(j, source);
  return timing_summary_from_field(doc.root_object().self());
}

}  // namespace kforge
