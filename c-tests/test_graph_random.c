/* A seeded, randomised checker of command graphs against a CPU model: a
 * random graph of kernels over buffers (accessors, every write mode),
 * kernels, copies and fills on device USM (chained through their events)
 * and host tasks, or (one run in four each) kernels on buffers only or a
 * chain of them, is recorded on an in-order or out-of-order queue,
 * finalised, then submitted several times with eager commands of the same
 * kinds, argument updates (a value, a USM pointer) and reads between the
 * submissions. Every buffer and allocation is compared word for word with
 * the model at the reads and at the end.
 *
 *   test_graph_random          one run per device (seed 1 unless set)
 *   test_graph_random stress   new seeds for SYRAH_STRESS_SECONDS (30 unless set)
 *
 * SYRAH_GRAPH_RANDOM_SEED sets the first seed, SYRAH_GRAPH_RANDOM_STEPS the
 * steps after the recording; a failure prints the line that reproduces
 * it. */
#include "testing.h"

#include <stdint.h>
#include <time.h>

enum { N = 2048, NB = 4, NU = 3, MAX_NODES = 12, MAX_STEPS = 4096 };

static const char *kSource =
    "__kernel void gstep(__global const uint *s, __global uint *d, uint salt, uint mode, uint n) {\n"
    "  size_t i = get_global_id(0);\n"
    "  if (i >= n) return;\n"
    "  uint x = s[i] + salt;\n"
    "  if (mode == 0u) d[i] = d[i] * 3u + x;\n"
    "  else if (mode == 1u) d[i] = x ^ 0x5a5a5a5au;\n"
    "  else d[i] = d[i] + x * 7u;\n"
    "}\n";

/* What a kernel does to one element (mode as in the kernel). */
static uint32_t model_step(uint32_t d, uint32_t s, uint32_t salt, uint32_t mode) {
  uint32_t x = s + salt;
  return mode == 0 ? d * 3u + x : mode == 1 ? x ^ 0x5a5a5a5au : d + x * 7u;
}

typedef enum { BUF_KERNEL, USM_KERNEL, USM_COPY, USM_FILL, HOST_TASK, KINDS } kind;

/* One command: its kind, the arrays (buffers or allocations) it reads
 * and writes, their windows, and its values. */
typedef struct {
  kind k;
  int src, dst;
  size_t so, dof, len;
  uint32_t salt, mode;
  int discard;
} op;

typedef struct {
  const syrah_device *dev;
  syrah_queue *q;
  syrah_context *ctx;
  syrah_program *prog;
  syrah_kernel *k;
  syrah_buffer *b[NB];
  uint32_t *u[NU];
  int nu; /* allocations (0 without device USM) */
  uint32_t mb[NB][N], mu[NU][N]; /* the model */
  syrah_event *last_usm;         /* the latest command on USM, outside a graph */
  char name[160];
} env;

static uint64_t rng;
static uint32_t rnd(void) { return t_rnd(&rng); }
static size_t below(size_t n) { return n ? rnd() % n : 0; }

/* A random command of a kind the device takes. */
static op random_op(const env *e, int g) {
  op o;
  memset(&o, 0, sizeof o);
  do o.k = (kind)below(KINDS);
  while (e->nu == 0 && o.k != BUF_KERNEL && o.k != HOST_TASK);
  {
    int n = o.k == BUF_KERNEL || o.k == HOST_TASK ? NB : e->nu;
    o.src = (int)below((size_t)n);
    do o.dst = (int)below((size_t)n);
    while (o.dst == o.src);
  }
  o.len = 1 + (rnd() % 4 == 0 ? below(N) : below(N / 4));
  o.so = below(N - o.len + 1);
  o.dof = below(N - o.len + 1);
  o.salt = 1000u + (uint32_t)g * 17u + (rnd() & 0xff);
  o.mode = (uint32_t)below(3);
  o.discard = o.mode == 1 && rnd() % 2;
  return o;
}

