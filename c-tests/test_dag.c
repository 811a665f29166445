/* Ordering of command groups by their accessors, against a CPU model: a
 * fixed sequence of seven groups that once ran a group before the group
 * whose output it reads, then a seeded randomised checker (windows, every
 * access mode, host accessors and fills between groups, queues in order
 * and out of order, one device and every pair of devices, host-task groups,
 * groups held back by user events completed a few groups later, and buffers
 * released while their commands run and replaced by new ones of the same
 * size, which may reuse their device memory) that compares every buffer
 * with the model.
 *
 *   test_dag          the fixed sequence and a brief random run per setting
 *   test_dag stress   random runs with new seeds for SYRAH_STRESS_SECONDS
 *
 * SYRAH_DAG_SEED sets the first seed, SYRAH_DAG_GROUPS the command groups
 * of a run, SYRAH_DAG_BUFFERS its buffers and SYRAH_DAG_SETTING the one
 * setting to run (with exactly that seed). A failure prints the line that
 * reproduces it. SYRAH_DAG_EXACT=1 launches each group over exactly its
 * window instead of one fixed grid. */
#include "testing.h"

#include <stdint.h>
#include <time.h>

#define N 4096
#define MAX_BUFFERS 32
#define MAX_QUEUES 3

static const char *kSource =
    "__kernel void dag_step(__global const uint *a, __global const uint *b, __global uint *d,\n"
    "                   uint salt, uint mode, uint n) {\n"
    "  size_t i = get_global_id(0);\n"
    "  if (i >= n) return;\n"
    "  uint x = a[i] + 2u * b[i] + salt;\n"
    "  if (mode == 0u) d[i] = d[i] * 3u + x;\n"
    "  else if (mode == 1u) { if ((i & 1u) == 0u) d[i] = x; }\n"
    "  else if (mode == 2u) d[i] = x ^ 0x5a5a5a5au;\n"
    "  else { d[i] = x; d[i] = d[i] * 5u + 1u; }\n"
    "}\n";

/* What the kernel does to element `i` of the window, `old` being d's
 * value before; mode as in the kernel. */
static uint32_t model_step(uint32_t old, uint32_t a, uint32_t b, uint32_t salt, uint32_t mode,
                           size_t i) {
  uint32_t x = a + 2u * b + salt;
  switch (mode) {
    case 0: return old * 3u + x;
    case 1: return (i & 1u) == 0 ? x : old;
    case 2: return x ^ 0x5a5a5a5au;
    default: return x * 5u + 1u;
  }
}

static const syrah_access_mode kDModes[4] = {SYRAH_ACCESS_READ_WRITE, SYRAH_ACCESS_WRITE,
                                             SYRAH_ACCESS_DISCARD_WRITE,
                                             SYRAH_ACCESS_DISCARD_READ_WRITE};

typedef struct {
  int nq;
  syrah_queue *q[MAX_QUEUES];
  syrah_kernel *k[MAX_QUEUES];
  syrah_program *p[MAX_QUEUES];
  char name[256];
} setting;

static int exact_shape;
static uint64_t rng_state;
static uint32_t rnd(void) { return t_rnd(&rng_state); }
static size_t below(size_t n) { return n ? rnd() % n : 0; }

