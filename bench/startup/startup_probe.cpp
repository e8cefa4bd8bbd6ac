/* Start-up of a command: runs it N times from this small process (so the child's peak resident
 * memory, getrusage's ru_maxrss, is the command's own and not a big parent's inherited through
 * fork) and prints the median wall time and the median peak resident memory.
 * usage: startup_probe N COMMAND [ARGS...]   prints: "<ms> <MiB>" */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  if (argc < 3) return fprintf(stderr, "usage: startup_probe N COMMAND [ARGS...]\n"), 2;
  const int n = atoi(argv[1]);
  if (n < 1 || n > 1000) return fprintf(stderr, "startup_probe: N must be 1 to 1000\n"), 2;
  double* ms = static_cast<double*>(calloc(n, sizeof *ms));
  double* mib = static_cast<double*>(calloc(n, sizeof *mib));
  for (int i = 0; i < n; ++i) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const pid_t pid = fork();
    if (pid == 0) {
      const int null = open("/dev/null", O_WRONLY);
      dup2(null, 1), dup2(null, 2);
      execv(argv[2], argv + 2);
      _exit(127);
    }
    int status = 0;
    struct rusage ru;
    if (pid < 0 || wait4(pid, &status, 0, &ru) != pid) return perror("startup_probe"), 1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      return fprintf(stderr, "startup_probe: %s failed (status %d)\n", argv[2], status), 1;
    ms[i] = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    mib[i] = ru.ru_maxrss / 1024.0;
  }
  qsort(ms, n, sizeof *ms, by_value);
  qsort(mib, n, sizeof *mib, by_value);
  printf("%.3f %.2f\n", ms[n / 2], mib[n / 2]);
  return 0;
}
