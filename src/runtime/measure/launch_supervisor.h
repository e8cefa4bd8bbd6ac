// The supervisor of what `trident rehearse` starts and makes: a small process (a shell reading
// a socket) that outlives this one, so that even a SIGKILL of `trident rehearse` (which no handler
// sees) leaves no launcher, rank, network namespace, link or qdisc behind.
//
// This process tells it what to watch, one line each: a launcher it started (mpirun: its process
// tree is ended, SIGTERM then SIGKILL after 5 s) and a set of emulated hosts (their namespaces'
// processes are killed, the namespaces, veth links and the bridge removed; the qdiscs go with the
// links). What this process cleans up itself it releases again. When the socket closes (this
// process ended, however) the supervisor ends what is still watched, then exits. It runs in its
// own session and ignores SIGINT / SIGTERM / SIGHUP, so a signal to the terminal's process group
// does not stop it before it has cleaned up.
//
// Launchers are also started with PR_SET_PDEATHSIG (run_launcher), so mpirun gets SIGTERM the
// moment this process dies and ends its ranks its own way; the supervisor is what removes the
// rest and what ends a launcher that does not stop.
#pragma once

#include <sys/types.h>

#include <string>

namespace trident::measure {

// Each starts the supervisor first if it is not running (once per process). A supervisor that
// cannot start (no /bin/sh) leaves the cleanup to this process's own handlers.
void supervise_process(pid_t pid);
void release_process(pid_t pid);
void supervise_hosts(const std::string& prefix, int hosts, const std::string& folder);  // its files in /tmp/trident-hosts-*
void release_hosts(const std::string& prefix);

// The supervisor's pid (0 when not started), for the tests.
pid_t supervisor_pid();

}  // namespace trident::measure
