// Emulated hosts (see emulated_hosts.h).
#include "runtime/measure/emulated_hosts.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "runtime/measure/launch_supervisor.h"

namespace trident::measure {

namespace {

volatile std::sig_atomic_t g_signal = 0;
volatile pid_t g_child = 0;
EmulatedHosts* g_live = nullptr;  // the hosts to remove at exit (one set per process)

void on_signal(int sig) {
  g_signal = sig;
  if (g_child > 0) kill(g_child, sig == SIGINT ? SIGINT : SIGTERM);
}

void install_handlers() {
  static bool done = false;
  if (done) return;
  done = true;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: waitpid returns, the caller cleans up
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  std::atexit([] {
    if (g_live) g_live->stop();
  });
}

// Runs a shell command line (names and numbers only: nothing from the user is interpolated),
// returning its exit status and, in `out`, what it printed.
int shell(const std::string& cmd, std::string* out = nullptr) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return 127;
  char buf[512];
  std::string text;
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) text.append(buf, n);
  const int status = pclose(p);
  if (out) *out = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

bool on_path(const char* tool) { return shell(std::string("command -v ") + tool + " >/dev/null") == 0; }

}  // namespace

std::optional<std::string> emulated_hosts_unavailable() {
  if (geteuid() != 0)
    return "emulated hosts need root (network namespaces, veth links and tc shaping)";
  for (const char* tool : {"ip", "tc", "unshare"})
    if (!on_path(tool))
      return std::string("emulated hosts need `") + tool + "`, which is not on PATH (iproute2 has ip and tc, util-linux unshare)";
  std::string out;
  if (shell("ip netns list", &out) != 0)
    return "`ip netns list` failed (" + out + "): this kernel or container offers no network namespaces";
  return std::nullopt;
}

EmulatedHosts::EmulatedHosts(int hosts, int ranks_per_host, double link_Bps)
    : hosts_(hosts), per_host_(ranks_per_host), link_Bps_(link_Bps) {
  install_handlers();
  const int id = int(getpid() % 100000);
  prefix_ = fmt::format("tr{}", id);
  subnet_ = fmt::format("10.{}.{}", 100 + id % 100, (id / 100) % 250);
  // The hostfiles and the launch agent in a folder of our own: Open MPI splits plm_rsh_agent at
  // spaces, so the agent's path must not be the user's --out (a space there ended mpirun).
  char dir[] = "/tmp/trident-hosts-XXXXXX";
  if (!mkdtemp(dir)) throw std::runtime_error(std::string("cannot make a folder in /tmp: ") + std::strerror(errno));
  dir_ = dir;
  g_live = this;
  up_ = true;
  supervise_hosts(prefix_, hosts, dir_);  // removed by the supervisor if this process dies without stop()
  const std::string P = prefix_;
  // tbf: rate in bits; a small bucket (16 KiB, or 0.1 ms of traffic when that is more), so that
  // even a pipeline message of a few tens of KiB waits for the rate instead of passing as a burst.
  const double bits = link_Bps * 8;
  const long burst = std::max(16L << 10, long(link_Bps / 1e4));
  const std::string tbf = fmt::format("root tbf rate {:.0f}bit burst {} latency 200ms", bits, burst);
  std::vector<std::string> steps = {"ip link add " + P + "b type bridge",
                                    "ip addr add " + subnet_ + ".254/24 dev " + P + "b", "ip link set " + P + "b up"};
  for (int h = 0; h < hosts; ++h) {
    const std::string ns = fmt::format("{}-h{}", P, h), v = fmt::format("{}v{}", P, h), p = fmt::format("{}p{}", P, h);
    for (const std::string& s :
         {"ip netns add " + ns, "ip link add " + v + " type veth peer name " + p, "ip link set " + p + " netns " + ns,
          "ip link set " + v + " master " + P + "b", "ip link set " + v + " up", "ip -n " + ns + " link set lo up",
          fmt::format("ip -n {} addr add {}.{}/24 dev {}", ns, subnet_, h + 1, p), "ip -n " + ns + " link set " + p + " up",
          "tc qdisc add dev " + v + " " + tbf, "ip netns exec " + ns + " tc qdisc add dev " + p + " " + tbf})
      steps.push_back(s);
  }
  for (const std::string& s : steps) {
    std::string out;
    if (g_signal || shell(s, &out) != 0) {
      stop();
      throw std::runtime_error(g_signal ? "interrupted while making the emulated hosts (all removed)"
                                        : "`" + s + "` failed: " + out + "(everything made so far was removed)");
    }
  }
  // Open MPI's hostfile (one address per namespace) and the agent that enters a namespace.
  std::ofstream hostfile(dir_ + "/hostfile"), hostfile1(dir_ + "/hostfile-one-per-host"), agent(dir_ + "/launch-agent.sh");
  agent << "#!/bin/sh\n# Open MPI's launch agent for `trident rehearse`: enters the emulated host's network\n"
           "# namespace where ssh would log in to a host.\nhost=$1; shift\ncase \"$host\" in\n";
  for (int h = 0; h < hosts; ++h) {
    hostfile << fmt::format("{}.{} slots={}\n", subnet_, h + 1, per_host_);
    hostfile1 << fmt::format("{}.{} slots=1\n", subnet_, h + 1);
    agent << fmt::format("  {}.{}) ns={}-h{};;\n", subnet_, h + 1, P, h);
  }
  agent << "  *) echo \"launch-agent: unknown emulated host $host\" >&2; exit 1;;\nesac\n"
           "# Its own host name too (a UTS namespace): Open MPI names its shared-memory segments after the\n"
           "# host, and two daemons of one name would share them.\n"
           "exec ip netns exec \"$ns\" unshare --uts /bin/sh -c \"echo $ns > /proc/sys/kernel/hostname; $*\"\n";
  agent.close();
  std::filesystem::permissions(dir_ + "/launch-agent.sh", std::filesystem::perms::owner_all);
}

