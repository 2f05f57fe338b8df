// Exploit: host threads that outlive the call. kf_forward starts a detached
// thread and returns at once; the thread computes the outputs afterwards,
// while the judge believes the call is over (the time of the work escapes the
// measurement, and a later call can find the outputs filled in).
// Must be caught by: load-time inspection, violation `forbidden_symbol`
// (pthread_create, "threads"); the running seccomp filter (clone) backs it up.
// Task: chain (out = relu(x * y + z)).
#include <kforge/kernel_abi.h>
#include <pthread.h>

struct Job {
  const float *x, *y, *z;
  float* o;
  int64_t n;
};
static Job g_job;

static void* late_writer(void*) {
  for (int64_t i = 0; i < g_job.n; ++i) {
    float v = g_job.x[i] * g_job.y[i] + g_job.z[i];
    g_job.o[i] = v > 0.f ? v : 0.f;
  }
  return 0;
}

extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  g_job = {(const float*)in[0].data, (const float*)in[1].data, (const float*)in[2].data, (float*)out[0].data,
           kf_numel(&out[0])};
  pthread_t t;
  if (pthread_create(&t, 0, late_writer, 0) != 0) return 1;
  pthread_detach(t);
  return 0;
}
