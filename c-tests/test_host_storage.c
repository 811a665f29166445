/* Buffers' host storage, which the default allocator cuts from slabs,
 * makes block by block or keeps for the next buffer depending on its size
 * (page-locking it where the CUDA back end runs): a fixed case of many
 * buffers alive at once, then a seeded randomised checker that creates,
 * writes (by kernels and by the host), reads and releases buffers of sizes
 * around every bound, comparing each buffer with a CPU model, so that two
 * live buffers sharing bytes or a reused block showing old data fails.
 *
 *   test_host_storage          the fixed case and a brief random run per device
 *   test_host_storage stress   random runs with new seeds for SYRAH_STRESS_SECONDS
 *
 * SYRAH_HOST_STORAGE_SEED sets the first seed and SYRAH_HOST_STORAGE_STEPS
 * the steps of a run. A failure prints the line that reproduces it. */
#include "testing.h"

#include <stdint.h>
#include <time.h>

#define LIVE 24

static const char *kSource =
    "__kernel void setv(__global int *p, int v, uint n) {\n"
    "  size_t i = get_global_id(0);\n"
    "  if (i < n) p[i] = v;\n"
    "}\n"
    "__kernel void stir(__global int *p, int salt, uint n) {\n"
    "  size_t i = get_global_id(0);\n"
    "  if (i < n) p[i] = p[i] * 3 + salt + (int)i;\n"
    "}\n";

/* Element counts around the slot classes (4 KiB to 256 KiB), the blocks
 * made one by one and the blocks kept for reuse. */
static const size_t kSizes[] = {1,     100,   1024,   1025,   3000,   16384,  16385,
                                65536, 65537, 100000, 262144, 262145, 300000};
#define NSIZES (sizeof kSizes / sizeof kSizes[0])
/* The one launch shape: the largest size rounded up to 64. */
#define SHAPE 300032

typedef struct {
  syrah_queue *q;
  syrah_context *ctx;
  syrah_program *p;
  syrah_kernel *setv, *stir;
} env;

static bool env_open(env *e, const syrah_device *d) {
  memset(e, 0, sizeof *e);
  if (syrah_queue_create(NULL, d, 0, NULL, NULL, &e->q) != SYRAH_SUCCESS) return false;
  if (syrah_queue_get_context(e->q, &e->ctx) != SYRAH_SUCCESS) return false;
  if (syrah_program_create_from_source(e->ctx, kSource, NULL, &e->p) != SYRAH_SUCCESS) return false;
  return syrah_kernel_create(e->p, "setv", &e->setv) == SYRAH_SUCCESS &&
         syrah_kernel_create(e->p, "stir", &e->stir) == SYRAH_SUCCESS;
}

static void env_close(env *e) {
  if (e->setv) syrah_kernel_release(e->setv);
  if (e->stir) syrah_kernel_release(e->stir);
  if (e->p) syrah_program_release(e->p);
  if (e->q) syrah_queue_release(e->q);
  if (e->ctx) syrah_context_release(e->ctx);
}

static uint64_t rng_state;
static uint32_t rnd(void) { return t_rnd(&rng_state); }

/* One live buffer and what it must hold. */
typedef struct {
  syrah_buffer *b;
  size_t n;
  int32_t *model;
} live;

/* Compares `[off, off + len)` of `l` read through a host accessor with
 * the model; names the first difference. */
static bool check_range(live *l, size_t off, size_t len, const char *what) {
  syrah_host_accessor *ha = NULL;
  int32_t *p = NULL;
  size_t i;
  bool ok = true;
  if (syrah_buffer_host_access(l->b, SYRAH_ACCESS_READ, &off, &len, &ha, (void **)&p) != SYRAH_SUCCESS ||
      !p) {
    T_FAIL("%s: host accessor: %s", what, syrah_last_error_message());
    return false;
  }
  for (i = 0; i < len && ok; ++i)
    if (p[i] != l->model[off + i]) {
      T_FAIL("%s: element %zu of %zu is %d, the model says %d", what, off + i, l->n, (int)p[i],
             (int)l->model[off + i]);
      ok = false;
    }
  ++t_checks;
  syrah_host_accessor_release(ha);
  return ok;
}

/* Every launch has one shape, the largest buffer's rounded up: PoCL 5.0
 * aborts when one kernel runs with one work-group size over grids of
 * several widths at once (see test_dag.c). */