/* Applies `o` to the model. */
static void model_apply(env *e, const op *o) {
  size_t i;
  switch (o->k) {
    case BUF_KERNEL:
      for (i = 0; i < o->len; ++i)
        e->mb[o->dst][o->dof + i] = model_step(e->mb[o->dst][o->dof + i], e->mb[o->src][o->so + i], o->salt, o->mode);
      break;
    case USM_KERNEL:
      for (i = 0; i < o->len; ++i)
        e->mu[o->dst][o->dof + i] = model_step(e->mu[o->dst][o->dof + i], e->mu[o->src][o->so + i], o->salt, o->mode);
      break;
    case USM_COPY:
      memcpy(&e->mu[o->dst][o->dof], &e->mu[o->src][o->so], o->len * sizeof(uint32_t));
      break;
    case USM_FILL:
      for (i = 0; i < o->len; ++i) e->mu[o->dst][o->dof + i] = o->salt;
      break;
    case HOST_TASK:
      t_model_mix(&e->mb[o->src][o->so], &e->mb[o->dst][o->dof], o->len, o->salt);
      break;
    default:
      break;
  }
}

/* Submits `o` to the queue (recorded where it records). Commands on USM
 * follow the latest one (`*chain`, replaced by this one's event). */
static syrah_status submit_op(env *e, const op *o, syrah_event **chain) {
  syrah_range r = syrah_range_1d(N);
  uint32_t n = (uint32_t)o->len;
  syrah_kernel_arg args[5];
  syrah_event *ev = NULL;
  const syrah_event *const *deps = (const syrah_event *const *)chain;
  size_t ndeps = *chain ? 1 : 0;
  syrah_status st;
  r.local_size[0] = 32;
  args[2] = syrah_arg_value(&o->salt, sizeof o->salt);
  args[3] = syrah_arg_value(&o->mode, sizeof o->mode);
  args[4] = syrah_arg_value(&n, sizeof n);
  switch (o->k) {
    case BUF_KERNEL: {
      syrah_accessor a[2];
      a[0] = t_window(e->b[o->src], SYRAH_ACCESS_READ, o->so, o->len);
      a[1] = t_window(e->b[o->dst],
                 o->mode != 1 ? SYRAH_ACCESS_READ_WRITE : o->discard ? SYRAH_ACCESS_DISCARD_WRITE : SYRAH_ACCESS_WRITE,
                 o->dof, o->len);
      args[0] = syrah_arg_accessor(0);
      args[1] = syrah_arg_accessor(1);
      return syrah_queue_submit_kernel(e->q, e->k, &r, a, 2, args, 5, NULL, 0, NULL);
    }
    case HOST_TASK: {
      syrah_accessor a[2];
      syrah_host_task task;
      t_mix *h = (t_mix *)malloc(sizeof *h);
      if (!h) return SYRAH_ERROR_OUT_OF_HOST_MEMORY;
      h->len = o->len;
      h->salt = o->salt;
      a[0] = t_window(e->b[o->src], SYRAH_ACCESS_READ, o->so, o->len);
      a[1] = t_window(e->b[o->dst], SYRAH_ACCESS_READ_WRITE, o->dof, o->len);
      task.run = t_run_mix;
      task.user_data = h;
      task.release = free; /* once the task will not run again */
      st = syrah_queue_submit_host_tasks(e->q, a, 2, &task, 1, NULL, 0, NULL);
      if (st != SYRAH_SUCCESS) free(h); /* a failed submission does not release */
      return st;
    }
    case USM_KERNEL:
      args[0] = syrah_arg_usm(e->u[o->src] + o->so);
      args[1] = syrah_arg_usm(e->u[o->dst] + o->dof);
      st = syrah_queue_launch(e->q, e->k, &r, args, 5, deps, ndeps, &ev);
      break;
    case USM_COPY:
      st = syrah_queue_memcpy(e->q, e->u[o->dst] + o->dof, e->u[o->src] + o->so, o->len * sizeof(uint32_t), deps, ndeps,
                              &ev);
      break;
    case USM_FILL:
      st = syrah_queue_fill(e->q, e->u[o->dst] + o->dof, &o->salt, sizeof o->salt, o->len * sizeof(uint32_t), deps,
                            ndeps, &ev);
      break;
    default:
      return SYRAH_ERROR_INVALID_ARGUMENT;
  }
  if (st == SYRAH_SUCCESS) {
    if (*chain) syrah_event_release(*chain);
    *chain = ev;
  }
  return st;
}

