/* A seeded, randomised checker of USM copies through ordinary (malloc'd)
 * host memory, against a CPU model: device allocations and host arrays
 * take kernels, copies each way and between host arrays, and host tasks,
 * in one order that hops between two in-order queues through events, with
 * long-running kernels in front so that copies land behind running work
 * (on the CUDA back end, through pinned blocks landed by a thread, in
 * chunks for large copies). At random points and at the end every array
 * is compared word for word with the model.
 *
 *   test_usm_order          one run per device (seed 1 unless set)
 *   test_usm_order stress   new seeds for SYRAH_STRESS_SECONDS (30 unless set)
 *
 * SYRAH_USM_ORDER_SEED sets the first seed, SYRAH_USM_ORDER_STEPS the steps
 * of a run; a failure prints the line that reproduces it. To narrow one
 * down, SYRAH_USM_ORDER_OPS keeps only the kinds of step whose bits it sets
 * (1 busy kernel, 2 add kernel, 4 device to host, 8 host to device, 16
 * host to host, 32 host task) and SYRAH_USM_ORDER_QUEUES=1 uses one queue.
 * SYRAH_USM_ORDER_PINNED=1 makes the host arrays pinned memory
 * (syrah_malloc_pinned) instead of malloc'd. */
#include "testing.h"

#include <stdint.h>
#include <time.h>

/* Words of each array: 3 MiB, so that copies span several landing chunks. */
enum { N = 768 * 1024, ARRAYS = 2, MAX_STEPS = 4096 };

static const char *kSource =
    "__kernel void add(__global uint *a, uint v) { a[get_global_id(0)] += v; }\n"
    "__kernel void busy(__global uint *s, uint n) {\n"
    "  uint x = s[get_global_id(0)];\n"
    "  for (uint k = 0; k < n; ++k) x = x * 1664525u + 1013904223u;\n"
    "  s[get_global_id(0)] = x;\n"
    "}\n";

typedef struct {
  const syrah_device *dev;
  syrah_queue *q[2];
  syrah_context *ctx;
  syrah_program *prog;
  syrah_kernel *add, *busy;
  uint32_t *d[ARRAYS], *scratch;
  uint32_t *h[ARRAYS];
  uint32_t *md[ARRAYS], *mh[ARRAYS]; /* the model */
  uint32_t *back;
} env;

/* What a host task does: add `v` to words [off, off + len) of `p`. */
typedef struct {
  uint32_t *p;
  size_t off, len;
  uint32_t v;
} task_job;

static task_job jobs[MAX_STEPS];

static syrah_status run_job(const syrah_host_task_context *c, void *user) {
  task_job *j = (task_job *)user;
  size_t i;
  (void)c;
  for (i = 0; i < j->len; ++i) j->p[j->off + i] += j->v;
  return SYRAH_SUCCESS;
}

static uint64_t first_seed;
static int steps;
static unsigned ops_mask = 63, queues = 2, pinned = 0;

static void env_close(env *e) {
  int i;
  for (i = 0; i < ARRAYS; ++i) {
    if (e->d[i]) syrah_free(e->ctx, e->d[i]);
    if (pinned && e->h[i])
      syrah_free(e->ctx, e->h[i]);
    else
      free(e->h[i]);
    free(e->md[i]);
    free(e->mh[i]);
  }
  if (e->scratch) syrah_free(e->ctx, e->scratch);
  free(e->back);
  if (e->add) syrah_kernel_release(e->add);
  if (e->busy) syrah_kernel_release(e->busy);
  if (e->prog) syrah_program_release(e->prog);
  for (i = 0; i < 2; ++i)
    if (e->q[i]) syrah_queue_release(e->q[i]);
  if (e->ctx) syrah_context_release(e->ctx);
  memset(e, 0, sizeof *e);
}

