// Where one rank's training step went, in seconds: what the distributed trainer records each
// step and the rehearsal report (report/rehearsal_report.h) sums. Plain data, below both.
#pragma once

namespace trident {

// Seconds of one step on one rank, by what the rank was doing.
struct PhaseTimes {
  double compute = 0;      // forward + backward kernels (TP collectives excluded) + optimizer
  double tp = 0;           // inside TP collectives
  double pp = 0;           // pipeline sends/receives: the wire time of each message
  double bubble = 0;       // waiting on a pipeline receive beyond the wire time (peer still computing)
  double dp_exposed = 0;   // DP reduction / ZeRO gathers / tied-embedding sum left after backward
  double optimizer = 0;    // the gradient norm's local sum + AdamW (part of compute in shares, listed apart)
  double weight = 0;       // ZB-H1's weight-gradient passes (W; part of compute, listed apart)
  double total = 0;        // wall time of the step
  double cp = 0;           // waiting on the context-parallel ring's KV exchange (what attention did not hide)
  double cp_attention = 0; // ring attention's block compute (part of compute, listed apart)
  double zero_gather = 0;  // waits on ZeRO weight all-gathers (part of dp_exposed, listed apart)
  double ep = 0;           // expert-parallel all-to-alls (token dispatch and combine): their wire time
  double ep_wait = 0;      // in those all-to-alls beyond the wire time (waiting for the slower EP peers)
  // The gradient norm's all-reduce over the world (part of bubble, listed apart): a rank that
  // finishes its program early waits there for the last stage to drain, the pipeline's tail.
  double norm_wait = 0;
  // Last: the runtime's positional copies (training_loop.cpp) leave it out.
  // The GPU's wait for the host to issue kernels (the planner's host term, plan/host_issue.h). The
  // runtime issues from C++ and times no such wait apart: it stays 0, a wait falls in compute.
  double host = 0;
  // The step less the terms timed apart, from the term table (core/step_terms.cpp).
  double other() const;
};

}  // namespace trident
