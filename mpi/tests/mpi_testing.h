/* What the MPI companion's tests share: counted checks that name the rank
 * and line of a failure, and a watchdog that ends a rank that hangs. */
#ifndef SYRAH_MPI_TESTING_H
#define SYRAH_MPI_TESTING_H

#include <syrah_mpi.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int checks = 0, failures = 0, rank = 0, size = 1;

#define CHECK(cond, ...)                                          \
  do {                                                            \
    ++checks;                                                     \
    if (!(cond)) {                                                \
      ++failures;                                                 \
      fprintf(stderr, "FAIL rank %d line %d: ", rank, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                               \
      fprintf(stderr, "\n");                                      \
    }                                                             \
  } while (0)

#define OK(call) CHECK((call) == SYRAH_SUCCESS, "%s: %s", #call, syrah_last_error_message())

static void watchdog_fired(int sig) {
  static const char msg[] = "FAIL watchdog: an MPI test rank hung\n";
  (void)sig;
  if (write(2, msg, sizeof msg - 1) < 0) _exit(3);
  _exit(2);
}

/* Ends the process with a failure if it is still running after `seconds`. */
static void watchdog(unsigned seconds) {
  signal(SIGALRM, watchdog_fired);
  alarm(seconds);
}

#endif
