/* A seeded, randomised checker of queue barriers against a CPU model:
 * device USM arrays take kernels (some slow), copies between arrays, byte
 * fills, copies out into ordinary memory and replays of graphs of two
 * independent slow kernels (which run on lanes of their own) in phases; a
 * host task in the phase after a copy out compares what arrived with the
 * model. Within a
 * phase the commands touch disjoint arrays and nothing orders them; a
 * barrier with no dependencies (syrah_queue_barrier) ends each phase, so
 * every command of the next phase must see all of the phase's results. A run uses an out-of-order
 * or an in-order queue (by its seed); at random points an array is read
 * back, and at the end every array is compared word for word with the
 * model.
 *
 *   test_barrier_random          one run per device (seed 1 unless set)
 *   test_barrier_random stress   new seeds for SYRAH_STRESS_SECONDS (30 unless set)
 *
 * SYRAH_BARRIER_RANDOM_SEED sets the first seed, SYRAH_BARRIER_RANDOM_STEPS
 * the phases of a run; a failure prints the line that reproduces it. */
#include "testing.h"

#include <stdint.h>
#include <string.h>

enum { N = 4096, ARRAYS = 6, MAX_STEPS = 2048, MAX_LOOKS = 64 };

static const char *kSource =
    "__kernel void addk(__global uint *a, uint v, uint spin) {\n"
    "  size_t i = get_global_id(0);\n"
    "  uint y = v;\n"
    "  if (i == 0) for (uint k = 0; k < spin; ++k) y = y * 1664525u + 1013904223u;\n"
    "  a[i] += v + (i == 0 ? (y & 1u) : 0u);\n"
    "}\n"
    "__kernel void mixk(__global const uint *s, __global uint *d, uint salt) {\n"
    "  size_t i = get_global_id(0);\n"
    "  d[i] = d[i] * 3u + (s[i] ^ salt);\n"
    "}\n";

/* What a host task compares: a copy out of an array, against the model
 * when it was made. */
typedef struct {
  const uint32_t *host;
  uint32_t expect[N];
  int ran, bad;
} look;

typedef struct {
  syrah_queue *q;
  syrah_context *ctx;
  syrah_program *prog;
  syrah_kernel *add, *mix;
  uint32_t *d[ARRAYS];
  uint32_t model[ARRAYS][N];
  uint32_t back[N];
  uint32_t host[ARRAYS][N];
  look looks[MAX_LOOKS];
  /* Graphs of two independent slow kernels on arrays 2g and 2g + 1, each
   * adding GRAPH_V[g] after GRAPH_SPIN steps (see `addk`). */
  syrah_graph *graph[ARRAYS / 2];
  syrah_graph_exec *exec[ARRAYS / 2];
} env;

static const uint32_t GRAPH_V[ARRAYS / 2] = {11, 13, 17};
enum { GRAPH_SPIN = 100000 };

static syrah_status compare(const syrah_host_task_context *c, void *user) {
  look *l = (look *)user;
  (void)c;
  l->bad = memcmp(l->host, l->expect, sizeof l->expect) != 0;
  l->ran = 1;
  return SYRAH_SUCCESS;
}

/* What the slow work-item adds to element 0 (see `addk`). */
static uint32_t spun_bit(uint32_t v, uint32_t spin) {
  uint32_t y = v, k;
  for (k = 0; k < spin; ++k) y = y * 1664525u + 1013904223u;
  return y & 1u;
}

static int env_open(env *e, const syrah_device *dev, bool in_order) {
  int i;
  memset(e, 0, sizeof *e);
  if (syrah_queue_create(NULL, dev, in_order ? SYRAH_QUEUE_IN_ORDER : 0, NULL, NULL, &e->q) != SYRAH_SUCCESS)
    return 0;
  if (syrah_queue_get_context(e->q, &e->ctx) != SYRAH_SUCCESS) return 0;
  if (syrah_program_create_from_source(e->ctx, kSource, NULL, &e->prog) != SYRAH_SUCCESS) return 0;
  if (syrah_kernel_create(e->prog, "addk", &e->add) != SYRAH_SUCCESS) return 0;
  if (syrah_kernel_create(e->prog, "mixk", &e->mix) != SYRAH_SUCCESS) return 0;
  for (i = 0; i < ARRAYS; ++i) {
    if (syrah_malloc_device(e->ctx, dev, N * sizeof(uint32_t), (void **)&e->d[i]) != SYRAH_SUCCESS) return 0;
    if (syrah_queue_memset(e->q, e->d[i], i + 1, N * sizeof(uint32_t), NULL, 0, NULL) != SYRAH_SUCCESS) return 0;
    memset(e->model[i], i + 1, sizeof e->model[i]);
  }
  for (i = 0; i < ARRAYS / 2; ++i) {
    syrah_queue *rec = NULL;
    syrah_range all = syrah_range_1d(N);
    uint32_t spin = GRAPH_SPIN;
    syrah_kernel_arg args[3];
    int k, ok = syrah_queue_create(e->ctx, dev, 0, NULL, NULL, &rec) == SYRAH_SUCCESS &&
                syrah_queue_begin_recording(rec) == SYRAH_SUCCESS;
    args[1] = syrah_arg_value(&GRAPH_V[i], sizeof GRAPH_V[i]);
    args[2] = syrah_arg_value(&spin, sizeof spin);
    for (k = 0; k < 2 && ok; ++k) {
      args[0] = syrah_arg_usm(e->d[2 * i + k]);
      ok = syrah_queue_launch(rec, e->add, &all, args, 3, NULL, 0, NULL) == SYRAH_SUCCESS;
    }
    ok = ok && syrah_queue_end_recording(rec, &e->graph[i]) == SYRAH_SUCCESS &&
         syrah_graph_finalize(e->graph[i], &e->exec[i]) == SYRAH_SUCCESS;
    if (rec) syrah_queue_release(rec);
    if (!ok) return 0;
  }
  return syrah_queue_wait(e->q) == SYRAH_SUCCESS;
}

