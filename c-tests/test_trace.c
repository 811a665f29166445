/* SYRAH_TRACE and SYRAH_DAG: a small workload on every device, then the
 * trace and graph files are read back and checked against what ran.
 *   test_trace            writes and checks the files
 *   test_trace bad-path   the files cannot be created: work still runs */
#define _POSIX_C_SOURCE 200112L
#include "testing.h"

#include <unistd.h>

static const char *kSource =
    "__kernel void setv(__global int *p, int v) { p[get_global_id(0)] = v; }\n"
    "__kernel void addv(__global int *p, int v) { p[get_global_id(0)] += v; }\n";

enum { N = 4096, MAX_DEV = 16 };

/* Named after the process, so runs side by side do not meet. */
static char kTrace[64], kDag[64];

static int devices = 0, host_tasks_ok = 0;
static unsigned long long moved_bytes = 0, copies = 0;
static int out[N];

static syrah_status task_check(const syrah_host_task_context *ctx, void *user) {
  int *p = NULL, i;
  syrah_status st = syrah_host_task_get_pointer(ctx, 0, (void **)&p);
  (void)user;
  if (st != SYRAH_SUCCESS) return st;
  for (i = 0; i < N; ++i)
    if (p[i] != 5) return SYRAH_ERROR_EXECUTION_FAILED;
  ++host_tasks_ok;
  return SYRAH_SUCCESS;
}

/* kernel setv(5) -> host task reading -> kernel addv(1) -> host read. */
static void workload(const syrah_device *d) {
  syrah_queue *q = NULL;
  syrah_context *ctx = NULL;
  syrah_program *prog = NULL;
  syrah_kernel *setv = NULL, *addv = NULL;
  syrah_buffer *b = NULL, *c = NULL;
  syrah_buffer_desc bd;
  int seven = 7;
  syrah_buffer_stats stats;
  syrah_host_task task;
  syrah_accessor a;
  syrah_host_accessor *ha = NULL;
  int *p = NULL;
  REQUIRE_OK(syrah_queue_create(NULL, d, 0, NULL, NULL, &q));
  REQUIRE_OK(syrah_queue_get_context(q, &ctx));
  REQUIRE_OK(syrah_program_create_from_source(ctx, kSource, NULL, &prog));
  REQUIRE_OK(syrah_kernel_create(prog, "setv", &setv));
  REQUIRE_OK(syrah_kernel_create(prog, "addv", &addv));
  bd = t_desc1(N, NULL, SYRAH_HOST_NONE);
  REQUIRE_OK(syrah_buffer_create(&bd, &b));
  REQUIRE_OK(syrah_buffer_create(&bd, &c));
  EXPECT_OK(t_launch_rw(q, setv, b, N, 5, NULL));
  /* An explicit fill and an explicit copy out, each once in the trace. */
  a = t_whole(c, SYRAH_ACCESS_DISCARD_WRITE);
  EXPECT_OK(syrah_queue_fill_accessor(q, &a, &seven, sizeof seven, NULL, 0, NULL));
  a = t_whole(c, SYRAH_ACCESS_READ);
  out[N - 1] = 0;
  EXPECT_OK(syrah_queue_copy_from_accessor(q, &a, out, NULL, NULL, NULL, 0, NULL));
  memset(&task, 0, sizeof task);
  task.run = task_check;
  a = t_whole(b, SYRAH_ACCESS_READ);
  EXPECT_OK(syrah_queue_submit_host_tasks(q, &a, 1, &task, 1, NULL, 0, NULL));
  EXPECT_OK(t_launch_rw(q, addv, b, N, 1, NULL));
  EXPECT_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
  if (p) EXPECT_EQ(p[N - 1], 6);
  EXPECT_OK(syrah_host_accessor_release(ha));
  EXPECT_OK(syrah_queue_wait(q));
  EXPECT_EQ(out[N - 1], 7);
  EXPECT_OK(syrah_buffer_get_stats(b, &stats));
  moved_bytes += stats.host_to_device_bytes + stats.device_to_host_bytes + stats.device_to_device_bytes;
  copies += stats.host_to_device_copies + stats.device_to_host_copies + stats.device_to_device_copies;
  EXPECT_OK(syrah_buffer_get_stats(c, &stats));
  moved_bytes += stats.host_to_device_bytes + stats.device_to_host_bytes + stats.device_to_device_bytes;
  copies += stats.host_to_device_copies + stats.device_to_host_copies + stats.device_to_device_copies;
  ++devices;
  syrah_buffer_release(b);
  syrah_buffer_release(c);
  syrah_kernel_release(setv);
  syrah_kernel_release(addv);
  syrah_program_release(prog);
  syrah_queue_release(q);
  syrah_context_release(ctx);
}