static syrah_status run(env *e, syrah_kernel *k, live *l, int32_t v) {
  syrah_accessor a = t_whole(l->b, SYRAH_ACCESS_READ_WRITE);
  syrah_range r = syrah_range_1d(SHAPE);
  uint32_t n = (uint32_t)l->n;
  syrah_kernel_arg args[3];
  r.local_size[0] = 64;
  args[0].kind = SYRAH_ARG_ACCESSOR;
  args[0].size = 0;
  args[0].value = NULL;
  args[1] = syrah_arg_value(&v, sizeof v);
  args[2] = syrah_arg_value(&n, sizeof n);
  return syrah_queue_submit_kernel(e->q, k, &r, &a, 1, args, 3, NULL, 0, NULL);
}

/* One random run on `e`: `steps` actions; false on the first failure. */
static bool random_run(env *e, uint64_t seed, int steps) {
  live ls[LIVE];
  int nl = 0, s, j;
  bool ok = true;
  char what[160];
  rng_state = t_seed_state(seed);
  for (s = 0; s < steps && ok; ++s) {
    uint32_t act = rnd() % 10;
    snprintf(what, sizeof what, "seed %llu step %d", (unsigned long long)seed, s);
    if (nl == 0 || (act < 3 && nl < LIVE)) {
      /* A new buffer, from host data or filled by a kernel. */
      live *l = &ls[nl];
      size_t i;
      syrah_buffer_desc bd;
      bool from_host = rnd() % 2 == 0;
      l->n = kSizes[rnd() % NSIZES];
      l->model = (int32_t *)malloc(l->n * sizeof(int32_t));
      if (!l->model) return false;
      for (i = 0; i < l->n; ++i) l->model[i] = (int32_t)(seed * 31u + (uint64_t)s * 7u + i);
      bd = t_desc1(l->n, from_host ? l->model : NULL, from_host ? SYRAH_HOST_COPY_IN : SYRAH_HOST_NONE);
      if (syrah_buffer_create(&bd, &l->b) != SYRAH_SUCCESS) {
        T_FAIL("%s: creating a buffer of %zu elements: %s", what, l->n, syrah_last_error_message());
        free(l->model);
        return false;
      }
      ++nl;
      if (!from_host) {
        int32_t v = (int32_t)rnd();
        ok = run(e, e->setv, l, v) == SYRAH_SUCCESS;
        for (i = 0; i < l->n; ++i) l->model[i] = v;
      }
    } else if (act < 5) {
      /* A kernel reads and writes one. */
      live *l = &ls[rnd() % (uint32_t)nl];
      int32_t salt = (int32_t)(rnd() % 1000);
      size_t i;
      ok = run(e, e->stir, l, salt) == SYRAH_SUCCESS;
      for (i = 0; i < l->n; ++i)
        l->model[i] = (int32_t)((uint32_t)l->model[i] * 3u + (uint32_t)salt + (uint32_t)i);
    } else if (act < 7) {
      /* The host reads part of one and writes it. */
      live *l = &ls[rnd() % (uint32_t)nl];
      size_t off = rnd() % l->n, len = 1 + rnd() % (l->n - off), i;
      syrah_host_accessor *ha = NULL;
      int32_t *p = NULL;
      ok = check_range(l, off, len, what);
      if (ok && syrah_buffer_host_access(l->b, SYRAH_ACCESS_READ_WRITE, &off, &len, &ha, (void **)&p) ==
                    SYRAH_SUCCESS &&
          p) {
        for (i = 0; i < len; ++i) p[i] = l->model[off + i] = (int32_t)(i * 7u + (uint32_t)s);
        syrah_host_accessor_release(ha);
      } else if (ok) {
        T_FAIL("%s: host write accessor: %s", what, syrah_last_error_message());
        ok = false;
      }
    } else if (act < 8) {
      live *l = &ls[rnd() % (uint32_t)nl];
      ok = check_range(l, 0, l->n, what);
    } else {
      /* One goes, checked first or not. */
      int k = (int)(rnd() % (uint32_t)nl);
      if (rnd() % 2) ok = check_range(&ls[k], 0, ls[k].n, what);
      syrah_buffer_release(ls[k].b);
      free(ls[k].model);
      ls[k] = ls[--nl];
    }
    if (!ok && t_failures == 0) T_FAIL("%s: %s", what, syrah_last_error_message());
  }
  for (j = 0; j < nl; ++j) {
    snprintf(what, sizeof what, "seed %llu: buffer %d at the end", (unsigned long long)seed, j);
    if (ok) ok = check_range(&ls[j], 0, ls[j].n, what);
    syrah_buffer_release(ls[j].b);
    free(ls[j].model);
  }
  return ok && syrah_queue_wait(e->q) == SYRAH_SUCCESS;
}