static void env_close(env *e) {
  int i;
  if (e->q) EXPECT_OK(syrah_queue_wait(e->q));
  for (i = 0; i < ARRAYS / 2; ++i) {
    if (e->exec[i]) EXPECT_OK(syrah_graph_exec_release(e->exec[i]));
    if (e->graph[i]) EXPECT_OK(syrah_graph_release(e->graph[i]));
  }
  for (i = 0; i < ARRAYS; ++i)
    if (e->d[i]) EXPECT_OK(syrah_free(e->ctx, e->d[i]));
  if (e->mix) EXPECT_OK(syrah_kernel_release(e->mix));
  if (e->add) EXPECT_OK(syrah_kernel_release(e->add));
  if (e->prog) EXPECT_OK(syrah_program_release(e->prog));
  if (e->ctx) EXPECT_OK(syrah_context_release(e->ctx));
  if (e->q) EXPECT_OK(syrah_queue_release(e->q));
}

/* Compares what was read back into e->back with array `a` of the model. */
static int same(env *e, int a, int phase, const char *when) {
  int i;
  ++t_checks;
  for (i = 0; i < N; ++i) {
    if (e->back[i] != e->model[a][i]) {
      T_FAIL("%s, phase %d: array %d word %d is %u, the model says %u", when, phase, a, i, e->back[i],
             e->model[a][i]);
      return 0;
    }
  }
  return 1;
}

/* An array no command of the phase touches yet, taken; -1 when none is
 * left. */
static int take(uint64_t *rng, bool *used) {
  int start = (int)(t_rnd(rng) % ARRAYS), k;
  for (k = 0; k < ARRAYS; ++k) {
    int a = (start + k) % ARRAYS;
    if (!used[a]) {
      used[a] = true;
      return a;
    }
  }
  return -1;
}

