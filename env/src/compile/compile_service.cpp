#include "kforge/env/compile_service.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <list>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "disk_cache.h"
#include "kforge/core/elapsed.h"
#include "kforge/core/error.h"
#include "kforge/core/sha256.h"
#include "kforge/env/compile/compilers.h"

namespace kforge::env {
namespace {

using Clock = std::chrono::steady_clock;

// Cores this process may run on (its affinity mask), at least 1.
int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

std::future<CompileResult> ready(CompileResult r) {
  std::promise<CompileResult> p;
  p.set_value(std::move(r));
  return p.get_future();
}

CompileResult system_failure(const std::string& message) {
  CompileResult r;
  r.system_error = message;
  r.diagnostics = "the compile could not run (a problem of the environment, not of the solution): " + message + "\n";
  return r;
}

// Least-recently-used map of finished results.
class MemoryCache {
 public:
  explicit MemoryCache(size_t capacity) : capacity_(capacity) {}

  const CompileResult* find(const std::string& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return &it->second->second;
  }
  void erase(const std::string& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return;
    order_.erase(it->second);
    index_.erase(it);
  }
  void put(const std::string& key, const CompileResult& r) {
    if (capacity_ == 0) return;
    erase(key);
    order_.emplace_front(key, r);
    index_[key] = order_.begin();
    while (order_.size() > capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
  }

 private:
  size_t capacity_;
  std::list<std::pair<std::string, CompileResult>> order_;
  std::unordered_map<std::string, std::list<std::pair<std::string, CompileResult>>::iterator> index_;
};

}  // namespace

std::filesystem::path default_compile_cache_dir() {
  if (const char* dir = std::getenv("KFORGE_CACHE_DIR"); dir != nullptr && *dir != '\0') return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return std::filesystem::path(xdg) / "kforge" / "compile";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::filesystem::path(home) / ".cache" / "kforge" / "compile";
  }
  return std::filesystem::temp_directory_path() / "kforge-compile-cache";
}

struct CompileService::Impl {
  struct Waiter {
    std::promise<CompileResult> promise;
    Clock::time_point submitted;
  };
  struct Job {
    std::string key;
    Solution solution;
    CompileContext ctx;
    std::shared_ptr<Compiler> compiler;  // shared: add_compiler may replace it meanwhile
    std::vector<Waiter> waiters;
  };

  CompileServiceConfig config;
  internal::DiskCache disk;
  mutable std::mutex mu;
  std::condition_variable cv;
  std::map<SolutionMode, std::shared_ptr<Compiler>> compilers;
  std::deque<std::shared_ptr<Job>> queue;
  std::unordered_map<std::string, std::shared_ptr<Job>> in_flight;
  std::map<SolutionMode, int> running;
  MemoryCache memory;
  CompileStats stats;
  bool stopping = false;
  std::vector<std::thread> workers;

  explicit Impl(CompileServiceConfig c)
      : config(std::move(c)),
        // Absolute: the judge and runner load artifacts from other working
        // directories, so a relative KFORGE_CACHE_DIR made every candidate
        // `rejected` (its library "not found").
        disk(std::filesystem::absolute(config.cache_dir.empty() ? default_compile_cache_dir() : config.cache_dir)),
        memory(config.memory_cache_entries) {}

  std::shared_ptr<Compiler> compiler_for(SolutionMode mode) const {
    std::lock_guard<std::mutex> lock(mu);
    auto it = compilers.find(mode);
    return it == compilers.end() ? nullptr : it->second;
  }

  int limit(SolutionMode mode) const {
    auto it = config.per_mode_limit.find(mode);
    return it == config.per_mode_limit.end() ? config.threads : std::max(1, it->second);
  }

  std::string key(const Compiler& compiler, const Solution& solution, const CompileContext& ctx) const {
    const json material = {{"format", 1},
                           {"mode", solution_mode_name(solution.mode)},
                           {"source", solution.source},
                           {"options", solution.options},
                           {"launch", solution.launch},
                           {"identity", compiler.identity(ctx)}};
    return sha256_hex(material.dump());
  }

  // Next job whose mode is under its limit, oldest first. Caller holds mu.
  std::shared_ptr<Job> take_job() {
    for (auto it = queue.begin(); it != queue.end(); ++it) {
      const SolutionMode mode = (*it)->solution.mode;
      if (running[mode] < limit(mode)) {
        std::shared_ptr<Job> job = *it;
        queue.erase(it);
        return job;
      }
    }
    return nullptr;
  }

  void worker() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      std::shared_ptr<Job> job;
      cv.wait(lock, [&] { return stopping || (job = take_job()) != nullptr; });
      if (!job) return;  // stopping
      const SolutionMode mode = job->solution.mode;
      ++running[mode];
      lock.unlock();
      CompileResult result = run(*job);
      lock.lock();
      --running[mode];
      in_flight.erase(job->key);
      const bool cacheable = result.system_error.empty() && !result.rejected && !result.limit_hit();
      if (cacheable) memory.put(job->key, result);
      if (!result.system_error.empty()) ++stats.system_errors;
      std::vector<Waiter> waiters = std::move(job->waiters);
      lock.unlock();
      cv.notify_all();  // a slot of `mode` is free again
      for (size_t i = 0; i < waiters.size(); ++i) {
        CompileResult r = result;
        if (i > 0) {
          r.cache_hit = true;
          r.compile_ms = ms_since(waiters[i].submitted);
        }
        waiters[i].promise.set_value(std::move(r));
      }
      lock.lock();
    }
  }

  CompileResult run(const Job& job) {
    const auto start = Clock::now();
    try {
      if (auto hit = disk.load(job.key)) {
        hit->cache_hit = true;
        hit->compile_ms = ms_since(start);
        std::lock_guard<std::mutex> lock(mu);
        ++stats.disk_hits;
        return *hit;
      }
    } catch (const std::exception& e) {
      return system_failure(e.what());
    }
    std::filesystem::path work;
    try {
      work = disk.make_work_dir(job.key);
      {
        std::lock_guard<std::mutex> lock(mu);
        ++stats.compiled;
      }
      CompileResult r = job.compiler->compile(job.solution, job.ctx, work);
      r.artifact.hash = job.key;
      r.artifact.mode = job.solution.mode;
      if (!r.system_error.empty() || r.rejected || r.limit_hit()) {
        disk.discard(work);
        return r;
      }
      return disk.commit(job.key, work, r);
    } catch (const std::exception& e) {
      if (!work.empty()) disk.discard(work);
      return system_failure(e.what());
    }
  }
};