/* One group: d[od..] op= a[oa..], b[ob..] over len elements. */
static syrah_status submit_step_after(syrah_queue *q, syrah_kernel *k, syrah_buffer *a,
                                      size_t oa, syrah_buffer *b, size_t ob, syrah_buffer *d,
                                      size_t od, size_t len, uint32_t salt, uint32_t mode,
                                      const syrah_event *after, syrah_event **ev) {
  syrah_accessor accs[3];
  syrah_kernel_arg args[6];
  /* One launch shape for every group: PoCL builds a kernel once per
   * work-group size, and PoCL 5.0 aborts when one kernel runs with one
   * work-group size over grids of several widths at once (its own bug;
   * SYRAH_DAG_EXACT=1 launches exactly `len` work-items to show it). */
  syrah_range r = syrah_range_1d(exact_shape ? len : N);
  uint32_t n = (uint32_t)len;
  int i;
  r.local_size[0] = exact_shape ? 0 : 32;
  accs[0] = t_window(a, SYRAH_ACCESS_READ, oa, len);
  accs[1] = t_window(b, SYRAH_ACCESS_READ, ob, len);
  accs[2] = t_window(d, kDModes[mode], od, len);
  for (i = 0; i < 3; ++i) {
    args[i].kind = SYRAH_ARG_ACCESSOR;
    args[i].size = (size_t)i;
    args[i].value = NULL;
  }
  args[3] = syrah_arg_value(&salt, sizeof salt);
  args[4] = syrah_arg_value(&mode, sizeof mode);
  args[5] = syrah_arg_value(&n, sizeof n);
  return syrah_queue_submit_kernel(q, k, &r, accs, 3, args, 6, after ? &after : NULL,
                                   after ? 1 : 0, ev);
}

static syrah_status submit_step(syrah_queue *q, syrah_kernel *k, syrah_buffer *a, size_t oa,
                                syrah_buffer *b, size_t ob, syrah_buffer *d, size_t od,
                                size_t len, uint32_t salt, uint32_t mode, syrah_event **ev) {
  return submit_step_after(q, k, a, oa, b, ob, d, od, len, salt, mode, NULL, ev);
}

static void model_apply(uint32_t *a, size_t oa, uint32_t *b, size_t ob, uint32_t *d, size_t od,
                        size_t len, uint32_t salt, uint32_t mode) {
  size_t i;
  for (i = 0; i < len; ++i) d[od + i] = model_step(d[od + i], a[oa + i], b[ob + i], salt, mode, i);
}

#define MAX_GATES 4

/* User events that hold groups back until a few groups later. */
typedef struct {
  syrah_event *ev[MAX_GATES];
  int n;
} gates;

/* Completes every open gate (before anything that waits for work). */
static void open_gates(gates *gt) {
  int i;
  for (i = 0; i < gt->n; ++i) {
    EXPECT_OK(syrah_user_event_complete(gt->ev[i], false));
    syrah_event_release(gt->ev[i]);
  }
  gt->n = 0;
}

/* Compares `n` elements of `got` with `want`; reports the first few. */
static int compare(const char *what, const uint32_t *got, const uint32_t *want, size_t base,
                   size_t n) {
  size_t i, wrong = 0, first = 0;
  for (i = 0; i < n; ++i)
    if (got[i] != want[i]) {
      if (!wrong) first = i;
      ++wrong;
    }
  ++t_checks;
  if (wrong) {
    T_FAIL("%s: %zu of %zu elements wrong, the first at %zu (%u, expected %u)", what, wrong, n,
           base + first, got[first], want[first]);
    return 0;
  }
  return 1;
}

