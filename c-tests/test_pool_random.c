/* A seeded, randomised checker of device USM allocations, the pool that
 * keeps freed ones for reuse among them, against a CPU model: allocations
 * of random sizes take fills, slow kernels, copies between each other and
 * frees while their commands still run; a later allocation may get a freed
 * block, and what it holds must be its own. Pointer queries must say a
 * live allocation is device USM and a freed one (not reused) is unknown;
 * now and then the context gives its kept blocks back. Every live
 * allocation is compared word for word with the model at random points
 * and at the end.
 *
 *   test_pool_random          one run per device (seed 1 unless set)
 *   test_pool_random stress   new seeds for SYRAH_STRESS_SECONDS (30 unless set)
 *
 * SYRAH_POOL_RANDOM_SEED sets the first seed, SYRAH_POOL_RANDOM_STEPS the
 * steps of a run; a failure prints the line that reproduces it. */
#include "testing.h"

#include <stdint.h>
#include <time.h>

enum { SLOTS = 8, MAX_WORDS = 256 * 1024, MAX_STEPS = 4096 };

static const char *kSource =
    "__kernel void slow(__global uint *a, uint v, uint spin, uint n) {\n"
    "  size_t i = get_global_id(0);\n"
    "  if (i >= n) return;\n"
    "  uint x = a[i];\n"
    "  for (uint k = 0; k < spin; ++k) x = x * 1664525u + 1013904223u;\n"
    "  a[i] = x + v;\n"
    "}\n";

static uint32_t model_slow(uint32_t x, uint32_t v, uint32_t spin) {
  uint32_t k;
  for (k = 0; k < spin; ++k) x = x * 1664525u + 1013904223u;
  return x + v;
}

/* A live allocation: its words, the model of them, its latest command. */
typedef struct {
  uint32_t *p;
  size_t words;
  uint32_t *model;
  syrah_event *last;
} slot;

typedef struct {
  const syrah_device *dev;
  syrah_queue *q;
  syrah_context *ctx;
  syrah_program *prog;
  syrah_kernel *k;
  slot s[SLOTS];
  uint32_t *freed[64]; /* addresses freed and not allocated again */
  int nfreed;
  char name[160];
} env;

static uint64_t rng;
static uint32_t rnd(void) { return t_rnd(&rng); }
static size_t below(size_t n) { return n ? rnd() % n : 0; }

static int steps = 60;

/* Replaces the slot's latest command with `ev`. */
static void set_last(slot *sl, syrah_event *ev) {
  if (sl->last) syrah_event_release(sl->last);
  sl->last = ev;
}

/* Allocations that got memory freed before (the pool's reuse). */
static long reused, allocations;

static void forget_freed(env *e, const uint32_t *p, size_t words) {
  int i, again = 0;
  for (i = 0; i < e->nfreed;)
    if (e->freed[i] >= p && e->freed[i] < p + words) {
      e->freed[i] = e->freed[--e->nfreed];
      again = 1;
    } else {
      ++i;
    }
  reused += again;
  ++allocations;
}

/* Compares slot `i` with its model (everything before waited for). */
static int compare_slot(env *e, int i, const char *when) {
  slot *sl = &e->s[i];
  uint32_t *got = (uint32_t *)malloc(sl->words * sizeof(uint32_t));
  size_t j, wrong = 0, first = 0;
  const syrah_event *dep = sl->last;
  int ok = 1;
  if (!got) return 0;
  ++t_checks;
  if (syrah_queue_memcpy(e->q, got, sl->p, sl->words * sizeof(uint32_t), dep ? &dep : NULL, dep ? 1 : 0, NULL) !=
          SYRAH_SUCCESS ||
      syrah_queue_wait(e->q) != SYRAH_SUCCESS) {
    T_FAIL("%s, %s: reading slot %d: %s", e->name, when, i, syrah_last_error_message());
    free(got);
    return 0;
  }
  for (j = 0; j < sl->words; ++j)
    if (got[j] != sl->model[j] && !wrong++) first = j;
  if (wrong) {
    T_FAIL("%s, %s: slot %d (%zu words at %p): %zu words wrong, the first at %zu (%u, expected %u)", e->name, when, i,
           sl->words, (void *)sl->p, wrong, first, got[first], sl->model[first]);
    ok = 0;
  }
  free(got);
  return ok;
}

static syrah_usm_alloc type_of(env *e, const void *p) {
  syrah_usm_alloc t = SYRAH_USM_ALLOC_UNKNOWN;
  if (syrah_get_pointer_type(e->ctx, p, &t) != SYRAH_SUCCESS) return (syrah_usm_alloc)-1;
  return t;
}

