// The supervisor of a rehearsal's launchers and emulated hosts (see launch_supervisor.h).
#include "runtime/measure/launch_supervisor.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

namespace trident::measure {

namespace {

// The supervisor: reads "pid N", "unpid N", "hosts PREFIX H", "unhosts PREFIX" until the socket
// closes, then ends what is still watched (hosts: prefix, count and their files' folder). Process trees are read from /proc (no ps needed).
constexpr const char* kScript = R"SH(trap '' INT TERM HUP QUIT PIPE
pids=; hosts=
while read -r verb a b c; do
  case $verb in
    pid) pids="$pids $a";;
    unpid) n=; for p in $pids; do [ "$p" = "$a" ] || n="$n $p"; done; pids=$n;;
    hosts) hosts="$hosts $a:$b:$c";;
    unhosts) n=; for h in $hosts; do [ "${h%%:*}" = "$a" ] || n="$n $h"; done; hosts=$n;;
  esac
done
[ -z "$pids$hosts" ] && exit 0
kids() {
  for s in /proc/[0-9]*/stat; do
    read -r l 2>/dev/null < "$s" || continue
    r=${l##*) }; r=${r#* }
    if [ "${r%% *}" = "$1" ]; then p=${s#/proc/}; echo "${p%/stat}"; fi
  done
}
tree() { for c in $(kids "$1"); do tree "$c"; done; echo "$1"; }
count() { r=${1#*:}; echo "${r%%:*}"; }
nspids() {
  for h in $hosts; do i=0
    while [ "$i" -lt "$(count "$h")" ]; do ip netns pids "${h%%:*}-h$i" 2>/dev/null; i=$((i + 1)); done
  done
}
all=; for p in $pids; do all="$all $(tree "$p")"; done
all="$all $(nspids)"
echo "trident: the process that started them is gone; ending its launcher (pids$pids) and removing its emulated hosts (${hosts:-none})" >&2
kill -TERM $all 2>/dev/null
i=0; while [ "$i" -lt 50 ] && kill -0 $all 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
kill -KILL $all $(nspids) 2>/dev/null
for h in $hosts; do
  p=${h%%:*}; i=0
  while [ "$i" -lt "$(count "$h")" ]; do ip netns del "$p-h$i" 2>/dev/null; ip link del "${p}v$i" 2>/dev/null; i=$((i + 1)); done
  ip link del "${p}b" 2>/dev/null
  case ${h##*:} in /tmp/trident-hosts-*) rm -rf -- "${h##*:}";; esac
done
exit 0
)SH";

std::mutex g_mutex;
int g_socket = -1;
pid_t g_supervisor = 0;
bool g_tried = false;

// Starts the supervisor (under g_mutex). Between fork and exec the child calls only
// async-signal-safe functions: this process may have threads (OpenBLAS's pool).
void start() {
  if (g_tried) return;
  g_tried = true;
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return;
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]), close(fds[1]);
    return;
  }
  if (pid == 0) {
    setsid();  // its own session: a signal to the caller's process group does not reach it
    dup2(fds[1], 0);
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 1);
    execl("/bin/sh", "sh", "-c", kScript, static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  g_socket = fds[0];
  g_supervisor = pid;
}

void tell(const std::string& line) {
  std::lock_guard<std::mutex> lock(g_mutex);
  start();
  if (g_socket < 0) return;
  const std::string text = line + "\n";
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = send(g_socket, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the supervisor is gone: this process's own handlers still clean up
    done += size_t(n);
  }
}

}  // namespace

void supervise_process(pid_t pid) { tell(fmt::format("pid {}", pid)); }
void release_process(pid_t pid) { tell(fmt::format("unpid {}", pid)); }
void supervise_hosts(const std::string& prefix, int hosts, const std::string& folder) {
  tell(fmt::format("hosts {} {} {}", prefix, hosts, folder));
}
void release_hosts(const std::string& prefix) { tell("unhosts " + prefix); }

pid_t supervisor_pid() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_supervisor;
}

}  // namespace trident::measure