/* Compares every array with the model (the queue waited for first). */
static int compare_all(env *e, const char *when) {
  static uint32_t got[N];
  size_t off[3] = {0, 0, 0}, range[3] = {N, 0, 0};
  int j, ok = 1;
  size_t i, wrong, first;
  if (syrah_queue_wait(e->q) != SYRAH_SUCCESS) {
    T_FAIL("%s, %s: queue wait: %s", e->name, when, syrah_last_error_message());
    return 0;
  }
  for (j = 0; j < NB + e->nu; ++j) {
    const uint32_t *want = j < NB ? e->mb[j] : e->mu[j - NB];
    syrah_status st = j < NB ? syrah_buffer_read(e->b[j], off, range, got)
                             : syrah_queue_memcpy(e->q, got, e->u[j - NB], sizeof got, NULL, 0, NULL);
    if (st == SYRAH_SUCCESS && j >= NB) st = syrah_queue_wait(e->q);
    ++t_checks;
    if (st != SYRAH_SUCCESS) {
      T_FAIL("%s, %s: reading %s %d: %s", e->name, when, j < NB ? "buffer" : "allocation", j < NB ? j : j - NB,
             syrah_last_error_message());
      ok = 0;
      continue;
    }
    for (i = 0, wrong = 0, first = 0; i < N; ++i)
      if (got[i] != want[i] && !wrong++) first = i;
    if (wrong) {
      T_FAIL("%s, %s: %s %d: %zu of %d words wrong, the first at %zu (%u, expected %u)", e->name, when,
             j < NB ? "buffer" : "allocation", j < NB ? j : j - NB, wrong, N, first, got[first], want[first]);
      ok = 0;
    }
  }
  return ok;
}

static int steps = 24;
/* Submissions made, and those that found their buffers unchanged. */
static unsigned long long submissions_total, unchanged_total;

static void env_close(env *e) {
  int j;
  if (e->q) syrah_queue_wait(e->q);
  if (e->last_usm) syrah_event_release(e->last_usm);
  for (j = 0; j < NB; ++j)
    if (e->b[j]) syrah_buffer_release(e->b[j]);
  for (j = 0; j < e->nu; ++j)
    if (e->u[j]) syrah_free(e->ctx, e->u[j]);
  if (e->k) syrah_kernel_release(e->k);
  if (e->prog) syrah_program_release(e->prog);
  if (e->q) syrah_queue_release(e->q);
  if (e->ctx) syrah_context_release(e->ctx);
}

