// Rehearsal check of a planned recipe (see rehearsal_check.h).
#include "capability/rehearsal_check.h"

#include "capability/capability.h"
#include "capability/capability_table.h"

namespace trident::capability {

RehearsalCheck rehearsal_check(const RunSpec& recipe) {
  RehearsalCheck out;
  RunSpec r = recipe;
  ExecutionSpec& x = r.exec;
  // What CPU ranks run in place of each setting they cannot (the capability table's rehearse
  // column, beside train's refusals).
  out.substitutions = substitute_for_rehearsal(r);
  // The runtime's capability check, as `trident train` runs it on CPU ranks (no data, paths or
  // resume: those are the rehearsal's own, not the recipe's).
  Problems p;
  check_executable(r, "cpu", {}, p);
  out.refusals = p.list();
  // The rehearsal runs Trident's runtime, which issues its kernels from C++: a Python stack's host
  // issue floor (plan/host_issue.h) is not the rehearsed job's, and `trident train` (which takes
  // no --stack) predicts without it. Cleared after the check so its refusals still name the stack.
  if (python_issued(x))
    out.substitutions.push_back("kernel issue from Python (stack " + x.stack +
                                ") -> from C++ (the runtime's; no host issue floor)");
  x.stack.clear();
  out.run = r;
  return out;
}

}  // namespace trident::capability