static int env_open(env *e, const syrah_device *d) {
  int i;
  memset(e, 0, sizeof *e);
  e->dev = d;
  if (syrah_queue_create(NULL, d, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &e->q[0]) != SYRAH_SUCCESS ||
      syrah_queue_get_context(e->q[0], &e->ctx) != SYRAH_SUCCESS ||
      syrah_queue_create(e->ctx, d, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &e->q[1]) != SYRAH_SUCCESS ||
      syrah_program_create_from_source(e->ctx, kSource, NULL, &e->prog) != SYRAH_SUCCESS ||
      syrah_kernel_create(e->prog, "add", &e->add) != SYRAH_SUCCESS ||
      syrah_kernel_create(e->prog, "busy", &e->busy) != SYRAH_SUCCESS ||
      syrah_malloc_device(e->ctx, d, 4096 * sizeof(uint32_t), (void **)&e->scratch) != SYRAH_SUCCESS)
    return 0;
  for (i = 0; i < ARRAYS; ++i) {
    if (syrah_malloc_device(e->ctx, d, N * sizeof(uint32_t), (void **)&e->d[i]) != SYRAH_SUCCESS) return 0;
    if (pinned) {
      if (syrah_malloc_pinned(e->ctx, N * sizeof(uint32_t), (void **)&e->h[i]) != SYRAH_SUCCESS) return 0;
      memset(e->h[i], 0, N * sizeof(uint32_t));
    } else {
      e->h[i] = (uint32_t *)calloc(N, sizeof(uint32_t));
    }
    e->md[i] = (uint32_t *)calloc(N, sizeof(uint32_t));
    e->mh[i] = (uint32_t *)calloc(N, sizeof(uint32_t));
    if (!e->h[i] || !e->md[i] || !e->mh[i]) return 0;
    if (syrah_queue_memset(e->q[0], e->d[i], 0, N * sizeof(uint32_t), NULL, 0, NULL) != SYRAH_SUCCESS) return 0;
  }
  e->back = (uint32_t *)malloc(N * sizeof(uint32_t));
  return e->back != NULL && syrah_queue_wait(e->q[0]) == SYRAH_SUCCESS;
}

/* A span of at most N words: small (up to 16 Ki words) or large, at a
 * random offset. */
static void span(uint64_t *rng, size_t *off, size_t *len) {
  size_t most = t_rnd(rng) % 2 ? 16384 : N;
  *len = 1 + t_rnd(rng) % most;
  *off = t_rnd(rng) % (N - *len + 1);
}

/* The first word where `got` and `want` differ, or -1. */
static long first_difference(const uint32_t *got, const uint32_t *want) {
  size_t i;
  for (i = 0; i < N; ++i)
    if (got[i] != want[i]) return (long)i;
  return -1;
}

/* Waits for everything and compares every array with the model. */
static int check_all(env *e, syrah_event **last, uint64_t seed, int step) {
  int i, ok = 1;
  if (*last) {
    EXPECT_OK(syrah_event_wait(*last));
    syrah_event_release(*last);
    *last = NULL;
  }
  for (i = 0; i < ARRAYS; ++i) {
    long at = first_difference(e->h[i], e->mh[i]);
    if (at >= 0) {
      T_FAIL("seed %llu step %d: host array %d word %ld is %u, the model says %u", (unsigned long long)seed,
             step, i, at, e->h[i][at], e->mh[i][at]);
      ok = 0;
    }
    EXPECT_OK(syrah_queue_memcpy(e->q[0], e->back, e->d[i], N * sizeof(uint32_t), NULL, 0, NULL));
    EXPECT_OK(syrah_queue_wait(e->q[0]));
    at = first_difference(e->back, e->md[i]);
    if (at >= 0) {
      T_FAIL("seed %llu step %d: device array %d word %ld is %u, the model says %u", (unsigned long long)seed,
             step, i, at, e->back[at], e->md[i][at]);
      ok = 0;
    }
  }
  EXPECT_TRUE(ok);
  return ok;
}

