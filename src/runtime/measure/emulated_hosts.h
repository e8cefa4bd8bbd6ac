// Emulated hosts for a rehearsal: H Linux network namespaces on this machine, one per host,
// each joined to a bridge by a veth pair whose two ends are shaped with tc's token bucket (tbf)
// to one bandwidth, so traffic between hosts crosses a slow link while ranks inside a host talk
// over shared memory. Open MPI starts its daemon in each namespace through a launch agent (a
// script that enters the namespace where ssh would log in) and uses TCP over the bridge between
// hosts (btl tcp,vader,self restricted to the bridge's subnet).
//
// Latency is not shaped: the kernel's netem qdisc is missing on the machines this was written
// for, so the link keeps the latency the bridge and TCP give (measured, not set).
//
// Root is needed (ip netns, ip link, tc). Names carry a per-process prefix (tr<pid>), so runs
// in parallel do not collide. Everything made is removed by the destructor, by stop(), at exit
// and on SIGINT / SIGTERM / SIGHUP (the handler forwards the signal to the running launcher,
// whose exit the caller then sees), and by the supervisor (launch_supervisor.h) when this process
// dies without doing so (SIGKILL): no namespace, link or qdisc is left behind.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trident::measure {

// Why emulated hosts cannot be made here (not root, no `ip` or `tc`), or nullopt.
std::optional<std::string> emulated_hosts_unavailable();

class EmulatedHosts {
 public:
  // Makes `hosts` namespaces of `ranks_per_host` slots each, links shaped to `link_Bps` bytes/s
  // per direction; the hostfiles and launch agent go into a folder of its own in /tmp (removed
  // with the rest). Throws std::runtime_error with the failing command's output (after removing
  // what was made).
  EmulatedHosts(int hosts, int ranks_per_host, double link_Bps);
  ~EmulatedHosts();
  EmulatedHosts(const EmulatedHosts&) = delete;
  EmulatedHosts& operator=(const EmulatedHosts&) = delete;

  // mpirun's options that place the ranks in the namespaces (hostfile, agent, transports).
  std::vector<std::string> mpirun_options() const;
  // The same with one rank per host (for the link measurement).
  std::vector<std::string> mpirun_options_one_per_host() const;
  std::string describe() const;  // "2 namespaces trident-123-h0.., bridge tr123b, tbf 0.100 GB/s"
  const std::string& prefix() const { return prefix_; }
  double link_Bps() const { return link_Bps_; }
  void stop();  // removes everything (idempotent)

 private:
  int hosts_, per_host_;
  double link_Bps_;
  std::string prefix_, subnet_, dir_;
  bool up_ = false;
};

// Runs argv (execvp), waiting for it at most limit_s seconds (0: no limit); the signal handlers
// of EmulatedHosts forward SIGINT and SIGTERM to it, and the supervisor (launch_supervisor.h)
// ends it if this process dies. Returns its exit status (128 + signal when killed), 127 when it
// cannot start, kLauncherTimedOut (-1) when it ran past limit_s (then it was ended).
// With `stderr_copy`, the child's standard error still reaches this process's, and its last
// 64 KiB are kept there too (what mpirun or srun said about a rank that died: `trident train --elastic`).
constexpr int kLauncherTimedOut = -1;
int run_launcher(const std::vector<std::string>& argv, double limit_s = 0, std::string* stderr_copy = nullptr);

// This program's own path (/proc/self/exe), for launching its subcommands under mpirun.
std::string self_executable();

// The signal that interrupted the run (SIGINT, ...), or 0.
int interrupting_signal();

}  // namespace trident::measure
