/* A small test harness for Syrah's C tests: checks that count and report
 * failures with the library's error message, a loop over every device of
 * every platform that says what it skips and why, and what the seeded
 * random checkers share (numbers, settings from the environment). */
#ifndef SYRAH_TESTING_H
#define SYRAH_TESTING_H

#include <syrah.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int t_checks = 0;
static int t_failures = 0;
static int t_skips = 0;
static const char *t_device = "";
static int t_tracing = -1;

/* With SYRAH_TEST_TRACE set, every check prints its line first, so a hang
 * shows where it is. */
#define T_TRACE()                                                        \
  do {                                                                   \
    if (t_tracing < 0) t_tracing = getenv("SYRAH_TEST_TRACE") != NULL;   \
    if (t_tracing) {                                                     \
      printf("trace %s:%d\n", __FILE__, __LINE__);                        \
      fflush(stdout);                                                    \
    }                                                                    \
  } while (0)

#define T_FAIL(...)                                                     \
  do {                                                                  \
    ++t_failures;                                                       \
    fprintf(stderr, "FAIL %s:%d [%s] ", __FILE__, __LINE__, t_device);  \
    fprintf(stderr, __VA_ARGS__);                                       \
    fprintf(stderr, "\n");                                              \
  } while (0)

/* The call must succeed. */
#define EXPECT_OK(call)                                                               \
  do {                                                                                  \
    T_TRACE();                                                                                \
    syrah_status t_s_ = (call);                                                       \
    ++t_checks;                                                                       \
    if (t_s_ != SYRAH_SUCCESS)                                                        \
      T_FAIL("%s -> %s: %s", #call, syrah_status_name(t_s_), syrah_last_error_message()); \
  } while (0)

/* The call must fail with `expected` and a message containing `needle`. */
#define EXPECT_ERR(call, expected, needle)                                              \
  do {                                                                                  \
    T_TRACE();                                                                                  \
    syrah_status t_s_ = (call);                                                         \
    ++t_checks;                                                                         \
    if (t_s_ != (expected))                                                             \
      T_FAIL("%s -> %s (%s), expected %s", #call, syrah_status_name(t_s_),              \
             syrah_last_error_message(), syrah_status_name(expected));                  \
    else if ((needle)[0] && !strstr(syrah_last_error_message(), (needle)))              \
      T_FAIL("%s: message '%s' lacks '%s'", #call, syrah_last_error_message(), (needle)); \
  } while (0)

#define EXPECT_TRUE(cond)                           \
  do {                                              \
    ++t_checks;                                     \
    if (!(cond)) T_FAIL("expected %s", #cond);      \
  } while (0)

#define EXPECT_EQ(a, b)                                                              \
  do {                                                                               \
    unsigned long long t_a_ = (unsigned long long)(a), t_b_ = (unsigned long long)(b); \
    ++t_checks;                                                                      \
    if (t_a_ != t_b_) T_FAIL("%s == %llu, expected %s == %llu", #a, t_a_, #b, t_b_); \
  } while (0)

/* Stops the test on failure of a call later steps depend on. */
#define REQUIRE_OK(call)                                                            \
  do {                                                                                  \
    T_TRACE();                                                                              \
    syrah_status t_s_ = (call);                                                     \
    ++t_checks;                                                                     \
    if (t_s_ != SYRAH_SUCCESS) {                                                    \
      T_FAIL("%s -> %s: %s", #call, syrah_status_name(t_s_), syrah_last_error_message()); \
      return;                                                                       \
    }                                                                               \
  } while (0)

#if defined(_POSIX_C_SOURCE) && _POSIX_C_SOURCE >= 199309L
/* Sleeps `ms` milliseconds (for tests that ask for POSIX first). */
static inline void t_sleep_ms(long ms) {
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (ms % 1000) * 1000000L;
  nanosleep(&ts, NULL);
}
#endif

static inline void t_skip(const char *what, const char *why) {
  ++t_skips;
  printf("SKIP [%s] %s: %s\n", t_device, what, why);
}

static inline bool t_has(const syrah_device *d, syrah_aspect a) {
  bool v = false;
  return syrah_device_has_aspect(d, a, &v) == SYRAH_SUCCESS && v;
}

/* Whether buffers on `d` live in USM memory with a device address. */
static inline bool t_buffer_pointers(const syrah_device *d) {
  uint64_t v = 0;
  return syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_BUFFER_POINTERS, &v) == SYRAH_SUCCESS && v != 0;
}

typedef void (*t_device_fn)(const syrah_device *device);

/* The label of device `d` in messages: "P.D name, USM strategy". */
static inline const char *t_label(const syrah_device *d) {
  static char label[512];
  char name[256] = "", strategy[64] = "";
  uint64_t p = 0, i = 0;
  syrah_device_get_info_string(d, SYRAH_DEVICE_INFO_NAME, name, sizeof name, NULL);
  syrah_device_get_info_string(d, SYRAH_DEVICE_INFO_USM_STRATEGY_NAME, strategy, sizeof strategy, NULL);
  syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_PLATFORM_INDEX, &p);
  syrah_device_get_info_u64(d, SYRAH_DEVICE_INFO_DEVICE_INDEX, &i);
  snprintf(label, sizeof label, "%llu.%llu %s, USM %s", (unsigned long long)p, (unsigned long long)i, name,
           strategy);
  return label;
}

/* Runs `fn` once per device found, labelling failures with the device. */
static inline void t_for_each_device(t_device_fn fn) {
  size_t n = 0, i;
  const syrah_device *list[64];
  if (syrah_get_devices(list, 64, &n) != SYRAH_SUCCESS || n == 0) {
    T_FAIL("no device to test on: %s", syrah_last_error_message());
    return;
  }
  for (i = 0; i < n && i < 64; ++i) {
    t_device = t_label(list[i]);
    printf("== device %s\n", t_device);
    fn(list[i]);
  }
  t_device = "";
}

/* A 1D buffer of `n` 4-byte elements over `host` (may be NULL) with
 * ownership `own`. */
static inline syrah_buffer_desc t_desc1(size_t n, void *host, syrah_host_ownership own) {
  syrah_buffer_desc d;
  memset(&d, 0, sizeof d);
  d.element_size = 4;
  d.dimensions = 1;
  d.range[0] = n;
  d.host_pointer = host;
  d.ownership = own;
  return d;
}

/* An accessor over the whole of `b` with mode `m`. */
static inline syrah_accessor t_whole(syrah_buffer *b, syrah_access_mode m) {
  syrah_accessor a;
  memset(&a, 0, sizeof a);
  a.buffer = b;
  a.mode = m;
  return a;
}

/* An accessor of `b` with mode `m` over elements [off, off + len) of a 1D
 * buffer. */
static inline syrah_accessor t_window(syrah_buffer *b, syrah_access_mode m, size_t off, size_t len) {
  syrah_accessor a = t_whole(b, m);
  a.offset[0] = off;
  a.range[0] = len;
  return a;
}

/* Runs kernel `k(buffer, int v)` over `n` work-items with `b` read-write. */
static inline syrah_status t_launch_rw(syrah_queue *q, syrah_kernel *k, syrah_buffer *b, size_t n, int v,
                                       syrah_event **ev) {
  syrah_accessor a = t_whole(b, SYRAH_ACCESS_READ_WRITE);
  syrah_range r = syrah_range_1d(n);
  syrah_kernel_arg args[2];
  args[0].kind = SYRAH_ARG_ACCESSOR;
  args[0].size = 0;
  args[0].value = NULL;
  args[1] = syrah_arg_value(&v, sizeof v);
  return syrah_queue_submit_kernel(q, k, &r, &a, 1, args, 2, NULL, 0, ev);
}

/* The whole of a file, NUL-terminated (its length in `*len`), or NULL. */
static inline char *t_slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  char *buf;
  long n;
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  fseek(f, 0, SEEK_SET);
  buf = n < 0 ? NULL : (char *)malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  if (buf) buf[n] = '\0';
  fclose(f);
  *len = buf ? (size_t)n : 0;
  return buf;
}

/* The next number of the xorshift generator whose state is `*state`
 * (never 0). */
static inline uint32_t t_rnd(uint64_t *state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return (uint32_t)(*state >> 11);
}

/* A generator state from `seed` (never 0). */
static inline uint64_t t_seed_state(uint64_t seed) {
  uint64_t s = seed * 2654435761u + 0x9e3779b97f4a7c15ull;
  return s ? s : 1;
}

/* Environment variable `name` as an unsigned number, or `dflt` when unset
 * or empty. */
static inline uint64_t t_env_u64(const char *name, uint64_t dflt) {
  const char *v = getenv(name);
  return v && *v ? strtoull(v, NULL, 10) : dflt;
}

/* The random checkers' host task: d[i] = d[i] * 11 + s[i] + salt over
 * `len` elements, `s` and `d` being its first and second accessors; and
 * the same on the CPU model. */
typedef struct {
  size_t len;
  uint32_t salt;
} t_mix;

static inline syrah_status t_run_mix(const syrah_host_task_context *c, void *user) {
  const t_mix *h = (const t_mix *)user;
  uint32_t *s = NULL, *d = NULL;
  size_t i;
  syrah_status st = syrah_host_task_get_pointer(c, 0, (void **)&s);
  if (st == SYRAH_SUCCESS) st = syrah_host_task_get_pointer(c, 1, (void **)&d);
  if (st != SYRAH_SUCCESS) return st;
  for (i = 0; i < h->len; ++i) d[i] = d[i] * 11u + s[i] + h->salt;
  return SYRAH_SUCCESS;
}

static inline void t_model_mix(const uint32_t *s, uint32_t *d, size_t len, uint32_t salt) {
  size_t i;
  for (i = 0; i < len; ++i) d[i] = d[i] * 11u + s[i] + salt;
}

/* Prints the closing line and gives the exit status. */
static inline int t_finish(const char *name) {
  printf("%s: %d checks, %d passed, %d failed, %d skipped\n", name, t_checks,
         t_checks - t_failures, t_failures, t_skips);
  return t_failures == 0 ? 0 : 1;
}

/* A seeded random checker: its program, the prefix of its environment
 * variables (PREFIX_SEED, PREFIX_STEPS), the steps of each run, and one
 * run on a device from a seed, which returns 1 when it passed, 0 when a
 * check failed, -1 when it could not be set up (having said why). */
typedef struct {
  const char *program;
  const char *prefix;
  int steps;
  int (*run)(const syrah_device *device, uint64_t seed);
} t_checker;

/* Reads a checker's command line and environment: whether it was asked
 * to `stress`, its first seed (PREFIX_SEED; the time when stressing, else
 * 1) and its steps (PREFIX_STEPS; `normal` or `stressed` unless set, at
 * most `most`), kept in `c`. */
static inline bool t_checker_args(t_checker *c, int argc, char **argv, int normal, int stressed, int most,
                                  uint64_t *first_seed) {
  char name[96];
  bool stress = argc > 1 && strcmp(argv[1], "stress") == 0;
  snprintf(name, sizeof name, "%s_SEED", c->prefix);
  *first_seed = t_env_u64(name, stress ? (uint64_t)time(NULL) : 1);
  snprintf(name, sizeof name, "%s_STEPS", c->prefix);
  c->steps = (int)t_env_u64(name, (uint64_t)(stress ? stressed : normal));
  if (c->steps < 1 || c->steps > most) c->steps = most;
  return stress;
}

/* Prints the line that reproduces the run of `c` from `seed` that failed
 * on the device being tested. */
static inline void t_reproduce(const t_checker *c, uint64_t seed) {
  printf("reproduce: %s_SEED=%llu %s_STEPS=%d %s (on device %s)\n", c->prefix, (unsigned long long)seed,
         c->prefix, c->steps, c->program, t_device);
}

/* Runs `c` on `d` from `seed`, saying how to reproduce it where a check
 * failed. The run's result. */
static inline int t_checked_run(const t_checker *c, const syrah_device *d, uint64_t seed) {
  int r = c->run(d, seed);
  if (r == 0) t_reproduce(c, seed);
  return r;
}

/* The stress mode of `c`: for SYRAH_STRESS_SECONDS (default 30), runs
 * from seed `first_seed` on, device by device in turn over those `usable`
 * accepts (NULL: every device; each other one is named as skipped,
 * `unusable` saying why), until a check fails or a run cannot be set up.
 * Gives the exit status. */
static inline int t_stress(const t_checker *c, uint64_t first_seed, bool (*usable)(const syrah_device *),
                           const char *unusable) {
  double seconds = (double)t_env_u64("SYRAH_STRESS_SECONDS", 30);
  time_t start = time(NULL);
  const syrah_device *list[64];
  size_t n = 0, i, ok = 0;
  int runs = 0;
  char title[128];
  snprintf(title, sizeof title, "%s stress", c->program);
  printf("== random runs for %.0f s from seed %llu, %d steps each, device by device in turn\n", seconds,
         (unsigned long long)first_seed, c->steps);
  if (syrah_get_devices(list, 64, &n) != SYRAH_SUCCESS || n == 0) {
    T_FAIL("no device to test on: %s", syrah_last_error_message());
    return t_finish(title);
  }
  if (n > 64) n = 64;
  for (i = 0; i < n; ++i) {
    t_device = t_label(list[i]);
    if (!usable || usable(list[i]))
      list[ok++] = list[i];
    else
      t_skip("random runs", unusable);
  }
  for (; ok > 0 && difftime(time(NULL), start) < seconds && t_failures == 0; ++runs) {
    const syrah_device *d = list[(size_t)runs % ok];
    t_device = t_label(d);
    if (t_checked_run(c, d, first_seed + (uint64_t)runs) < 0) break;
  }
  t_device = "";
  printf("%d random runs\n", runs);
  return t_finish(title);
}

/* One context per device, kept for the program's runs: NVIDIA's OpenCL
 * driver keeps 20–30 MiB of host memory for every context made and
 * released (every OpenCL object released; measured on the H100), so a
 * stress run that made one per run ran out of host memory after some
 * hundreds. Released by `t_checker_main`. */
typedef struct {
  const syrah_device *device[64];
  syrah_context *context[64];
  int n;
} t_contexts;

static inline t_contexts *t_kept_contexts(void) {
  static t_contexts kept;
  return &kept;
}

/* The kept context of `d` (made on first use; NULL, having said why, when
 * it cannot be made). */
static inline syrah_context *t_context_of(const syrah_device *d) {
  t_contexts *k = t_kept_contexts();
  int i;
  for (i = 0; i < k->n; ++i)
    if (k->device[i] == d) return k->context[i];
  if (k->n == 64) {
    T_FAIL("more than 64 devices");
    return NULL;
  }
  if (syrah_context_create(&d, 1, &k->context[k->n]) != SYRAH_SUCCESS) {
    T_FAIL("context: %s", syrah_last_error_message());
    return NULL;
  }
  k->device[k->n] = d;
  return k->context[k->n++];
}

static inline void t_release_contexts(void) {
  t_contexts *k = t_kept_contexts();
  while (k->n > 0) EXPECT_OK(syrah_context_release(k->context[--k->n]));
}

/* What `t_checker_main` runs on each device. */
typedef struct {
  const t_checker *c;
  uint64_t first_seed;
  int seeds;
  bool (*usable)(const syrah_device *);
  const char *unusable;
} t_checker_plan;

static inline t_checker_plan *t_plan(void) {
  static t_checker_plan plan;
  return &plan;
}

static inline void t_plan_device(const syrah_device *d) {
  const t_checker_plan *p = t_plan();
  int i;
  if (p->usable && !p->usable(d)) {
    t_skip("random runs", p->unusable);
    return;
  }
  for (i = 0; i < p->seeds; ++i)
    if (t_checked_run(p->c, d, p->first_seed + (uint64_t)i) < 0) break;
}

/* The main of a seeded random checker: `seeds` runs per device from
 * `first_seed` (those `usable` rejects named as skipped, `unusable` saying
 * why), or with `stress`, `t_stress`. Gives the exit status. */
static inline int t_checker_main(const t_checker *c, bool stress, uint64_t first_seed, int seeds,
                                 bool (*usable)(const syrah_device *), const char *unusable) {
  t_checker_plan *p = t_plan();
  int r;
  if (stress) {
    r = t_stress(c, first_seed, usable, unusable);
    t_release_contexts();
    return r;
  }
  p->c = c;
  p->first_seed = first_seed;
  p->seeds = seeds;
  p->usable = usable;
  p->unusable = unusable;
  t_for_each_device(t_plan_device);
  t_release_contexts();
  return t_finish(c->program);
}

#endif
