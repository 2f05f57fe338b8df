// OpenAiPolicy's HTTP side: one curl multi handle per act() call drives the
// batch's transfers concurrently; retries wait in the same loop, so a batch
// never blocks a thread per request.
#include "kforge/rollout/policy/openai_policy.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <random>

#include "kforge/core/error.h"

namespace kforge::rollout {
namespace {

using Clock = std::chrono::steady_clock;

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw SystemError("libcurl could not be initialized");
  });
}

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::string format_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g s", s);
  return buf;
}

// Transfer slots shared by every act() call on one policy, so that the
// configured concurrency holds for the whole process's use of the server.
class Slots {
 public:
  explicit Slots(int n) : free_(n) {}
  bool try_acquire() {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_ == 0) return false;
    --free_;
    return true;
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++free_;
    }
    cv_.notify_all();
  }
  // Waits until a slot may be free, at most `ms`.
  void wait(int ms) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return free_ > 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int free_;
};

// curl's connection-level failures that a later attempt may not meet.
bool retryable_curl_error(CURLcode rc) {
  switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
  }
}

}  // namespace

double backoff_seconds(const OpenAiPolicyConfig& config, int retry, double unit) {
  const double exp = std::ldexp(config.backoff_initial_s, std::min(retry, 60));
  const double base = std::min(config.backoff_max_s, exp);
  return base * (0.5 + 0.5 * std::clamp(unit, 0.0, 1.0));
}

bool retryable_status(long status) { return status == 408 || status == 425 || status == 429 || status >= 500; }

struct OpenAiPolicy::Engine {
  // One request of a batch, across its attempts.
  struct Job {
    size_t index = 0;
    std::string body;
    int attempts = 0;  // started so far
    Clock::time_point first_start;
    Clock::time_point not_before;
    CURL* easy = nullptr;
    std::string response;
    size_t limit = 0;  // response bytes kept
    bool too_large = false;
    char errbuf[CURL_ERROR_SIZE] = {0};
  };

  // One run(): its jobs, those waiting to start (now or after a retry's
  // delay), the jobs not done yet and the transfers in flight.
  struct Batch {
    std::vector<Job> jobs;
    std::deque<Job*> waiting;
    std::vector<PolicyReply> replies;
    CURLM* multi = nullptr;
    size_t remaining = 0;
    int active = 0;
  };

  const OpenAiPolicyConfig& config;
  std::string url;
  curl_slist* headers = nullptr;
  Slots slots;
  std::mutex pool_mu;
  std::vector<CURLM*> idle_multis;  // keep their connection caches between batches
  std::mutex rng_mu;
  std::mt19937_64 rng{std::random_device{}()};

  Engine(const OpenAiPolicyConfig& c, const std::string& api_key)
      : config(c), url(c.base_url + "/chat/completions"), slots(c.max_concurrency) {
    init_curl_once();
    std::vector<std::string> lines = {"Content-Type: application/json", "Accept: application/json",
                                      // No "Expect: 100-continue" round trip for large bodies.
                                      "Expect:"};
    if (!api_key.empty()) lines.push_back("Authorization: Bearer " + api_key);
    for (const auto& [name, value] : c.headers) lines.push_back(name + ": " + value);
    for (const auto& line : lines) {
      curl_slist* next = curl_slist_append(headers, line.c_str());
      if (next == nullptr) {
        curl_slist_free_all(headers);
        throw SystemError("libcurl: out of memory building request headers");
      }
      headers = next;
    }
  }

  ~Engine() {
    for (CURLM* m : idle_multis) curl_multi_cleanup(m);
    curl_slist_free_all(headers);
  }

  CURLM* take_multi() {
    {
      std::lock_guard<std::mutex> lock(pool_mu);
      if (!idle_multis.empty()) {
        CURLM* m = idle_multis.back();
        idle_multis.pop_back();
        return m;
      }
    }
    return curl_multi_init();
  }

  void return_multi(CURLM* m) {
    std::lock_guard<std::mutex> lock(pool_mu);
    idle_multis.push_back(m);
  }

  double draw() {
    std::lock_guard<std::mutex> lock(rng_mu);
    return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  }

  static size_t on_data(char* data, size_t size, size_t count, void* user) {
    auto* job = static_cast<Job*>(user);
    const size_t n = size * count;
    // Reading stops at the limit: a hostile server cannot make us buffer more.
    if (job->response.size() + n > job->limit) {
      job->too_large = true;
      return 0;
    }
    job->response.append(data, n);
    return n;
  }