/* Allocates slot `i` (empty) with a random size and fills it. */
static int alloc_slot(env *e, int i) {
  static const size_t sizes[] = {1024, 4096, 16384, 65536, 100000, 262144};
  slot *sl = &e->s[i];
  uint32_t pattern = 0x9e000000u + rnd() % 0x10000u;
  syrah_event *ev = NULL;
  size_t j;
  sl->words = sizes[below(sizeof sizes / sizeof sizes[0])] - below(64);
  sl->model = (uint32_t *)malloc(sl->words * sizeof(uint32_t));
  if (!sl->model) return 0;
  if (syrah_malloc_device(e->ctx, e->dev, sl->words * sizeof(uint32_t), (void **)&sl->p) != SYRAH_SUCCESS) {
    T_FAIL("%s: allocating %zu words: %s", e->name, sl->words, syrah_last_error_message());
    return 0;
  }
  forget_freed(e, sl->p, sl->words);
  ++t_checks;
  if (type_of(e, sl->p) != SYRAH_USM_ALLOC_DEVICE || type_of(e, sl->p + sl->words - 1) != SYRAH_USM_ALLOC_DEVICE) {
    T_FAIL("%s: a new allocation of %zu words at %p is not reported as device USM", e->name, sl->words,
           (void *)sl->p);
    return 0;
  }
  if (syrah_queue_fill(e->q, sl->p, &pattern, sizeof pattern, sl->words * sizeof(uint32_t), NULL, 0, &ev) !=
      SYRAH_SUCCESS) {
    T_FAIL("%s: filling slot %d: %s", e->name, i, syrah_last_error_message());
    return 0;
  }
  set_last(sl, ev);
  for (j = 0; j < sl->words; ++j) sl->model[j] = pattern;
  return 1;
}

/* Frees slot `i` while its commands may still run. */
static int free_slot(env *e, int i) {
  slot *sl = &e->s[i];
  if (syrah_free(e->ctx, sl->p) != SYRAH_SUCCESS) {
    T_FAIL("%s: freeing slot %d: %s", e->name, i, syrah_last_error_message());
    return 0;
  }
  if (e->nfreed < 64) e->freed[e->nfreed++] = sl->p;
  set_last(sl, NULL);
  free(sl->model);
  memset(sl, 0, sizeof *sl);
  return 1;
}

/* A slow kernel over the first words of slot `i`. */
static int kernel_slot(env *e, int i) {
  slot *sl = &e->s[i];
  size_t n = 1 + below(sl->words < 4096 ? sl->words : 4096), j;
  uint32_t v = rnd(), spin = (uint32_t)(200 + below(2000)), n32 = (uint32_t)n;
  /* One launch shape for every launch (PoCL 5.0 aborts when one kernel
   * runs over grids of several widths at once; see test_dag.c). */
  syrah_range r = syrah_range_1d(4096);
  syrah_kernel_arg a[4];
  syrah_event *ev = NULL;
  const syrah_event *dep = sl->last;
  a[0] = syrah_arg_usm(sl->p);
  a[1] = syrah_arg_value(&v, sizeof v);
  a[2] = syrah_arg_value(&spin, sizeof spin);
  a[3] = syrah_arg_value(&n32, sizeof n32);
  r.local_size[0] = 64;
  if (syrah_queue_launch(e->q, e->k, &r, a, 4, dep ? &dep : NULL, dep ? 1 : 0, &ev) != SYRAH_SUCCESS) {
    T_FAIL("%s: kernel on slot %d: %s", e->name, i, syrah_last_error_message());
    return 0;
  }
  set_last(sl, ev);
  for (j = 0; j < n; ++j) sl->model[j] = model_slow(sl->model[j], v, spin);
  return 1;
}

/* A copy of a window of slot `from` into slot `to`. */
static int copy_slots(env *e, int to, int from) {
  slot *d = &e->s[to], *s = &e->s[from];
  size_t most = d->words < s->words ? d->words : s->words;
  size_t len = 1 + below(most), so = below(s->words - len + 1), dof = below(d->words - len + 1);
  const syrah_event *deps[2];
  syrah_event *ev = NULL;
  size_t nd = 0;
  if (d->last) deps[nd++] = d->last;
  if (s->last) deps[nd++] = s->last;
  if (syrah_queue_memcpy(e->q, d->p + dof, s->p + so, len * sizeof(uint32_t), deps, nd, &ev) != SYRAH_SUCCESS) {
    T_FAIL("%s: copy from slot %d into slot %d: %s", e->name, from, to, syrah_last_error_message());
    return 0;
  }
  /* The source's later writers follow this copy too. */
  syrah_event_retain(ev);
  set_last(s, ev);
  set_last(d, ev);
  memmove(d->model + dof, s->model + so, len * sizeof(uint32_t));
  return 1;
}