EmulatedHosts::~EmulatedHosts() { stop(); }

void EmulatedHosts::stop() {
  if (!up_) return;
  up_ = false;
  for (int h = 0; h < hosts_; ++h) {
    shell(fmt::format("ip netns del {}-h{}", prefix_, h));  // takes its veth end (and the pair) with it
    shell(fmt::format("ip link del {}v{}", prefix_, h));    // a pair not yet moved into its namespace
  }
  shell("ip link del " + prefix_ + "b");
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
  release_hosts(prefix_);
  if (g_live == this) g_live = nullptr;
}

std::vector<std::string> EmulatedHosts::mpirun_options() const {
  const std::string cidr = subnet_ + ".0/24";
  return {"--hostfile", dir_ + "/hostfile", "--mca", "plm_rsh_agent", dir_ + "/launch-agent.sh", "--mca", "btl",
          "self,vader,tcp", "--mca", "btl_tcp_if_include", cidr, "--mca", "oob_tcp_if_include", cidr};
}

std::vector<std::string> EmulatedHosts::mpirun_options_one_per_host() const {
  std::vector<std::string> o = mpirun_options();
  o[1] = dir_ + "/hostfile-one-per-host";
  return o;
}

std::string EmulatedHosts::describe() const {
  return fmt::format("{} network namespaces {}-h0..{}-h{} of {} ranks each on bridge {}b ({}.0/24), every veth end "
                     "shaped by tc tbf to {:.3f} GB/s per direction; latency not shaped (no netem)",
                     hosts_, prefix_, prefix_, hosts_ - 1, per_host_, prefix_, subnet_, link_Bps_ / 1e9);
}

int run_launcher(const std::vector<std::string>& argv, double limit_s, std::string* stderr_copy) {
  install_handlers();
  if (g_signal) return 128 + g_signal;
  std::fflush(stdout);
  std::fflush(stderr);
  int err_pipe[2] = {-1, -1};
  if (stderr_copy && pipe2(err_pipe, O_CLOEXEC) != 0) return 127;
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    if (stderr_copy) close(err_pipe[0]), close(err_pipe[1]);
    return 127;
  }
  if (pid == 0) {
    // SIGTERM when this process dies, however: mpirun then ends its ranks its own way.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(128 + SIGTERM);
    if (stderr_copy) dup2(err_pipe[1], STDERR_FILENO);  // dup2 clears O_CLOEXEC on the copy
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "cannot start %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  g_child = pid;
  supervise_process(pid);
  // The child's standard error, passed on to ours and kept (the last 64 KiB). Non-blocking: a
  // grandchild that outlives the launcher may hold the pipe open, so the end is the child's exit.
  if (stderr_copy) {
    close(err_pipe[1]);
    fcntl(err_pipe[0], F_SETFL, fcntl(err_pipe[0], F_GETFL) | O_NONBLOCK);
  }
  auto drain = [&] {
    if (!stderr_copy) return;
    char buf[4096];
    for (ssize_t n; (n = read(err_pipe[0], buf, sizeof buf)) > 0;) {
      (void)!write(STDERR_FILENO, buf, size_t(n));
      stderr_copy->append(buf, size_t(n));
      if (stderr_copy->size() > (128u << 10)) stderr_copy->erase(0, stderr_copy->size() - (64u << 10));
    }
  };
  // Bounded: past limit_s SIGTERM, and SIGKILL 10 s later if it still runs.
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - start).count(); };
  int status = 0;
  bool timed_out = false;
  for (;;) {
    drain();
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) break;
    if (limit_s > 0 && !timed_out && elapsed() > limit_s) {
      timed_out = true;
      kill(pid, SIGTERM);
    } else if (timed_out && elapsed() > limit_s + 10) {
      kill(pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  g_child = 0;
  release_process(pid);
  if (stderr_copy) drain(), close(err_pipe[0]);
  if (timed_out) return kLauncherTimedOut;
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

std::string self_executable() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("trident") : p.string();
}

int interrupting_signal() { return g_signal; }

}  // namespace trident::measure