  // Starts one attempt; false (with `why`) when curl cannot even set it up.
  bool start(Job* job, CURLM* multi, std::string* why) {
    CURL* e = curl_easy_init();
    if (e == nullptr) {
      *why = "libcurl could not create a transfer";
      return false;
    }
    job->response.clear();
    job->too_large = false;
    job->errbuf[0] = '\0';
    job->limit = config.limits.max_bytes;
    curl_easy_setopt(e, CURLOPT_URL, url.c_str());
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, job->body.data());
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(job->body.size()));
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &Engine::on_data);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, job);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, job->errbuf);
    curl_easy_setopt(e, CURLOPT_PRIVATE, job);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(std::ceil(config.connect_timeout_s * 1000)));
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(std::ceil(config.timeout_s * 1000)));
    // A server that announces a larger body is refused before it sends it.
    curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(config.limits.max_bytes));
    curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");  // the limit applies after decompression
    curl_easy_setopt(e, CURLOPT_USERAGENT, "kforge-openai-policy");
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
    if (curl_multi_add_handle(multi, e) != CURLM_OK) {
      curl_easy_cleanup(e);
      *why = "libcurl could not start a transfer";
      return false;
    }
    job->easy = e;
    if (job->attempts == 0) job->first_start = Clock::now();
    ++job->attempts;
    return true;
  }

  void finish(Job* job, PolicyReply reply, std::vector<PolicyReply>* replies) {
    reply.latency_ms = 1000.0 * seconds_between(job->first_start, Clock::now());
    (*replies)[job->index] = std::move(reply);
  }

  void fail(Job* job, const std::string& message, std::vector<PolicyReply>* replies) {
    PolicyReply r;
    r.error = "POST " + url + ": " + message;
    if (job->attempts > 1) r.error += " (gave up after " + std::to_string(job->attempts) + " attempts)";
    r.policy_version = config.policy_version;
    finish(job, std::move(r), replies);
  }

  // Decides what a finished attempt means: a reply, a retry (returns the
  // delay), or a failure. Returns a negative delay when the job is done.
  double complete(Job* job, CURLcode rc, std::vector<PolicyReply>* replies) {
    long status = 0;
    curl_easy_getinfo(job->easy, CURLINFO_RESPONSE_CODE, &status);
    curl_off_t retry_after = 0;
    curl_easy_getinfo(job->easy, CURLINFO_RETRY_AFTER, &retry_after);
    std::string problem;
    bool retry = false;
    double delay = 0.0;
    if (rc != CURLE_OK) {
      if (job->too_large || rc == CURLE_FILESIZE_EXCEEDED) {
        fail(
            job,
            "reply larger than " + std::to_string(config.limits.max_bytes) + " bytes (max_response_bytes); not retried",
            replies);
        return -1;
      }
      problem = std::string(curl_easy_strerror(rc)) + (job->errbuf[0] ? std::string(": ") + job->errbuf : "");
      if (rc == CURLE_OPERATION_TIMEDOUT) {
        problem = "no complete reply within the timeout (connect_timeout_s " +
                  format_seconds(config.connect_timeout_s) + ", timeout_s " + format_seconds(config.timeout_s) +
                  "): " + job->errbuf;
      }
      retry = retryable_curl_error(rc);
    } else if (status >= 200 && status < 300) {
      ChatResponse parsed = parse_chat_response(job->response, config.limits);
      if (!parsed.error.empty()) {
        fail(job, "HTTP " + std::to_string(status) + ": " + parsed.error, replies);
        return -1;
      }
      PolicyReply reply = std::move(parsed.reply);
      reply.policy_version = config.policy_version.empty() ? parsed.model : config.policy_version;
      reply.usage = std::move(parsed.usage);
      finish(job, std::move(reply), replies);
      return -1;
    } else {
      problem = "HTTP " + std::to_string(status);
      const std::string message = error_body_message(job->response);
      if (!message.empty()) problem += ": " + message;
      retry = retryable_status(status);
      if (retry && retry_after > 0) {
        const double asked = static_cast<double>(retry_after);
        if (asked > config.max_retry_after_s) {
          fail(job,
               problem + "; the server asked to retry after " + format_seconds(asked) +
                   ", more than max_retry_after_s (" + format_seconds(config.max_retry_after_s) + ")",
               replies);
          return -1;
        }
        delay = asked;
      }
    }
    if (!retry || job->attempts > config.max_retries) {
      fail(job, problem, replies);
      return -1;
    }
    return std::max(delay, backoff_seconds(config, job->attempts - 1, draw()));
  }

  std::vector<PolicyReply> run(const std::vector<PolicyRequest>& requests) {
    Batch b;
    b.replies.resize(requests.size());
    if (requests.empty()) return std::move(b.replies);
    queue_jobs(requests, &b);
    b.multi = take_multi();
    if (b.multi == nullptr) {
      for (auto& job : b.jobs) fail(&job, "libcurl could not create a multi handle", &b.replies);
      return std::move(b.replies);
    }
    b.remaining = b.jobs.size();
    while (b.remaining > 0) {
      const bool blocked_on_slots = start_due(&b);
      if (b.active > 0) collect_finished(&b);
      if (b.remaining == 0) break;
      wait_for_news(b, blocked_on_slots);
    }
    return_multi(b.multi);
    return std::move(b.replies);
  }

  // A job per request, each due now.
  void queue_jobs(const std::vector<PolicyRequest>& requests, Batch* b) const {
    b->jobs.resize(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      Job& job = b->jobs[i];
      job.index = i;
      // Invalid UTF-8 in the conversation (it holds compiler output and
      // policy text) is replaced, not a reason to drop the request.
      job.body = build_chat_request(requests[i], config.request).dump(-1, ' ', false, json::error_handler_t::replace);
      job.not_before = Clock::now();
      b->waiting.push_back(&job);
    }
  }

  // Starts what is due, as far as slots allow. True when a due job found no
  // free slot.
  bool start_due(Batch* b) {
    const auto now = Clock::now();
    for (auto it = b->waiting.begin(); it != b->waiting.end();) {
      Job* job = *it;
      if (job->not_before > now) {
        ++it;
        continue;
      }
      if (!slots.try_acquire()) return true;
      std::string why;
      if (start(job, b->multi, &why)) {
        ++b->active;
      } else {
        slots.release();
        fail(job, why, &b->replies);
        --b->remaining;
      }
      it = b->waiting.erase(it);
    }
    return false;
  }

  // Completes the finished transfers: a job is done, or waits for its retry.
  void collect_finished(Batch* b) {
    int running = 0;
    curl_multi_perform(b->multi, &running);
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(b->multi, &left)) {
      if (msg->msg != CURLMSG_DONE) continue;
      Job* job = nullptr;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &job);
      const CURLcode rc = msg->data.result;
      const double delay = complete(job, rc, &b->replies);
      curl_multi_remove_handle(b->multi, job->easy);
      curl_easy_cleanup(job->easy);
      job->easy = nullptr;
      slots.release();
      --b->active;
      if (delay < 0) {
        --b->remaining;
      } else {
        job->not_before =
            Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(delay));
        b->waiting.push_back(job);
      }
    }
  }

  // Sleeps until a transfer has news, a retry is due or a slot frees.
  // A due request that found no free slot waits for one: a transfer of
  // this call finishing wakes the poll, another thread's release is
  // seen within 20 ms. (Polling with 0 here would spin.)
  void wait_for_news(const Batch& b, bool blocked_on_slots) {
    int wait_ms = 1000;
    const auto t = Clock::now();
    for (const Job* job : b.waiting) {
      const double until = seconds_between(t, job->not_before);
      if (until <= 0) {
        wait_ms = std::min(wait_ms, blocked_on_slots ? 20 : 0);
      } else {
        wait_ms = std::min(wait_ms, static_cast<int>(std::ceil(until * 1000)));
      }
    }
    if (b.active > 0) {
      curl_multi_poll(b.multi, nullptr, 0, wait_ms, nullptr);
    } else if (wait_ms > 0) {
      slots.wait(wait_ms);
    }
  }
};