/* The reduced sequence: four buffers, seven groups on one queue. */
static void fixed_sequence(syrah_queue *q, syrah_kernel *k, int rep) {
  static const size_t t[7][7] = {
      /* a, a@, b, b@, d, d@, len */
      {0, 1078, 3, 926, 2, 495, 1725},  {3, 98, 0, 1895, 1, 2555, 1491},
      {0, 2777, 1, 722, 3, 2820, 261},  {3, 278, 1, 2872, 2, 2515, 1208},
      {0, 2016, 2, 1267, 3, 104, 1440}, {1, 358, 0, 622, 2, 1249, 421},
      {2, 283, 3, 1979, 0, 2823, 1060},
  };
  static uint32_t host[4][N], model[4][N];
  syrah_buffer *b[4] = {NULL, NULL, NULL, NULL};
  int j, g;
  size_t i;
  char what[96];
  for (j = 0; j < 4; ++j) {
    syrah_buffer_desc bd = t_desc1(N, host[j], SYRAH_HOST_COPY_IN);
    for (i = 0; i < N; ++i) host[j][i] = model[j][i] = (uint32_t)(j * 100000 + (int)i);
    bd.page_size[0] = 512;
    REQUIRE_OK(syrah_buffer_create(&bd, &b[j]));
  }
  for (g = 0; g < 7; ++g) {
    EXPECT_OK(submit_step(q, k, b[t[g][0]], t[g][1], b[t[g][2]], t[g][3], b[t[g][4]], t[g][5],
                          t[g][6], 1000u + (uint32_t)g, 0, NULL));
    model_apply(model[t[g][0]], t[g][1], model[t[g][2]], t[g][3], model[t[g][4]], t[g][5],
                t[g][6], 1000u + (uint32_t)g, 0);
  }
  for (j = 0; j < 4; ++j) {
    syrah_host_accessor *ha = NULL;
    uint32_t *p = NULL;
    EXPECT_OK(syrah_buffer_host_access(b[j], SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
    if (p) {
      snprintf(what, sizeof what, "seven groups, run %d, buffer b%d", rep, j);
      compare(what, p, model[j], 0, N);
    }
    EXPECT_OK(syrah_host_accessor_release(ha));
  }
  for (j = 0; j < 4; ++j) EXPECT_OK(syrah_buffer_release(b[j]));
}

static int open_kernel(setting *s, int i) {
  syrah_context *ctx = NULL;
  int made = syrah_queue_get_context(s->q[i], &ctx) == SYRAH_SUCCESS &&
             syrah_program_create_from_source(ctx, kSource, NULL, &s->p[i]) == SYRAH_SUCCESS &&
             syrah_kernel_create(s->p[i], "dag_step", &s->k[i]) == SYRAH_SUCCESS;
  /* The queue's context came with a reference of its own: without this,
   * every setting's context outlived it, and a long stress run used up
   * NVIDIA's OpenCL contexts. */
  if (ctx) syrah_context_release(ctx);
  if (!made) {
    T_FAIL("%s: kernel for queue %d: %s", s->name, i, syrah_last_error_message());
    return 0;
  }
  return 1;
}

static void close_setting(setting *s) {
  int i;
  for (i = 0; i < s->nq; ++i) {
    if (s->q[i]) EXPECT_OK(syrah_queue_wait(s->q[i]));
    if (s->k[i]) syrah_kernel_release(s->k[i]);
    if (s->p[i]) syrah_program_release(s->p[i]);
    if (s->q[i]) syrah_queue_release(s->q[i]);
  }
  memset(s, 0, sizeof *s);
}

/* Contexts kept for every run, one per set of devices: NVIDIA's OpenCL
 * keeps host memory for every context made and released (see
 * testing.h). Released at the end of main. */
static struct {
  const syrah_device *devs[MAX_QUEUES];
  size_t n;
  syrah_context *ctx;
} kept[32];
static int nkept;

/* The kept context of the devices `devs` (any order), made on first use,
 * with a reference for the caller. */
static syrah_status context_of(const syrah_device **devs, size_t n, syrah_context **out) {
  int i;
  size_t a, b;
  for (i = 0; i < nkept; ++i) {
    size_t same = 0;
    if (kept[i].n != n) continue;
    for (a = 0; a < n; ++a)
      for (b = 0; b < n; ++b) same += kept[i].devs[a] == devs[b];
    if (same == n) {
      *out = kept[i].ctx;
      return syrah_context_retain(kept[i].ctx);
    }
  }
  if (nkept == 32) return syrah_context_create(devs, n, out);
  {
    syrah_status st = syrah_context_create(devs, n, &kept[nkept].ctx);
    if (st != SYRAH_SUCCESS) return st;
  }
  for (a = 0; a < n; ++a) kept[nkept].devs[a] = devs[a];
  kept[nkept].n = n;
  *out = kept[nkept++].ctx;
  return syrah_context_retain(*out);
}

/* Opens queues on `devs` (one context per platform) with `flags[i]`. */
static int open_setting(setting *s, const syrah_device **devs, const syrah_queue_flags *flags,
                        int nq, const char *name) {
  syrah_context *ctx[MAX_QUEUES] = {NULL, NULL, NULL};
  uint64_t plat[MAX_QUEUES];
  int i, j;
  memset(s, 0, sizeof *s);
  s->nq = nq;
  snprintf(s->name, sizeof s->name, "%s", name);
  for (i = 0; i < nq; ++i)
    syrah_device_get_info_u64(devs[i], SYRAH_DEVICE_INFO_PLATFORM_INDEX, &plat[i]);
  for (i = 0; i < nq; ++i) {
    const syrah_device *mine[MAX_QUEUES];
    size_t m = 0;
    if (ctx[i]) continue;
    for (j = i; j < nq; ++j)
      if (plat[j] == plat[i]) {
        int dup = 0, k;
        for (k = 0; k < (int)m; ++k) dup |= mine[k] == devs[j];
        if (!dup) mine[m++] = devs[j];
      }
    if (context_of(mine, m, &ctx[i]) != SYRAH_SUCCESS) {
      T_FAIL("%s: context: %s", name, syrah_last_error_message());
      return 0;
    }
    for (j = i + 1; j < nq; ++j)
      if (plat[j] == plat[i]) {
        ctx[j] = ctx[i];
        syrah_context_retain(ctx[i]);
      }
  }
  for (i = 0; i < nq; ++i) {
    syrah_status st = syrah_queue_create(ctx[i], devs[i], flags[i], NULL, NULL, &s->q[i]);
    if (st != SYRAH_SUCCESS) T_FAIL("%s: queue %d: %s", name, i, syrah_last_error_message());
  }
  for (i = 0; i < nq; ++i) syrah_context_release(ctx[i]);
  for (i = 0; i < nq; ++i)
    if (!s->q[i] || !open_kernel(s, i)) return 0;
  return 1;
}

static const char *kHostModes[4] = {"read", "read-write", "write", "discard-write"};

/* One random run of `groups` groups over `nb` buffers on the setting's
 * queues; every buffer compared with the model at the end (and windows of
 * them at host accessors on the way). Returns 0 on a mismatch. */
static int random_run(setting *s, uint64_t seed, int groups, int nb) {
  static uint32_t host[MAX_BUFFERS][N], model[MAX_BUFFERS][N];
  syrah_buffer *b[MAX_BUFFERS];
  int write_back[MAX_BUFFERS];
  int g, j, ok = 1, failures = t_failures;
  size_t i;
  char what[512];
  static const size_t pages[4] = {64, 512, 1000, N};
  gates gt;
  gt.n = 0;
  rng_state = t_seed_state(seed);
  for (j = 0; j < nb; ++j) {
    syrah_buffer_desc bd;
    write_back[j] = (int)below(2);
    bd = t_desc1(N, host[j], write_back[j] ? SYRAH_HOST_WRITE_BACK : SYRAH_HOST_COPY_IN);
    for (i = 0; i < N; ++i) host[j][i] = model[j][i] = (uint32_t)(j * 100000 + (int)i);
    bd.page_size[0] = pages[below(4)];
    b[j] = NULL;
    if (syrah_buffer_create(&bd, &b[j]) != SYRAH_SUCCESS) {
      T_FAIL("%s seed %llu: buffer %d: %s", s->name, (unsigned long long)seed, j,
             syrah_last_error_message());
      nb = j;
      ok = 0;
      groups = 0;
    }
  }
  for (g = 0; g < groups && ok; ++g) {
    int qi = (int)below((size_t)s->nq);
    uint32_t roll = rnd() % 100;
    if (roll < 13 || gt.n == MAX_GATES) open_gates(&gt);
    if (roll < 8) {
      /* A host accessor between groups. */
      int bi = (int)below((size_t)nb), hm = (int)below(4);
      size_t len = 1 + below(N / 2), off = below(N - len + 1);
      syrah_access_mode m = hm == 0   ? SYRAH_ACCESS_READ
                            : hm == 1 ? SYRAH_ACCESS_READ_WRITE
                            : hm == 2 ? SYRAH_ACCESS_WRITE
                                      : SYRAH_ACCESS_DISCARD_WRITE;
      syrah_host_accessor *ha = NULL;
      uint32_t *p = NULL;
      size_t r[3] = {0, 0, 0}, o[3] = {0, 0, 0};
      r[0] = len;
      o[0] = off;
      if (syrah_buffer_host_access(b[bi], m, o, r, &ha, (void **)&p) != SYRAH_SUCCESS) {
        T_FAIL("%s seed %llu group %d: %s host accessor: %s", s->name, (unsigned long long)seed,
               g, kHostModes[hm], syrah_last_error_message());
        ok = 0;
        break;
      }
      if (hm <= 1) {
        snprintf(what, sizeof what, "%s seed %llu: %s host accessor of b%d [%zu, %zu) after %d groups",
                 s->name, (unsigned long long)seed, kHostModes[hm], bi, off, off + len, g);
        ok &= compare(what, p, model[bi] + off, off, len);
      }
      if (hm >= 1)
        for (i = 0; i < len; ++i) model[bi][off + i] = p[i] = p[i] * 7u + (uint32_t)g;
      if (hm >= 2)
        for (i = 0; i < len; ++i) model[bi][off + i] = p[i] = (uint32_t)(g * 31 + (int)i);
      EXPECT_OK(syrah_host_accessor_release(ha));
      continue;
    }
    if (roll < 10) {
      /* Now and then a queue wait. */
      EXPECT_OK(syrah_queue_wait(s->q[qi]));
      continue;
    }
    if (roll < 13) {
      /* A read of a few elements between groups, into memory of our own. */
      int bi = (int)below((size_t)nb);
      size_t len = 1 + below(64), off = below(N - len + 1);
      size_t r[3] = {0, 0, 0}, o[3] = {0, 0, 0};
      uint32_t got[64];
      r[0] = len;
      o[0] = off;
      if (syrah_buffer_read(b[bi], o, r, got) != SYRAH_SUCCESS) {
        T_FAIL("%s seed %llu group %d: read: %s", s->name, (unsigned long long)seed, g,
               syrah_last_error_message());
        ok = 0;
        break;
      }
      snprintf(what, sizeof what, "%s seed %llu: read of b%d [%zu, %zu) after %d groups", s->name,
               (unsigned long long)seed, bi, off, off + len, g);
      ok &= compare(what, got, model[bi] + off, off, len);
      continue;
    }
    if (roll < 16) {
      /* A host-task group reading one window and updating another. */
      int ai = (int)below((size_t)nb), di;
      size_t len = 1 + below(N / 4), oa = below(N - len + 1), od = below(N - len + 1);
      syrah_accessor accs[2];
      syrah_host_task task;
      t_mix *h = (t_mix *)malloc(sizeof *h);
      if (!h) {
        T_FAIL("%s seed %llu group %d: out of host memory", s->name, (unsigned long long)seed, g);
        ok = 0;
        break;
      }
      do di = (int)below((size_t)nb);
      while (di == ai);
      h->len = len;
      h->salt = 7000u + (uint32_t)g;
      accs[0] = t_window(b[ai], SYRAH_ACCESS_READ, oa, len);
      accs[1] = t_window(b[di], SYRAH_ACCESS_READ_WRITE, od, len);
      task.run = t_run_mix;
      task.user_data = h;
      task.release = free; /* called once the task has run, or cannot */
      if (syrah_queue_submit_host_tasks(s->q[qi], accs, 2, &task, 1, NULL, 0, NULL) !=
          SYRAH_SUCCESS) {
        T_FAIL("%s seed %llu group %d: host task: %s", s->name, (unsigned long long)seed, g,
               syrah_last_error_message());
        free(h); /* a failed submission does not call the release */
        ok = 0;
        break;
      }
      ++t_checks;
      /* Not h->salt: the task may have run and released h already. */
      t_model_mix(model[ai] + oa, model[di] + od, len, 7000u + (uint32_t)g);
      continue;
    }
    if (roll >= 27 && roll < 29) {
      /* A buffer released while its commands may still run, and a new one
       * of the same size in its place (which may take over the released
       * one's device memory: what it holds must be its own). A buffer
       * that writes back waits for its commands at release: the gates
       * open first, and the data written back is checked. */
      int bi = (int)below((size_t)nb);
      syrah_buffer_desc bd;
      if (write_back[bi]) open_gates(&gt);
      EXPECT_OK(syrah_buffer_release(b[bi]));
      if (write_back[bi]) {
        snprintf(what, sizeof what, "%s seed %llu: b%d written back at its release after %d groups",
                 s->name, (unsigned long long)seed, bi, g);
        ok &= compare(what, host[bi], model[bi], 0, N);
      }
      write_back[bi] = (int)below(2);
      for (i = 0; i < N; ++i) host[bi][i] = model[bi][i] = (uint32_t)(g * 7919 + (int)i * 3);
      bd = t_desc1(N, host[bi], write_back[bi] ? SYRAH_HOST_WRITE_BACK : SYRAH_HOST_COPY_IN);
      bd.page_size[0] = pages[below(4)];
      b[bi] = NULL;
      if (syrah_buffer_create(&bd, &b[bi]) != SYRAH_SUCCESS) {
        T_FAIL("%s seed %llu group %d: new buffer %d: %s", s->name, (unsigned long long)seed, g, bi,
               syrah_last_error_message());
        ok = 0;
        break;
      }
      ++t_checks;
      continue;
    }
    if (roll >= 22 && roll < 27) {
      /* A fill of a window, with or without an event. */
      int di = (int)below((size_t)nb);
      size_t len = 1 + below(N / 4), od = below(N - len + 1);
      uint32_t value = 0x9e3779b9u * (uint32_t)(g + 1);
      syrah_accessor acc = t_window(b[di], below(2) ? SYRAH_ACCESS_WRITE : SYRAH_ACCESS_DISCARD_WRITE, od, len);
      syrah_event *ev = NULL;
      if (syrah_queue_fill_accessor(s->q[qi], &acc, &value, sizeof value, NULL, 0,
                                    rnd() % 3 == 0 ? &ev : NULL) != SYRAH_SUCCESS) {
        T_FAIL("%s seed %llu group %d: fill: %s", s->name, (unsigned long long)seed, g,
               syrah_last_error_message());
        ok = 0;
        break;
      }
      if (ev) EXPECT_OK(syrah_event_release(ev));
      ++t_checks;
      for (i = 0; i < len; ++i) model[di][od + i] = value;
      continue;
    }
    {
      int ai = (int)below((size_t)nb), bi = (int)below((size_t)nb), di;
      uint32_t mode = (uint32_t)below(4), salt = 1000u + (uint32_t)g;
      size_t len, oa, ob, od;
      syrah_event *ev = NULL;
      syrah_status st;
      do di = (int)below((size_t)nb);
      while (di == ai || di == bi);
      /* Mostly short windows, sometimes long ones. */
      len = 1 + (rnd() % 4 == 0 ? below(N) : below(N / 4));
      oa = below(N - len + 1);
      ob = below(N - len + 1);
      od = below(N - len + 1);
      if (roll < 22) {
        /* Held back by a user event of the queue's context, completed a
         * few groups later. */
        syrah_context *c = NULL;
        syrah_event *gate = NULL;
        EXPECT_OK(syrah_queue_get_context(s->q[qi], &c));
        if (c && syrah_user_event_create(c, &gate) == SYRAH_SUCCESS) gt.ev[gt.n++] = gate;
        if (c) syrah_context_release(c);
      }
      st = submit_step_after(s->q[qi], s->k[qi], b[ai], oa, b[bi], ob, b[di], od, len, salt,
                             mode, roll < 22 && gt.n ? gt.ev[gt.n - 1] : NULL,
                             rnd() % 5 == 0 ? &ev : NULL);
      if (st != SYRAH_SUCCESS) {
        T_FAIL("%s seed %llu group %d: %s", s->name, (unsigned long long)seed, g,
               syrah_last_error_message());
        ok = 0;
        break;
      }
      ++t_checks;
      model_apply(model[ai], oa, model[bi], ob, model[di], od, len, salt, mode);
      if (ev) {
        if (rnd() % 4 == 0) {
          open_gates(&gt);
          EXPECT_OK(syrah_event_wait(ev));
        }
        syrah_event_release(ev);
      }
    }
  }
  open_gates(&gt);
  for (j = 0; j < nb; ++j) {
    syrah_host_accessor *ha = NULL;
    uint32_t *p = NULL;
    if (!b[j]) continue; /* its replacement failed, as said */
    if (write_back[j] && rnd() % 2) continue; /* checked after the release */
    if (syrah_buffer_host_access(b[j], SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p) !=
        SYRAH_SUCCESS) {
      T_FAIL("%s seed %llu: final host accessor of b%d: %s", s->name, (unsigned long long)seed, j,
             syrah_last_error_message());
      ok = 0;
      continue;
    }
    snprintf(what, sizeof what, "%s seed %llu: b%d after %d groups", s->name,
             (unsigned long long)seed, j, groups);
    ok &= compare(what, p, model[j], 0, N);
    EXPECT_OK(syrah_host_accessor_release(ha));
  }
  for (j = 0; j < nb; ++j) {
    if (!b[j]) continue;
    EXPECT_OK(syrah_buffer_release(b[j]));
    if (write_back[j]) {
      snprintf(what, sizeof what, "%s seed %llu: b%d written back at release", s->name,
               (unsigned long long)seed, j);
      ok &= compare(what, host[j], model[j], 0, N);
    }
  }
  for (j = 0; j < s->nq; ++j) EXPECT_OK(syrah_queue_wait(s->q[j]));
  return ok && failures == t_failures;
}


static size_t ndev;
static const syrah_device *devs[64];
static char labels[64][160];

static void label_devices(void) {
  size_t i;
  if (syrah_get_devices(devs, 64, &ndev) != SYRAH_SUCCESS || ndev == 0) {
    T_FAIL("no device to test on: %s", syrah_last_error_message());
    ndev = 0;
  }
  if (ndev > 64) ndev = 64;
  for (i = 0; i < ndev; ++i) {
    char name[96] = "";
    uint64_t p = 0, d = 0;
    syrah_device_get_info_string(devs[i], SYRAH_DEVICE_INFO_NAME, name, sizeof name, NULL);
    syrah_device_get_info_u64(devs[i], SYRAH_DEVICE_INFO_PLATFORM_INDEX, &p);
    syrah_device_get_info_u64(devs[i], SYRAH_DEVICE_INFO_DEVICE_INDEX, &d);
    snprintf(labels[i], sizeof labels[i], "%llu.%llu %.60s", (unsigned long long)p,
             (unsigned long long)d, name);
  }
}

/* The settings run: each device with an in-order queue, an out-of-order
 * one, and both at once; each pair of devices with out-of-order queues,
 * and with one of each. Returns how many there are; fills `s` for `which`. */
static int make_setting(int which, setting *s) {
  int at = 0;
  size_t i, j;
  char name[256];
  for (i = 0; i < ndev; ++i) {
    static const syrah_queue_flags kinds[3][2] = {
        {SYRAH_QUEUE_IN_ORDER, 0}, {0, 0}, {SYRAH_QUEUE_IN_ORDER, 0}};
    static const char *names[3] = {"in-order queue", "out-of-order queue",
                                   "in-order and out-of-order queues"};
    int k;
    for (k = 0; k < 3; ++k, ++at)
      if (at == which) {
        const syrah_device *d[2];
        d[0] = d[1] = devs[i];
        snprintf(name, sizeof name, "[%.120s, %s]", labels[i], names[k]);
        t_device = labels[i];
        return open_setting(s, d, kinds[k], k == 2 ? 2 : 1, name) ? 1 : -1;
      }
  }
  for (i = 0; i < ndev; ++i)
    for (j = i + 1; j < ndev; ++j) {
      static const syrah_queue_flags kinds[2][2] = {{0, 0}, {SYRAH_QUEUE_IN_ORDER, 0}};
      int k;
      for (k = 0; k < 2; ++k, ++at)
        if (at == which) {
          const syrah_device *d[2];
          d[0] = devs[i];
          d[1] = devs[j];
          snprintf(name, sizeof name, "[%.80s + %.80s, %s]", labels[i], labels[j],
                   k == 0 ? "out-of-order queues" : "in-order and out-of-order queues");
          t_device = "device pair";
          return open_setting(s, d, kinds[k], 2, name) ? 1 : -1;
        }
    }
  return 0;
}

static int count_settings(void) {
  return (int)(ndev * 3 + ndev * (ndev - (ndev > 0)) / 2 * 2);
}

static void reproduce(int setting_index, uint64_t seed, int groups, int nb) {
  printf("reproduce with SYRAH_DAG_SETTING=%d SYRAH_DAG_SEED=%llu SYRAH_DAG_GROUPS=%d "
         "SYRAH_DAG_BUFFERS=%d test_dag\n",
         setting_index, (unsigned long long)seed, groups, nb);
}

static void run_fixed(void) {
  size_t i;
  for (i = 0; i < ndev; ++i) {
    int k, rep;
    for (k = 0; k < 2; ++k) {
      setting s;
      const syrah_device *d[1];
      syrah_queue_flags f[1];
      char name[256];
      d[0] = devs[i];
      f[0] = k == 0 ? 0 : SYRAH_QUEUE_IN_ORDER;
      snprintf(name, sizeof name, "%.120s, %s queue", labels[i], k == 0 ? "out-of-order" : "in-order");
      t_device = labels[i];
      if (!open_setting(&s, d, f, 1, name)) {
        close_setting(&s);
        continue;
      }
      printf("== seven groups, %s: 20 runs\n", name);
      for (rep = 0; rep < 20; ++rep) fixed_sequence(s.q[0], s.k[0], rep);
      close_setting(&s);
    }
  }
}

int main(int argc, char **argv) {
  int stress = argc > 1 && strcmp(argv[1], "stress") == 0;
  uint64_t seed = t_env_u64("SYRAH_DAG_SEED", stress ? (uint64_t)time(NULL) : 1);
  int groups = (int)t_env_u64("SYRAH_DAG_GROUPS", stress ? 3000 : 400);
  int nb = (int)t_env_u64("SYRAH_DAG_BUFFERS", stress ? 16 : 8);
  double seconds = (double)t_env_u64("SYRAH_STRESS_SECONDS", 30);
  int n, w, runs = 0;
  time_t start = time(NULL);
  exact_shape = t_env_u64("SYRAH_DAG_EXACT", 0) != 0;
  if (nb < 3) nb = 3;
  if (nb > MAX_BUFFERS) nb = MAX_BUFFERS;
  label_devices();
  n = count_settings();
  if (ndev < 2) t_skip("random runs on device pairs", "there is only one device");
  if (!stress) {
    int only = (int)t_env_u64("SYRAH_DAG_SETTING", (uint64_t)-1);
    if (only < 0) run_fixed();
    for (w = 0; w < n; ++w) {
      setting s;
      int r;
      uint64_t sd = only < 0 ? seed + (uint64_t)w : seed;
      if (only >= 0 && w != only) continue;
      r = make_setting(w, &s);
      if (r > 0) {
        printf("== random: %s, seed %llu, %d groups over %d buffers\n", s.name,
               (unsigned long long)sd, groups, nb);
        fflush(stdout);
        if (!random_run(&s, sd, groups, nb)) reproduce(w, sd, groups, nb);
        ++runs;
      }
      close_setting(&s);
    }
  } else {
    printf("== random runs for %.0f s from seed %llu, %d groups over %d buffers each\n", seconds,
           (unsigned long long)seed, groups, nb);
    for (w = 0; difftime(time(NULL), start) < seconds && t_failures == 0; ++w) {
      setting s;
      int r = make_setting(w % n, &s);
      if (r > 0) {
        if (!random_run(&s, seed + (uint64_t)w, groups, nb))
          reproduce(w % n, seed + (uint64_t)w, groups, nb);
        ++runs;
      }
      close_setting(&s);
    }
  }
  printf("%d random runs\n", runs);
  while (nkept > 0) EXPECT_OK(syrah_context_release(kept[--nkept].ctx));
  return t_finish(stress ? "test_dag stress" : "test_dag");
}
