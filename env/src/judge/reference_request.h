// The judge's side of a `reference` request (kforge/env/reference_probe.h):
// the task's reference alone on the judge's device, checked node by node
// and/or timed with the protocol of the speedup's denominator
// (timing_protocol.h). No runner and no candidate take part.
#pragma once

#include "judge/judge_device.h"
#include "judge/reference_cache.h"
#include "kforge/env/reference_probe.h"

namespace kforge::judge {

// Never throws for anything the task does (a reference that throws, runs out
// of memory or produces NaN is an `invalid` report); SystemError only for
// faults of the judge itself, which the caller reports as `error`.
// `references`: the judge's reference cache, whose bound the task's fit may
// lower (what it keeps is memory this request's work does not have).
env::ReferenceReport probe_reference(const env::ReferenceRequest& request, JudgeDevice* device,
                                     ReferenceCache* references = nullptr);

}  // namespace kforge::judge