OpenAiPolicy::OpenAiPolicy(OpenAiPolicyConfig config) : config_(std::move(config)) {
  if (config_.model.empty()) throw InputError("openai policy: field model: expected the served model's name");
  if (config_.base_url.rfind("http://", 0) != 0 && config_.base_url.rfind("https://", 0) != 0) {
    throw InputError("openai policy: field base_url: \"" + config_.base_url +
                     "\" does not start with http:// or https://");
  }
  while (!config_.base_url.empty() && config_.base_url.back() == '/') config_.base_url.pop_back();
  config_.request.model = config_.model;
  std::string key;
  if (config_.api_key_env) {
    const char* v = std::getenv(config_.api_key_env->c_str());
    if (v == nullptr || *v == '\0') {
      throw InputError("openai policy: field api_key_env: the environment variable " + *config_.api_key_env +
                       " is not set (export it, or remove api_key_env for a server that needs no key)");
    }
    key = v;
  } else if (const char* v = std::getenv("OPENAI_API_KEY"); v != nullptr) {
    key = v;
  }
  engine_ = std::make_unique<Engine>(config_, key);
}

OpenAiPolicy::~OpenAiPolicy() = default;

std::vector<PolicyReply> OpenAiPolicy::act(const std::vector<PolicyRequest>& requests) {
  return engine_->run(requests);
}

std::string OpenAiPolicy::describe() const { return "openai " + config_.base_url + " model=" + config_.model; }

}  // namespace kforge::rollout