/* Many buffers alive at once, of sizes around the slot classes: each
 * keeps its own values through kernels and host accesses, with exact
 * bytes each way, and a second round reuses the storage the first gave
 * back out of order. */
static void fixed_case(env *e) {
  enum { B = 24, K = 6 };
  static const size_t sizes[K] = {100, 1024, 3000, 16384, 65536, 65537};
  live ls[B];
  int round, j;
  size_t i;
  char what[96];
  for (round = 0; round < 2; ++round) {
    for (j = 0; j < B; ++j) {
      syrah_buffer_desc bd = t_desc1(sizes[j % K], NULL, SYRAH_HOST_NONE);
      ls[j].n = sizes[j % K];
      ls[j].model = (int32_t *)malloc(ls[j].n * sizeof(int32_t));
      if (!ls[j].model) {
        T_FAIL("out of host memory for the model of buffer %d", j);
        return;
      }
      REQUIRE_OK(syrah_buffer_create(&bd, &ls[j].b));
      EXPECT_OK(run(e, e->setv, &ls[j], 100 * round + j + 1));
      for (i = 0; i < ls[j].n; ++i) ls[j].model[i] = 100 * round + j + 1;
    }
    for (j = 0; j < B; ++j) {
      syrah_host_accessor *ha = NULL;
      int32_t *p = NULL;
      snprintf(what, sizeof what, "round %d, buffer %d", round, j);
      check_range(&ls[j], 0, ls[j].n, what);
      EXPECT_OK(syrah_buffer_host_access(ls[j].b, SYRAH_ACCESS_DISCARD_WRITE, NULL, NULL, &ha, (void **)&p));
      if (p)
        for (i = 0; i < ls[j].n; ++i) p[i] = ls[j].model[i] = (int32_t)(i ^ (size_t)(j + round));
      EXPECT_OK(syrah_host_accessor_release(ha));
      EXPECT_OK(run(e, e->stir, &ls[j], 0));
      for (i = 0; i < ls[j].n; ++i) ls[j].model[i] = ls[j].model[i] * 3 + (int32_t)i;
    }
    for (j = 0; j < B; ++j) {
      syrah_buffer_stats st;
      snprintf(what, sizeof what, "round %d, buffer %d after the kernel", round, j);
      check_range(&ls[j], 0, ls[j].n, what);
      EXPECT_OK(syrah_buffer_get_stats(ls[j].b, &st));
      /* Down twice (before the host's write, after the kernel), up once. */
      EXPECT_EQ(st.device_to_host_bytes, 2ull * ls[j].n * sizeof(int32_t));
      EXPECT_EQ(st.host_to_device_bytes, (uint64_t)ls[j].n * sizeof(int32_t));
    }
    for (j = 1; j < B; j += 2) EXPECT_OK(syrah_buffer_release(ls[j].b));
    for (j = 0; j < B; j += 2) EXPECT_OK(syrah_buffer_release(ls[j].b));
    for (j = 0; j < B; ++j) free(ls[j].model);
  }
  EXPECT_OK(syrah_queue_wait(e->q));
}

static uint64_t first_seed;
static int steps;

/* One random run on `d` from `seed` (see t_checker). */
static int one_run(const syrah_device *d, uint64_t seed) {
  env e;
  int r = -1;
  if (env_open(&e, d))
    r = random_run(&e, seed, steps) ? 1 : 0;
  else
    T_FAIL("setup: %s", syrah_last_error_message());
  env_close(&e);
  return r;
}

/* Its steps are set in main. */
static t_checker checker = {"test_host_storage", "SYRAH_HOST_STORAGE", 0, one_run};

static void per_device(const syrah_device *d) {
  env e;
  if (!env_open(&e, d)) {
    T_FAIL("setup: %s", syrah_last_error_message());
    env_close(&e);
    return;
  }
  fixed_case(&e);
  printf("random run: seed %llu, %d steps\n", (unsigned long long)first_seed, steps);
  if (!random_run(&e, first_seed, steps)) t_reproduce(&checker, first_seed);
  env_close(&e);
}

int main(int argc, char **argv) {
  int stress = argc > 1 && strcmp(argv[1], "stress") == 0;
  first_seed = t_env_u64("SYRAH_HOST_STORAGE_SEED", stress ? (uint64_t)time(NULL) : 1);
  steps = (int)t_env_u64("SYRAH_HOST_STORAGE_STEPS", stress ? 600 : 150);
  checker.steps = steps;
  if (!stress) {
    t_for_each_device(per_device);
    return t_finish("test_host_storage");
  }
  return t_stress(&checker, first_seed, NULL, NULL);
}