/* One random run; 0 if the arrays ever differed from the model. */
static int random_run(env *e, uint64_t seed, int nsteps) {
  uint64_t rng = t_seed_state(seed);
  syrah_event *last = NULL;
  int s, ok = 1;
  for (s = 0; s < nsteps && ok; ++s) {
    syrah_queue *q = e->q[t_rnd(&rng) % 4 == 0 && queues > 1];
    int a = (int)(t_rnd(&rng) % ARRAYS), b = (int)(t_rnd(&rng) % ARRAYS);
    size_t off, off2, len, i;
    syrah_event *ev = NULL;
    const syrah_event *dep[1];
    size_t ndep = last ? 1 : 0;
    syrah_status st;
    dep[0] = last;
    span(&rng, &off, &len);
    off2 = t_rnd(&rng) % (N - len + 1);
    unsigned kind = t_rnd(&rng) % 7;
    if (!(ops_mask >> (kind <= 2 ? kind : kind - 1) & 1)) {
      --s;
      continue;
    }
    switch (kind) {
      case 0: { /* a kernel that keeps the device busy, touching no array */
        uint32_t n = 2000 + t_rnd(&rng) % 20000;
        syrah_kernel_arg args[2];
        syrah_range r = syrah_range_1d(4096);
        args[0] = syrah_arg_usm(e->scratch);
        args[1] = syrah_arg_value(&n, sizeof n);
        st = syrah_queue_launch(q, e->busy, &r, args, 2, dep, ndep, &ev);
        break;
      }
      case 1: { /* a kernel adding to a whole device array */
        uint32_t v = 1 + t_rnd(&rng) % 1000;
        syrah_kernel_arg args[2];
        syrah_range r = syrah_range_1d(N);
        args[0] = syrah_arg_usm(e->d[a]);
        args[1] = syrah_arg_value(&v, sizeof v);
        st = syrah_queue_launch(q, e->add, &r, args, 2, dep, ndep, &ev);
        for (i = 0; i < N; ++i) e->md[a][i] += v;
        break;
      }
      case 2:
      case 3: /* device to ordinary memory */
        st = syrah_queue_memcpy(q, e->h[b] + off2, e->d[a] + off, len * sizeof(uint32_t), dep, ndep, &ev);
        memcpy(e->mh[b] + off2, e->md[a] + off, len * sizeof(uint32_t));
        break;
      case 4: /* ordinary memory to the device */
        st = syrah_queue_memcpy(q, e->d[a] + off2, e->h[b] + off, len * sizeof(uint32_t), dep, ndep, &ev);
        memcpy(e->md[a] + off2, e->mh[b] + off, len * sizeof(uint32_t));
        break;
      case 5: /* ordinary memory to ordinary memory (another array) */
        if (a == b) b = (a + 1) % ARRAYS;
        st = syrah_queue_memcpy(q, e->h[b] + off2, e->h[a] + off, len * sizeof(uint32_t), dep, ndep, &ev);
        memcpy(e->mh[b] + off2, e->mh[a] + off, len * sizeof(uint32_t));
        break;
      default: { /* a host task changing ordinary memory */
        syrah_host_task task;
        task_job *j = &jobs[s];
        j->p = e->h[b];
        j->off = off;
        j->len = len;
        j->v = 1 + t_rnd(&rng) % 1000;
        memset(&task, 0, sizeof task);
        task.run = run_job;
        task.user_data = j;
        st = syrah_queue_submit_host_tasks(q, NULL, 0, &task, 1, dep, ndep, &ev);
        for (i = 0; i < len; ++i) e->mh[b][off + i] += j->v;
        break;
      }
    }
    if (st != SYRAH_SUCCESS) {
      T_FAIL("seed %llu step %d: %s", (unsigned long long)seed, s, syrah_last_error_message());
      ok = 0;
      break;
    }
    if (last) syrah_event_release(last);
    last = ev;
    if (t_rnd(&rng) % 16 == 0) ok = check_all(e, &last, seed, s);
  }
  if (ok) ok = check_all(e, &last, seed, nsteps);
  if (last) {
    syrah_event_wait(last);
    syrah_event_release(last);
  }
  syrah_queue_wait(e->q[0]);
  syrah_queue_wait(e->q[1]);
  return ok;
}

/* A fixed case: queue 0 copies device array 0 into ordinary memory behind
 * a long kernel; queue 1 runs a kernel after that copy, then copies part
 * of that memory into device array 1 after its own kernel only (the
 * queue's order covers the rest). That copy must see what queue 0 copied,
 * not what the memory held when it was enqueued. 0 if it did not. */