CompileService::CompileService(CompileServiceConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {
  if (impl_->config.threads <= 0) impl_->config.threads = usable_cores();
  const int threads = impl_->config.threads;
  for (int i = 0; i < threads; ++i) impl_->workers.emplace_back([this] { impl_->worker(); });
}

CompileService::~CompileService() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  for (auto& t : impl_->workers) t.join();
  for (auto& job : impl_->queue) {
    for (auto& w : job->waiters) w.promise.set_value(system_failure("the compile service was shut down"));
  }
}

void CompileService::add_compiler(std::unique_ptr<Compiler> compiler) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const SolutionMode mode = compiler->mode();
  impl_->compilers[mode] = std::shared_ptr<Compiler>(std::move(compiler));
}

bool CompileService::supports(SolutionMode mode) const { return impl_->compiler_for(mode) != nullptr; }

std::string CompileService::cache_key(const Solution& solution, const CompileContext& ctx) const {
  auto compiler = impl_->compiler_for(solution.mode);
  if (!compiler) throw SystemError("no compiler for mode " + solution_mode_name(solution.mode) + " in this service");
  return impl_->key(*compiler, solution, ctx);
}

CompileStats CompileService::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

const std::filesystem::path& CompileService::cache_dir() const { return impl_->disk.dir(); }

std::future<CompileResult> CompileService::submit(const Solution& solution, const CompileContext& ctx) {
  const auto start = Clock::now();
  Impl& d = *impl_;
  auto count = [&d](uint64_t CompileStats::*counter) {
    std::lock_guard<std::mutex> lock(d.mu);
    ++(d.stats.*counter);
  };
  count(&CompileStats::submitted);
  std::shared_ptr<Compiler> compiler = d.compiler_for(solution.mode);
  if (!compiler) {
    count(&CompileStats::system_errors);
    return ready(system_failure("no compiler for mode \"" + solution_mode_name(solution.mode) + "\" in this build"));
  }
  auto reject = [&](const std::string& message) {
    count(&CompileStats::rejected);
    CompileResult r;
    r.rejected = true;
    r.diagnostics = message;
    r.artifact.mode = solution.mode;
    r.compile_ms = ms_since(start);
    return ready(std::move(r));
  };
  if (solution.source.size() > ctx.max_source_bytes) {
    return reject("the source has " + std::to_string(solution.source.size()) + " bytes; the limit is " +
                  std::to_string(ctx.max_source_bytes));
  }
  std::string key;
  try {
    if (std::string refusal = compiler->precheck(solution, ctx); !refusal.empty()) return reject(refusal);
    key = d.key(*compiler, solution, ctx);
  } catch (const std::exception& e) {
    count(&CompileStats::system_errors);
    return ready(system_failure(e.what()));
  }

  std::lock_guard<std::mutex> lock(d.mu);
  if (const CompileResult* hit = d.memory.find(key)) {
    // An artifact deleted behind our back is a miss, not a dangling path.
    if (!hit->ok || std::filesystem::exists(hit->artifact.path)) {
      ++d.stats.memory_hits;
      CompileResult r = *hit;
      r.cache_hit = true;
      r.compile_ms = ms_since(start);
      return ready(std::move(r));
    }
    d.memory.erase(key);
  }
  Impl::Waiter waiter{std::promise<CompileResult>(), start};
  std::future<CompileResult> future = waiter.promise.get_future();
  if (auto it = d.in_flight.find(key); it != d.in_flight.end()) {
    ++d.stats.shared;
    it->second->waiters.push_back(std::move(waiter));
    return future;
  }
  auto job = std::make_shared<Impl::Job>();
  job->key = key;
  job->solution = solution;
  job->ctx = ctx;
  job->compiler = compiler;
  job->waiters.push_back(std::move(waiter));
  d.in_flight[key] = job;
  d.queue.push_back(job);
  d.cv.notify_one();
  return future;
}

void add_default_compilers(CompileService& service, const std::string& backend) {
  if (backend == "cpu") {
    service.add_compiler(make_host_compiler());
  } else if (backend == "cuda") {
    if (!have_nvrtc()) throw SystemError("backend \"cuda\": this build has no CUDA toolkit");
    service.add_compiler(make_nvcc_compiler());
    service.add_compiler(make_nvrtc_compiler());
    service.add_compiler(make_torch_ext_compiler());
  } else {
    throw InputError("unknown backend \"" + backend + "\"; expected \"cpu\" or \"cuda\"");
  }
}

}  // namespace kforge::env