static int random_run(env *e, uint64_t seed, int phases) {
  uint64_t rng = t_seed_state(seed);
  static const uint32_t spins[4] = {0, 0, 20000, 200000};
  syrah_range all = syrah_range_1d(N);
  int p, i;
  int looks = 0, pending[ARRAYS];
  for (i = 0; i < ARRAYS; ++i) pending[i] = -1;
  for (p = 0; p < phases; ++p) {
    bool used[ARRAYS] = {false};
    int ops = 1 + (int)(t_rnd(&rng) % 4), o;
    /* Host tasks look at what the last phase copied out: the copies must
     * have landed. The array stays untouched in this phase. */
    for (i = 0; i < ARRAYS; ++i) {
      if (pending[i] >= 0) {
        syrah_host_task task = {compare, &e->looks[pending[i]], NULL};
        used[i] = true;
        EXPECT_OK(syrah_queue_submit_host_tasks(e->q, NULL, 0, &task, 1, NULL, 0, NULL));
        pending[i] = -1;
      }
    }
    /* Now and then the phase starts by reading an array back: it must see
     * every command before the last barrier. */
    if (t_rnd(&rng) % 6 == 0) {
      int a = take(&rng, used);
      EXPECT_OK(syrah_queue_memcpy(e->q, e->back, e->d[a], sizeof e->back, NULL, 0, NULL));
      EXPECT_OK(syrah_queue_wait(e->q));
      if (!same(e, a, p, "read back after a barrier")) return 0;
    }
    for (o = 0; o < ops; ++o) {
      unsigned kind = t_rnd(&rng) % 6;
      int a, b;
      if (kind == 5) { /* a graph's replay, on its pair of arrays */
        int g = (int)(t_rnd(&rng) % (ARRAYS / 2));
        if (used[2 * g] || used[2 * g + 1]) continue;
        used[2 * g] = used[2 * g + 1] = true;
        EXPECT_OK(syrah_queue_submit_graph(e->q, e->exec[g], NULL, 0, NULL));
        for (b = 2 * g; b < 2 * g + 2; ++b) {
          for (i = 0; i < N; ++i) e->model[b][i] += GRAPH_V[g];
          e->model[b][0] += spun_bit(GRAPH_V[g], GRAPH_SPIN);
        }
        continue;
      }
      a = take(&rng, used);
      b = kind == 1 || kind == 2 ? take(&rng, used) : a;
      if (a < 0 || b < 0) break;
      if (kind == 0) { /* addk on a: slow or not */
        uint32_t v = (uint32_t)t_rnd(&rng), spin = spins[t_rnd(&rng) % 4];
        syrah_kernel_arg args[3];
        args[0] = syrah_arg_usm(e->d[a]);
        args[1] = syrah_arg_value(&v, sizeof v);
        args[2] = syrah_arg_value(&spin, sizeof spin);
        EXPECT_OK(syrah_queue_launch(e->q, e->add, &all, args, 3, NULL, 0, NULL));
        for (i = 0; i < N; ++i) e->model[a][i] += v;
        e->model[a][0] += spun_bit(v, spin);
      } else if (kind == 1) { /* mixk: a read, b written */
        uint32_t salt = (uint32_t)t_rnd(&rng);
        syrah_kernel_arg args[3];
        args[0] = syrah_arg_usm(e->d[a]);
        args[1] = syrah_arg_usm(e->d[b]);
        args[2] = syrah_arg_value(&salt, sizeof salt);
        EXPECT_OK(syrah_queue_launch(e->q, e->mix, &all, args, 3, NULL, 0, NULL));
        for (i = 0; i < N; ++i) e->model[b][i] = e->model[b][i] * 3u + (e->model[a][i] ^ salt);
      } else if (kind == 2) { /* a copied into b, device to device */
        EXPECT_OK(syrah_queue_memcpy(e->q, e->d[b], e->d[a], N * sizeof(uint32_t), NULL, 0, NULL));
        memcpy(e->model[b], e->model[a], sizeof e->model[b]);
      } else if (kind == 4) { /* a copied out into ordinary memory */
        if (looks == MAX_LOOKS) continue;
        e->looks[looks].host = e->host[a];
        e->looks[looks].ran = e->looks[looks].bad = 0;
        memcpy(e->looks[looks].expect, e->model[a], sizeof e->model[a]);
        EXPECT_OK(syrah_queue_memcpy(e->q, e->host[a], e->d[a], N * sizeof(uint32_t), NULL, 0, NULL));
        pending[a] = looks++;
      } else { /* a filled with one byte */
        int byte = (int)(t_rnd(&rng) & 0xff);
        EXPECT_OK(syrah_queue_memset(e->q, e->d[a], byte, N * sizeof(uint32_t), NULL, 0, NULL));
        memset(e->model[a], byte, sizeof e->model[a]);
      }
    }
    EXPECT_OK(syrah_queue_barrier(e->q, NULL, 0, NULL));
  }
  /* The last phase's copies out, looked at after its barrier too. */
  for (i = 0; i < ARRAYS; ++i) {
    if (pending[i] >= 0) {
      syrah_host_task task = {compare, &e->looks[pending[i]], NULL};
      EXPECT_OK(syrah_queue_submit_host_tasks(e->q, NULL, 0, &task, 1, NULL, 0, NULL));
    }
  }
  EXPECT_OK(syrah_queue_wait(e->q));
  for (i = 0; i < looks; ++i) {
    ++t_checks;
    if (!e->looks[i].ran || e->looks[i].bad) {
      T_FAIL("host task %d of %d %s", i, looks,
             e->looks[i].ran ? "saw other data than the copy out made before the last barrier" : "did not run");
      return 0;
    }
  }
  for (i = 0; i < ARRAYS; ++i) {
    EXPECT_OK(syrah_queue_memcpy(e->q, e->back, e->d[i], sizeof e->back, NULL, 0, NULL));
    EXPECT_OK(syrah_queue_wait(e->q));
    if (!same(e, i, phases, "at the end")) return 0;
  }
  return 1;
}

/* One random run on `d` from `seed` (see t_checker): odd seeds on an
 * in-order queue. */
static int one_run(const syrah_device *d, uint64_t seed);

static t_checker checker = {"test_barrier_random", "SYRAH_BARRIER_RANDOM", 0, one_run};

static int one_run(const syrah_device *d, uint64_t seed) {
  /* The model and the arrays' read-back are large: kept off the stack. */
  static env e;
  int r = -1;
  if (env_open(&e, d, seed % 2 == 1))
    r = random_run(&e, seed, checker.steps);
  else
    T_FAIL("setup: %s", syrah_last_error_message());
  env_close(&e);
  return r;
}

static bool has_device_usm(const syrah_device *d) { return t_has(d, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS); }

static uint64_t first_seed;

static void per_device(const syrah_device *d) {
  if (!has_device_usm(d)) {
    t_skip("barriers between phases of USM commands", "the device has no device USM");
    return;
  }
  /* One run on each kind of queue. */
  t_checked_run(&checker, d, first_seed);
  t_checked_run(&checker, d, first_seed + 1);
}

int main(int argc, char **argv) {
  bool stress = t_checker_args(&checker, argc, argv, 60, 200, MAX_STEPS, &first_seed);
  if (!stress) {
    t_for_each_device(per_device);
    return t_finish("test_barrier_random");
  }
  return t_stress(&checker, first_seed, has_device_usm, "the device has no device USM");
}