/* The unsigned number after "key": in a record; `ok` cleared if absent. */
static unsigned long long num(const char *line, const char *key, int *ok) {
  char pat[64];
  const char *at;
  snprintf(pat, sizeof pat, "\"%s\":", key);
  at = strstr(line, pat);
  if (!at) {
    *ok = 0;
    return 0;
  }
  return strtoull(at + strlen(pat), NULL, 10);
}

/* A time field ("ts" or "dur", microseconds with three decimals) in ns. */
static unsigned long long time_ns(const char *line, const char *key, int *ok) {
  char pat[64];
  const char *at;
  char *end = NULL;
  unsigned long long us, frac = 0;
  snprintf(pat, sizeof pat, "\"%s\":", key);
  at = strstr(line, pat);
  if (!at) {
    *ok = 0;
    return 0;
  }
  us = strtoull(at + strlen(pat), &end, 10);
  if (end && *end == '.') frac = strtoull(end + 1, NULL, 10);
  return us * 1000 + frac;
}

typedef struct {
  unsigned long long pid, tid, id, start, end;
} span;

static void check_trace(void) {
  size_t len = 0, nspans = 0, i, j;
  char *text = t_slurp(kTrace, &len), *line;
  int kernels_set = 0, kernels_add = 0, tasks = 0, ok = 1, overlaps = 0, records = 0;
  unsigned long long copy_bytes = 0, copy_spans = 0, fill_bytes = 0;
  static span spans[4096];
  EXPECT_TRUE(text != NULL);
  if (!text) return;
  /* A complete JSON array, closed after the last flush. */
  EXPECT_TRUE(len > 4 && text[0] == '[' && strcmp(text + len - 3, "\n]\n") == 0);
  for (line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    if (!strstr(line, "\"ph\":\"X\"")) continue;
    ++records;
    if (strstr(line, "\"name\":\"kernel 'setv'\"")) ++kernels_set;
    if (strstr(line, "\"name\":\"kernel 'addv'\"")) ++kernels_add;
    if (strstr(line, "\"cat\":\"host task\"")) ++tasks;
    if (strstr(line, "\"cat\":\"copy\"")) {
      copy_bytes += num(line, "bytes", &ok);
      ++copy_spans;
    }
    if (strstr(line, "\"cat\":\"fill\"")) fill_bytes += num(line, "bytes", &ok);
    if (strstr(line, "\"failed\":true")) T_FAIL("a command is marked failed: %s", line);
    if (nspans < sizeof spans / sizeof spans[0]) {
      span *s = &spans[nspans++];
      s->pid = num(line, "pid", &ok);
      s->tid = num(line, "tid", &ok);
      s->id = num(line, "id", &ok);
      s->start = time_ns(line, "ts", &ok);
      s->end = s->start + time_ns(line, "dur", &ok);
    }
  }
  EXPECT_TRUE(ok);
  EXPECT_EQ(nspans, records); /* none left out of the checks below */
  EXPECT_EQ(kernels_set, devices);
  EXPECT_EQ(kernels_add, devices);
  EXPECT_EQ(tasks, devices);
  EXPECT_EQ(host_tasks_ok, devices);
  /* Every transfer the buffers counted is on the timelines, bytes and all,
   * and so is each explicit copy (which buffer counters leave out). */
  EXPECT_EQ(copy_bytes, moved_bytes + (unsigned long long)devices * N * sizeof(int));
  EXPECT_EQ(copy_spans, copies + (unsigned long long)devices);
  /* Commands of one lane run one after the other. */
  for (i = 0; i < nspans; ++i)
    for (j = 0; j < nspans; ++j)
      if (i != j && spans[i].pid == spans[j].pid && spans[i].tid == spans[j].tid &&
          spans[i].pid != 1 && spans[i].id < spans[j].id && spans[i].end > spans[j].start)
        ++overlaps;
  EXPECT_EQ(overlaps, 0);
  /* Each command once, however many lists kept it. */
  for (i = 0, overlaps = 0; i < nspans; ++i)
    for (j = i + 1; j < nspans; ++j)
      if (spans[i].id == spans[j].id) ++overlaps;
  EXPECT_EQ(overlaps, 0);
  EXPECT_EQ(fill_bytes, (unsigned long long)devices * N * sizeof(int));
  printf("trace: %zu spans, %llu copies of %llu bytes in all\n", nspans, copy_spans, copy_bytes);
  free(text);
}