static int env_open(env *e, const syrah_device *d, uint64_t seed) {
  static uint32_t init[N];
  int j;
  size_t i;
  memset(e, 0, sizeof *e);
  e->dev = d;
  rng = t_seed_state(seed);
  {
    int in_order = (int)(rnd() % 2);
    snprintf(e->name, sizeof e->name, "%s, %s queue, seed %llu", t_label(d), in_order ? "in-order" : "out-of-order",
             (unsigned long long)seed);
    e->ctx = t_context_of(d);
    if (!e->ctx || syrah_context_retain(e->ctx) != SYRAH_SUCCESS) {
      e->ctx = NULL;
      return 0;
    }
    if (syrah_queue_create(e->ctx, d, in_order ? SYRAH_QUEUE_IN_ORDER : 0, NULL, NULL, &e->q) != SYRAH_SUCCESS) return 0;
  }
  if (syrah_program_create_from_source(e->ctx, kSource, NULL, &e->prog) != SYRAH_SUCCESS ||
      syrah_kernel_create(e->prog, "gstep", &e->k) != SYRAH_SUCCESS)
    return 0;
  for (j = 0; j < NB; ++j) {
    syrah_buffer_desc bd = t_desc1(N, init, SYRAH_HOST_COPY_IN);
    for (i = 0; i < N; ++i) init[i] = e->mb[j][i] = (uint32_t)(j * 100000 + (int)i);
    bd.page_size[0] = (size_t)64 << below(5);
    if (syrah_buffer_create(&bd, &e->b[j]) != SYRAH_SUCCESS) return 0;
  }
  e->nu = t_has(d, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS) ? NU : 0;
  for (j = 0; j < e->nu; ++j) {
    for (i = 0; i < N; ++i) init[i] = e->mu[j][i] = (uint32_t)(j * 7919 + (int)i * 3);
    if (syrah_malloc_device(e->ctx, d, N * sizeof(uint32_t), (void **)&e->u[j]) != SYRAH_SUCCESS ||
        syrah_queue_memcpy(e->q, e->u[j], init, sizeof init, NULL, 0, NULL) != SYRAH_SUCCESS ||
        syrah_queue_wait(e->q) != SYRAH_SUCCESS)
      return 0;
  }
  return 1;
}

/* One run: a random graph, then `steps` random steps (a submission of the
 * graph, an eager command, an argument update, or a read of everything). */