static int across_queues(env *e) {
  enum { PART = 4096 };
  uint32_t v = 7, n_long = 2000000, n_short = 1000;
  syrah_kernel_arg args[2];
  syrah_range one = syrah_range_1d(1), all = syrah_range_1d(N);
  syrah_event *ev = NULL, *copied = NULL, *after = NULL;
  const syrah_event *dep[1];
  size_t i;
  int ok = 1;
  args[0] = syrah_arg_usm(e->d[0]);
  args[1] = syrah_arg_value(&v, sizeof v);
  EXPECT_OK(syrah_queue_launch(e->q[0], e->add, &all, args, 2, NULL, 0, NULL));
  args[0] = syrah_arg_usm(e->scratch);
  args[1] = syrah_arg_value(&n_long, sizeof n_long);
  EXPECT_OK(syrah_queue_launch(e->q[0], e->busy, &one, args, 2, NULL, 0, &ev));
  dep[0] = ev;
  EXPECT_OK(syrah_queue_memcpy(e->q[0], e->h[0], e->d[0], N * sizeof(uint32_t), dep, 1, &copied));
  args[1] = syrah_arg_value(&n_short, sizeof n_short);
  dep[0] = copied;
  EXPECT_OK(syrah_queue_launch(e->q[1], e->busy, &one, args, 2, dep, 1, &after));
  dep[0] = after;
  EXPECT_OK(syrah_queue_memcpy(e->q[1], e->d[1], e->h[0], PART * sizeof(uint32_t), dep, 1, NULL));
  EXPECT_OK(syrah_queue_wait(e->q[1]));
  EXPECT_OK(syrah_queue_wait(e->q[0]));
  for (i = 0; i < N; ++i) e->md[0][i] += v;
  memcpy(e->mh[0], e->md[0], N * sizeof(uint32_t));
  memcpy(e->md[1], e->mh[0], PART * sizeof(uint32_t));
  EXPECT_OK(syrah_queue_memcpy(e->q[0], e->back, e->d[1], PART * sizeof(uint32_t), NULL, 0, NULL));
  EXPECT_OK(syrah_queue_wait(e->q[0]));
  ++t_checks;
  if (memcmp(e->back, e->md[1], PART * sizeof(uint32_t)) != 0) {
    T_FAIL("a copy from ordinary memory on queue 1 behind queue 0's copy into it: word 0 is %u, expected %u",
           e->back[0], e->md[1][0]);
    ok = 0;
  }
  if (ev) syrah_event_release(ev);
  if (copied) syrah_event_release(copied);
  if (after) syrah_event_release(after);
  return ok;
}

/* One random run on `d` from `seed` (see t_checker). */
static int one_run(const syrah_device *d, uint64_t seed) {
  env e;
  int r = -1;
  if (env_open(&e, d))
    r = across_queues(&e) && random_run(&e, seed, steps) ? 1 : 0;
  else
    T_FAIL("setup: %s", syrah_last_error_message());
  env_close(&e);
  return r;
}

/* Its steps are set in main. */
static t_checker checker = {"test_usm_order", "SYRAH_USM_ORDER", 0, one_run};

static bool has_device_usm(const syrah_device *d) { return t_has(d, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS); }

static void per_device(const syrah_device *d) {
  if (!has_device_usm(d)) {
    t_skip("USM copies through ordinary memory", "the device has no device USM");
    return;
  }
  t_checked_run(&checker, d, first_seed);
}

int main(int argc, char **argv) {
  int stress = argc > 1 && strcmp(argv[1], "stress") == 0;
  first_seed = t_env_u64("SYRAH_USM_ORDER_SEED", stress ? (uint64_t)time(NULL) : 1);
  steps = (int)t_env_u64("SYRAH_USM_ORDER_STEPS", stress ? 400 : 80);
  if (steps < 1 || steps > MAX_STEPS) steps = MAX_STEPS;
  ops_mask = (unsigned)t_env_u64("SYRAH_USM_ORDER_OPS", 63) & 63;
  if (!ops_mask) ops_mask = 63;
  queues = t_env_u64("SYRAH_USM_ORDER_QUEUES", 2) == 1 ? 1 : 2;
  pinned = t_env_u64("SYRAH_USM_ORDER_PINNED", 0) != 0;
  checker.steps = steps;
  if (!stress) {
    t_for_each_device(per_device);
    return t_finish("test_usm_order");
  }
  return t_stress(&checker, first_seed, has_device_usm, "the device has no device USM");
}