typedef struct {
  unsigned long long id;
  char label[256];
} node;

static void check_dag(void) {
  size_t len = 0, nn = 0, i;
  char *text = t_slurp(kDag, &len), *line;
  static node nodes[4096];
  int task_to_add = 0, into_task = 0, task_nodes = 0;
  EXPECT_TRUE(text != NULL);
  if (!text) return;
  EXPECT_TRUE(strncmp(text, "digraph syrah {", 15) == 0 && strcmp(text + len - 3, "\n}\n") == 0);
  for (line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    unsigned long long a = 0, b = 0;
    if (nn < sizeof nodes / sizeof nodes[0] &&
        sscanf(line, " n%llu [shape=%*[^,], label=\"%255[^\"]", &nodes[nn].id, nodes[nn].label) == 2) {
      if (strncmp(nodes[nn].label, "host task", 9) == 0) ++task_nodes;
      ++nn;
    } else if (sscanf(line, " n%llu -> n%llu;", &a, &b) == 2) {
      const char *la = "", *lb = "";
      for (i = 0; i < nn; ++i) {
        if (nodes[i].id == a) la = nodes[i].label;
        if (nodes[i].id == b) lb = nodes[i].label;
      }
      if (!la[0] || !lb[0]) T_FAIL("edge n%llu -> n%llu names a node not declared before it", a, b);
      if (strncmp(la, "host task", 9) == 0 && strncmp(lb, "kernel 'addv'", 13) == 0) ++task_to_add;
      if (strncmp(lb, "host task", 9) == 0) ++into_task;
    }
  }
  EXPECT_EQ(task_nodes, devices);
  /* addv writes what the host task reads: it waits for it. */
  EXPECT_EQ(task_to_add, devices);
  EXPECT_TRUE(into_task >= devices);
  printf("graph: %zu nodes\n", nn);
  free(text);
}

int main(int argc, char **argv) {
  int bad = argc > 1 && strcmp(argv[1], "bad-path") == 0;
  if (bad) {
    setenv("SYRAH_TRACE", "/nonexistent-syrah-dir/trace.json", 1);
    setenv("SYRAH_DAG", "/nonexistent-syrah-dir/graph.dot", 1);
  } else {
    snprintf(kTrace, sizeof kTrace, "syrah_test_trace_%ld.json", (long)getpid());
    snprintf(kDag, sizeof kDag, "syrah_test_trace_%ld.dot", (long)getpid());
    setenv("SYRAH_TRACE", kTrace, 1);
    setenv("SYRAH_DAG", kDag, 1);
  }
  t_for_each_device(workload);
  EXPECT_EQ(host_tasks_ok, devices);
  if (!bad) {
    check_trace();
    check_dag();
    /* Kept for a look when something failed. */
    if (t_failures == 0) {
      remove(kTrace);
      remove(kDag);
    }
  }
  return t_finish(bad ? "trace_bad_path" : "trace");
}