static int random_run(env *e) {
  op nodes[MAX_NODES];
  int nn = 3 + (int)below(MAX_NODES - 2), i, s, ok = 1, failures = t_failures, chain_of_buffers, kernels_only;
  syrah_graph *g = NULL;
  syrah_graph_exec *x = NULL;
  syrah_event *chain = NULL;
  char when[96];
  if (syrah_queue_begin_recording(e->q) != SYRAH_SUCCESS) {
    T_FAIL("%s: begin recording: %s", e->name, syrah_last_error_message());
    return 0;
  }
  /* One graph in four is a chain of kernels on buffers, each reading what
   * the one before wrote, and one in four kernels on buffers only: the
   * graph enqueues such kernels itself (as one command, or over lanes of
   * its own) and manages their buffers, and a submission that finds them
   * as the last one left them prepares nothing. */
  kernels_only = rnd() % 2 == 0;
  chain_of_buffers = kernels_only && rnd() % 2 == 0;
  for (i = 0; i < nn; ++i) {
    nodes[i] = random_op(e, i);
    if (kernels_only && nodes[i].k != BUF_KERNEL) {
      nodes[i].k = BUF_KERNEL;
      nodes[i].src %= NB;
      nodes[i].dst %= NB;
      while (nodes[i].dst == nodes[i].src) nodes[i].dst = (int)below(NB);
    }
    if (chain_of_buffers) {
      if (i > 0) {
        nodes[i].src = nodes[i - 1].dst;
        nodes[i].so = nodes[i - 1].dof;
        nodes[i].len = nodes[i - 1].len;
      }
      while (nodes[i].dst == nodes[i].src) nodes[i].dst = (int)below(NB);
      if (nodes[i].dof + nodes[i].len > N) nodes[i].dof = below(N - nodes[i].len + 1);
    }
    if (submit_op(e, &nodes[i], &chain) != SYRAH_SUCCESS) {
      T_FAIL("%s: recording node %d (kind %d): %s", e->name, i, (int)nodes[i].k, syrah_last_error_message());
      ok = 0;
      break;
    }
  }
  /* A recorded event only names its node to later recorded commands. */
  if (chain) syrah_event_release(chain);
  if (syrah_queue_end_recording(e->q, &g) != SYRAH_SUCCESS || syrah_graph_finalize(g, &x) != SYRAH_SUCCESS) {
    T_FAIL("%s: ending or finalising the graph: %s", e->name, syrah_last_error_message());
    if (g) syrah_graph_release(g);
    return 0;
  }
  for (s = 0; s < steps && ok; ++s) {
    uint32_t roll = rnd() % 100;
    if (roll < 45) {
      syrah_event *ev = NULL;
      const syrah_event *dep = e->last_usm;
      if (syrah_queue_submit_graph(e->q, x, dep ? &dep : NULL, dep ? 1 : 0, &ev) != SYRAH_SUCCESS) {
        T_FAIL("%s: submission at step %d: %s", e->name, s, syrah_last_error_message());
        ok = 0;
        break;
      }
      if (e->last_usm) syrah_event_release(e->last_usm);
      e->last_usm = ev;
      for (i = 0; i < nn; ++i) model_apply(e, &nodes[i]);
      ++t_checks;
    } else if (roll < 75) {
      op o = random_op(e, 1000 + s);
      if (submit_op(e, &o, &e->last_usm) != SYRAH_SUCCESS) {
        T_FAIL("%s: eager command (kind %d) at step %d: %s", e->name, (int)o.k, s, syrah_last_error_message());
        ok = 0;
        break;
      }
      model_apply(e, &o);
      ++t_checks;
    } else if (roll < 90) {
      /* A kernel node's salt, or a USM kernel node's source. */
      int node = (int)below((size_t)nn);
      op *o = &nodes[node];
      syrah_kernel_arg a;
      size_t index = 2;
      uint32_t salt = o->salt + 1u + (rnd() & 0xff);
      int src = o->src;
      size_t so = o->so;
      if (o->k != BUF_KERNEL && o->k != USM_KERNEL) continue;
      if (o->k == USM_KERNEL && rnd() % 2) {
        do src = (int)below((size_t)e->nu);
        while (src == o->dst);
        so = below(N - o->len + 1);
        a = syrah_arg_usm(e->u[src] + so);
        index = 0;
      } else {
        a = syrah_arg_value(&salt, sizeof salt);
      }
      if (syrah_graph_exec_set_arg(x, (size_t)node, index, &a) != SYRAH_SUCCESS) {
        T_FAIL("%s: setting argument %zu of node %d at step %d: %s", e->name, index, node, s,
               syrah_last_error_message());
        ok = 0;
        break;
      }
      if (index == 0) {
        o->src = src;
        o->so = so;
      } else {
        o->salt = salt;
      }
      ++t_checks;
    } else {
      snprintf(when, sizeof when, "after step %d", s);
      ok &= compare_all(e, when);
    }
  }
  snprintf(when, sizeof when, "at the end (%d nodes, %d steps)", nn, steps);
  ok &= compare_all(e, when);
  {
    syrah_graph_exec_stats gs;
    EXPECT_OK(syrah_graph_exec_get_stats(x, &gs));
    unchanged_total += gs.buffers_unchanged;
    submissions_total += gs.submissions;
  }
  EXPECT_OK(syrah_graph_exec_release(x));
  EXPECT_OK(syrah_graph_release(g));
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
static t_checker checker = {"test_graph_random", "SYRAH_GRAPH_RANDOM", 0, one_run};

int main(int argc, char **argv) {
  uint64_t first_seed;
  int rc;
  bool stress = t_checker_args(&checker, argc, argv, 24, 60, MAX_STEPS, &first_seed);
  steps = checker.steps;
  /* A few seeds per device: each draws its queue's kind and its graph. */
  rc = t_checker_main(&checker, stress, first_seed, 4, NULL, NULL);
  printf("test_graph_random: %llu graph submissions, %llu of them with their buffers unchanged\n", submissions_total,
         unchanged_total);
  return rc;
}