static void env_close(env *e) {
  int i;
  if (e->q) syrah_queue_wait(e->q);
  for (i = 0; i < SLOTS; ++i)
    if (e->s[i].p) free_slot(e, i);
  if (e->k) EXPECT_OK(syrah_kernel_release(e->k));
  if (e->prog) EXPECT_OK(syrah_program_release(e->prog));
  if (e->q) EXPECT_OK(syrah_queue_release(e->q));
  if (e->ctx) EXPECT_OK(syrah_context_release(e->ctx));
}

static int env_open(env *e, const syrah_device *d, uint64_t seed) {
  int in_order;
  memset(e, 0, sizeof *e);
  e->dev = d;
  rng = t_seed_state(seed);
  in_order = (int)(rnd() % 2);
  snprintf(e->name, sizeof e->name, "%s, %s queue, seed %llu", t_label(d), in_order ? "in-order" : "out-of-order",
           (unsigned long long)seed);
  e->ctx = t_context_of(d);
  if (!e->ctx || syrah_context_retain(e->ctx) != SYRAH_SUCCESS) {
    e->ctx = NULL;
    return 0;
  }
  return syrah_queue_create(e->ctx, d, in_order ? SYRAH_QUEUE_IN_ORDER : 0, NULL, NULL, &e->q) == SYRAH_SUCCESS &&
         syrah_program_create_from_source(e->ctx, kSource, NULL, &e->prog) == SYRAH_SUCCESS &&
         syrah_kernel_create(e->prog, "slow", &e->k) == SYRAH_SUCCESS;
}

static int random_run(env *e) {
  int step, i, ok = 1, failures = t_failures;
  char when[64];
  for (step = 0; step < steps && ok; ++step) {
    uint32_t roll = rnd() % 100;
    i = (int)below(SLOTS);
    snprintf(when, sizeof when, "step %d", step);
    if (!e->s[i].p) {
      ok = alloc_slot(e, i);
    } else if (roll < 25) {
      ok = kernel_slot(e, i);
    } else if (roll < 45) {
      int j = (int)below(SLOTS);
      if (j != i && e->s[j].p) ok = copy_slots(e, i, j);
    } else if (roll < 75) {
      ok = free_slot(e, i);
    } else if (roll < 85) {
      /* Freed and not reused: unknown to the context. */
      int k;
      for (k = 0; k < e->nfreed; ++k) {
        ++t_checks;
        if (type_of(e, e->freed[k]) != SYRAH_USM_ALLOC_UNKNOWN) {
          T_FAIL("%s, %s: freed pointer %p is still reported as USM", e->name, when, (void *)e->freed[k]);
          ok = 0;
        }
      }
    } else if (roll < 90) {
      size_t kept = 0;
      ++t_checks;
      if (syrah_context_trim(e->ctx, &kept) != SYRAH_SUCCESS) {
        T_FAIL("%s, %s: trim: %s", e->name, when, syrah_last_error_message());
        ok = 0;
      }
    } else {
      ok = compare_slot(e, i, when);
    }
  }
  for (i = 0; i < SLOTS; ++i)
    if (e->s[i].p) ok &= compare_slot(e, i, "at the end");
  return ok && failures == t_failures;
}

static int one_run(const syrah_device *d, uint64_t seed) {
  env *e = (env *)calloc(1, sizeof *e);
  int r = -1;
  if (!e) {
    T_FAIL("out of host memory");
    return -1;
  }
  if (env_open(e, d, seed))
    r = random_run(e) ? 1 : 0;
  else
    T_FAIL("%s: setup: %s", e->name, syrah_last_error_message());
  env_close(e);
  free(e);
  return r;
}

/* Its steps are set in main. */
static t_checker checker = {"test_pool_random", "SYRAH_POOL_RANDOM", 0, one_run};

static bool has_device_usm(const syrah_device *d) { return t_has(d, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS); }

int main(int argc, char **argv) {
  uint64_t first_seed;
  bool stress = t_checker_args(&checker, argc, argv, 60, 200, MAX_STEPS, &first_seed);
  int r;
  steps = checker.steps;
  r = t_checker_main(&checker, stress, first_seed, 3, has_device_usm, "the device has no device USM");
  printf("%ld allocations, %ld of them at a freed one's address\n", allocations, reused);
  return r;
}
