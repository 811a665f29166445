/* Transfer bandwidth, Syrah against raw OpenCL on one device, in one run:
 * host to device (h2d), device to host (d2h) and device to device (d2d),
 * from 4 KiB up to a largest size (default 1 GiB), by factors of 4.
 *
 * Paths:
 *   raw buffer    clEnqueueWriteBuffer / ReadBuffer / CopyBuffer on cl_mem
 *   raw svm       clEnqueueSVMMemcpy with coarse-grain SVM (where the
 *                 device has SVM)
 *   syrah usm     syrah_queue_memcpy with a device allocation
 *   syrah buffer  migration of a buffer's pages: h2d is a one-work-item
 *                 kernel reading the whole buffer after the host wrote it
 *                 (the launch is timed too); d2h is syrah_buffer_update_host
 *                 after a kernel wrote it; d2d is syrah_queue_copy_accessor
 *                 between two device-resident buffers
 * Host memory: ordinary (page-aligned malloc) or pinned. Raw paths pin with
 * a mapped CL_MEM_ALLOC_HOST_PTR buffer; Syrah's paths use
 * syrah_malloc_pinned (host USM where the device has it, else such a
 * mapped buffer; skipped, and said so, if it fails). Each figure is the
 * median of several timed repetitions after one untimed; every path's data
 * is checked word by word. Sizes go one at a time, in rounds (default 3)
 * of every raw path then every Syrah path; a figure is the median over the
 * rounds, so that the device's and host's own changes over time (a noisy
 * neighbour, a clock) reach both sides alike.
 *
 * usage: bench_bandwidth P.D [largest bytes] [smallest bytes] [rounds] */
#include "bench_common.h"

#include <pthread.h>
#include <unistd.h>

static const char *source =
    "__kernel void touch(__global const uint *p) { (void)p; }\n"
    "__kernel void flip(__global uint *p, uint v) { p[get_global_id(0)] ^= v; }\n";

enum { H2D, D2H, D2D, DIRS };
enum { PAGEABLE, PINNED, KINDS };
enum { RAW_BUFFER, RAW_SVM, SY_USM, SY_BUFFER, PATHS };
enum { MAX_SIZES = 16, MAX_ROUNDS = 9 };

static const char *dir_name[DIRS] = {"h2d", "d2h", "d2d"};
static const char *kind_name[KINDS] = {"ordinary", "pinned"};
static const char *path_name[PATHS] = {"raw buffer", "raw svm", "syrah usm", "syrah buffer"};

/* GB/s per path, direction, host memory and size; 0: not run. During a
 * round, that round's figures; at the end, the median over the rounds. */
static double gbps[PATHS][DIRS][KINDS][MAX_SIZES];
static double per_round[MAX_ROUNDS][PATHS][DIRS][KINDS][MAX_SIZES];
static const char *skipped[PATHS][KINDS];
static size_t sizes[MAX_SIZES];
static int nsizes;
static int wrong;

static int reps_for(size_t n) { return n <= ((size_t)1 << 20) ? 20 : n <= ((size_t)64 << 20) ? 8 : 4; }

static cl_uint word(size_t i, cl_uint seed) { return (cl_uint)(i * 2654435761u) ^ seed; }

static void pattern(void *p, size_t n, cl_uint seed) {
  cl_uint *w = (cl_uint *)p;
  size_t i;
  for (i = 0; i < n / 4; ++i) w[i] = word(i, seed);
}

static void check(const char *what, const void *p, size_t n, cl_uint seed, const char *who, int kind) {
  const cl_uint *w = (const cl_uint *)p;
  size_t i;
  for (i = 0; i < n / 4; ++i)
    if (w[i] != word(i, seed)) {
      fprintf(stderr, "WRONG: %s %s from %s memory, %zu bytes: word %zu is %u, expected %u\n", who,
              what, kind_name[kind], n, i, w[i], word(i, seed));
      ++wrong;
      return;
    }
}

/* Times runs of `op` after one untimed: reps_for(n) of them, or as many as
 * fit in about 20 ms where that is more (at most 31), since short runs move
 * more between repetitions. Returns GB/s of the median. */
typedef void (*op_fn)(void *ctx);
static double timed(op_fn op, void *ctx, size_t n) {
  double t[32], t0 = now_us(), once;
  int i, reps = reps_for(n);
  op(ctx);
  once = now_us() - t0;
  if (once > 0 && 20000.0 / once > reps) reps = 20000.0 / once > 31 ? 31 : (int)(20000.0 / once);
  for (i = 0; i < reps; ++i) {
    double t0 = now_us();
    op(ctx);
    t[i] = now_us() - t0;
  }
  return (double)n / (median(t, reps) * 1e3);
}

/* ---- host memory copy: what host threads copy on their own -------------
 * Threads started once take 256 KiB pieces in order from ordinary memory
 * into pinned memory, as Syrah's staging does: the rate at which staging's
 * host side could fill pinned memory with the device idle. */

enum { HOST_PIECE = 256 << 10, MAX_THREADS = 64 };

static struct {
  pthread_t t[MAX_THREADS];
  pthread_barrier_t go, done;
  pthread_mutex_t lock;
  size_t next, n;
  char *dst;
  const char *src;
  int stop;
} hp;
static int host_threads = 1;
static double host_gbps[MAX_SIZES];

static void *host_worker(void *unused) {
  (void)unused;
  for (;;) {
    pthread_barrier_wait(&hp.go);
    if (hp.stop) return NULL;
    for (;;) {
      size_t off, len;
      pthread_mutex_lock(&hp.lock);
      off = hp.next;
      hp.next += HOST_PIECE;
      pthread_mutex_unlock(&hp.lock);
      if (off >= hp.n) break;
      len = hp.n - off < HOST_PIECE ? hp.n - off : HOST_PIECE;
      memcpy(hp.dst + off, hp.src + off, len);
    }
    pthread_barrier_wait(&hp.done);
  }
}

static void host_run(void *unused) {
  (void)unused;
  hp.next = 0;
  pthread_barrier_wait(&hp.go);
  pthread_barrier_wait(&hp.done);
}

static void host_all(void *src, void *dst) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int i, si;
  host_threads = cpus < 1 ? 1 : cpus > MAX_THREADS ? MAX_THREADS : (int)cpus;
  pthread_mutex_init(&hp.lock, NULL);
  pthread_barrier_init(&hp.go, NULL, (unsigned)host_threads + 1);
  pthread_barrier_init(&hp.done, NULL, (unsigned)host_threads + 1);
  for (i = 0; i < host_threads; ++i)
    if (pthread_create(&hp.t[i], NULL, host_worker, NULL) != 0) {
      fprintf(stderr, "pthread_create failed\n");
      exit(1);
    }
  hp.dst = (char *)dst;
  hp.src = (const char *)src;
  for (si = 0; si < nsizes; ++si) {
    hp.n = sizes[si];
    pattern(src, hp.n, (cl_uint)si);
    host_gbps[si] = timed(host_run, NULL, hp.n);
    check("copy", dst, hp.n, (cl_uint)si, "host memcpy", PAGEABLE);
  }
  hp.stop = 1;
  pthread_barrier_wait(&hp.go);
  for (i = 0; i < host_threads; ++i) pthread_join(hp.t[i], NULL);
  pthread_barrier_destroy(&hp.go);
  pthread_barrier_destroy(&hp.done);
  pthread_mutex_destroy(&hp.lock);
}

/* ---- raw OpenCL ---------------------------------------------------- */

typedef struct {
  raw_env e;
  int svm;
  cl_mem pin_mem[2];
  void *pin[2];
} raw_state;

typedef struct {
  raw_state *r;
  int dir, svm;
  size_t n;
  cl_mem a, b;
  void *sa, *sb;
  void *host_src, *host_dst;
} raw_op;

static void raw_run(void *p) {
  raw_op *o = (raw_op *)p;
  cl_command_queue q = o->r->e.q;
  if (o->svm) {
    if (o->dir == H2D) CL_OK(clEnqueueSVMMemcpy(q, CL_FALSE, o->sa, o->host_src, o->n, 0, NULL, NULL));
    if (o->dir == D2H) CL_OK(clEnqueueSVMMemcpy(q, CL_FALSE, o->host_dst, o->sa, o->n, 0, NULL, NULL));
    if (o->dir == D2D) CL_OK(clEnqueueSVMMemcpy(q, CL_FALSE, o->sb, o->sa, o->n, 0, NULL, NULL));
  } else {
    if (o->dir == H2D) CL_OK(clEnqueueWriteBuffer(q, o->a, CL_FALSE, 0, o->n, o->host_src, 0, NULL, NULL));
    if (o->dir == D2H) CL_OK(clEnqueueReadBuffer(q, o->a, CL_FALSE, 0, o->n, o->host_dst, 0, NULL, NULL));
    if (o->dir == D2D) CL_OK(clEnqueueCopyBuffer(q, o->a, o->b, 0, 0, o->n, 0, NULL, NULL));
  }
  CL_OK(clFinish(q));
}

/* One raw path at one size from one kind of host memory: h2d, d2h (the
 * data checked), and d2d from ordinary memory only (the host is not
 * involved), checked after a read back. */
static void raw_size(raw_state *r, int svm, int kind, void *src, void *dst, int si) {
  size_t n = sizes[si];
  int path = svm ? RAW_SVM : RAW_BUFFER;
  cl_int err;
  raw_op o;
  memset(&o, 0, sizeof o);
  o.r = r;
  o.svm = svm;
  o.n = n;
  o.host_src = src;
  o.host_dst = dst;
  if (svm) {
    o.sa = clSVMAlloc(r->e.ctx, CL_MEM_READ_WRITE, n, 0);
    o.sb = clSVMAlloc(r->e.ctx, CL_MEM_READ_WRITE, n, 0);
    if (!o.sa || !o.sb) {
      fprintf(stderr, "clSVMAlloc of %zu bytes failed\n", n);
      exit(1);
    }
  } else {
    o.a = clCreateBuffer(r->e.ctx, CL_MEM_READ_WRITE, n, NULL, &err);
    CL_OK(err);
    o.b = clCreateBuffer(r->e.ctx, CL_MEM_READ_WRITE, n, NULL, &err);
    CL_OK(err);
  }
  pattern(src, n, (cl_uint)si);
  memset(dst, 0, n);
  o.dir = H2D;
  gbps[path][H2D][kind][si] = timed(raw_run, &o, n);
  o.dir = D2H;
  gbps[path][D2H][kind][si] = timed(raw_run, &o, n);
  check("h2d then d2h", dst, n, (cl_uint)si, path_name[path], kind);
  if (kind == PAGEABLE) {
    o.dir = D2D;
    gbps[path][D2D][kind][si] = timed(raw_run, &o, n);
    memset(dst, 0, n);
    if (svm)
      CL_OK(clEnqueueSVMMemcpy(r->e.q, CL_TRUE, dst, o.sb, n, 0, NULL, NULL));
    else
      CL_OK(clEnqueueReadBuffer(r->e.q, o.b, CL_TRUE, 0, n, dst, 0, NULL, NULL));
    check("d2d", dst, n, (cl_uint)si, path_name[path], kind);
  }
  if (svm) {
    clSVMFree(r->e.ctx, o.sa);
    clSVMFree(r->e.ctx, o.sb);
  } else {
    CL_OK(clReleaseMemObject(o.a));
    CL_OK(clReleaseMemObject(o.b));
  }
}

static void raw_begin(raw_state *rp, unsigned p, unsigned d) {
  raw_state r;
  cl_int err;
  cl_device_svm_capabilities caps = 0;
  size_t largest = sizes[nsizes - 1];
  int i;
  raw_open(p, d, 0, source, "touch", &r.e);
  clGetDeviceInfo(r.e.dev, CL_DEVICE_SVM_CAPABILITIES, sizeof caps, &caps, NULL);
  r.svm = (caps & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER) != 0;
  for (i = 0; i < 2; ++i) {
    r.pin_mem[i] = clCreateBuffer(r.e.ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, largest, NULL, &err);
    CL_OK(err);
    r.pin[i] = clEnqueueMapBuffer(r.e.q, r.pin_mem[i], CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, largest, 0, NULL,
                                  NULL, &err);
    CL_OK(err);
  }
  if (!r.svm) skipped[RAW_SVM][PAGEABLE] = skipped[RAW_SVM][PINNED] = "the device has no SVM";
  *rp = r;
}

/* Every raw path at size `si`. */
static void raw_sizes(raw_state *r, void *src, void *dst, int si) {
  raw_size(r, 0, PAGEABLE, src, dst, si);
  raw_size(r, 0, PINNED, r->pin[0], r->pin[1], si);
  if (r->svm) {
    raw_size(r, 1, PAGEABLE, src, dst, si);
    raw_size(r, 1, PINNED, r->pin[0], r->pin[1], si);
  }
}

static void raw_end(raw_state *rp) {
  raw_state r = *rp;
  int i;
  for (i = 0; i < 2; ++i) {
    CL_OK(clEnqueueUnmapMemObject(r.e.q, r.pin_mem[i], r.pin[i], 0, NULL, NULL));
    CL_OK(clFinish(r.e.q));
    CL_OK(clReleaseMemObject(r.pin_mem[i]));
  }
  raw_close(&r.e);
}

/* ---- Syrah ----------------------------------------------------------- */

typedef struct {
  syrah_queue *q;
  syrah_context *ctx;
  const syrah_device *dev;
  syrah_program *prog;
  syrah_kernel *touch, *flip;
  bool pinned;
  void *pin[2];
} sy_state;

typedef struct {
  sy_state *s;
  int dir;
  size_t n;
  void *a, *b, *host_src, *host_dst;
  syrah_buffer *ba, *bb;
  cl_uint flips;
} sy_op;

static void sy_usm_run(void *p) {
  sy_op *o = (sy_op *)p;
  if (o->dir == H2D) SY_OK(syrah_queue_memcpy(o->s->q, o->a, o->host_src, o->n, NULL, 0, NULL));
  if (o->dir == D2H) SY_OK(syrah_queue_memcpy(o->s->q, o->host_dst, o->a, o->n, NULL, 0, NULL));
  if (o->dir == D2D) SY_OK(syrah_queue_memcpy(o->s->q, o->b, o->a, o->n, NULL, 0, NULL));
  SY_OK(syrah_queue_wait(o->s->q));
}

static void sy_usm_size(sy_state *s, int kind, void *src, void *dst, int si) {
  size_t n = sizes[si];
  sy_op o;
  memset(&o, 0, sizeof o);
  o.s = s;
  o.n = n;
  o.host_src = src;
  o.host_dst = dst;
  SY_OK(syrah_malloc_device(s->ctx, s->dev, n, &o.a));
  SY_OK(syrah_malloc_device(s->ctx, s->dev, n, &o.b));
  pattern(src, n, (cl_uint)si);
  memset(dst, 0, n);
  o.dir = H2D;
  gbps[SY_USM][H2D][kind][si] = timed(sy_usm_run, &o, n);
  o.dir = D2H;
  gbps[SY_USM][D2H][kind][si] = timed(sy_usm_run, &o, n);
  check("h2d then d2h", dst, n, (cl_uint)si, path_name[SY_USM], kind);
  if (kind == PAGEABLE) {
    o.dir = D2D;
    gbps[SY_USM][D2D][kind][si] = timed(sy_usm_run, &o, n);
    memset(dst, 0, n);
    SY_OK(syrah_queue_memcpy(s->q, dst, o.b, n, NULL, 0, NULL));
    SY_OK(syrah_queue_wait(s->q));
    check("d2d", dst, n, (cl_uint)si, path_name[SY_USM], kind);
  }
  SY_OK(syrah_free(s->ctx, o.a));
  SY_OK(syrah_free(s->ctx, o.b));
}

static syrah_accessor whole(const syrah_buffer *b, syrah_access_mode mode) {
  syrah_accessor a;
  memset(&a, 0, sizeof a);
  a.buffer = b;
  a.mode = mode;
  return a;
}

/* h2d: the host's pages are made the only current ones (a write host
 * accessor), then a kernel reads the whole buffer on the device. */
static void sy_buffer_h2d(void *p) {
  sy_op *o = (sy_op *)p;
  syrah_host_accessor *ha;
  void *ptr;
  syrah_range one = syrah_range_1d(1);
  syrah_accessor acc = whole(o->ba, SYRAH_ACCESS_READ);
  syrah_kernel_arg arg = {SYRAH_ARG_ACCESSOR, 0, NULL};
  SY_OK(syrah_buffer_host_access(o->ba, SYRAH_ACCESS_WRITE, NULL, NULL, &ha, &ptr));
  SY_OK(syrah_host_accessor_release(ha));
  SY_OK(syrah_queue_submit_kernel(o->s->q, o->s->touch, &one, &acc, 1, &arg, 1, NULL, 0, NULL));
  SY_OK(syrah_queue_wait(o->s->q));
}

/* A kernel flips every word on the device: its pages become the only
 * current ones. */
static void sy_flip(sy_op *o) {
  syrah_range all = syrah_range_1d(o->n / 4);
  syrah_accessor acc = whole(o->ba, SYRAH_ACCESS_READ_WRITE);
  cl_uint v = 0x5a5a5a5au;
  syrah_kernel_arg args[2] = {{SYRAH_ARG_ACCESSOR, 0, NULL}, {SYRAH_ARG_VALUE, sizeof v, NULL}};
  args[1].value = &v;
  SY_OK(syrah_queue_submit_kernel(o->s->q, o->s->flip, &all, &acc, 1, args, 2, NULL, 0, NULL));
  SY_OK(syrah_queue_wait(o->s->q));
  ++o->flips;
}

static void sy_buffer_d2d(void *p) {
  sy_op *o = (sy_op *)p;
  syrah_accessor from = whole(o->ba, SYRAH_ACCESS_READ), to = whole(o->bb, SYRAH_ACCESS_DISCARD_WRITE);
  SY_OK(syrah_queue_copy_accessor(o->s->q, &from, &to, NULL, 0, NULL));
  SY_OK(syrah_queue_wait(o->s->q));
}

static syrah_buffer *sy_make_buffer(size_t n, void *host) {
  syrah_buffer_desc bd;
  syrah_buffer *b;
  memset(&bd, 0, sizeof bd);
  bd.element_size = 4;
  bd.dimensions = 1;
  bd.range[0] = n / 4;
  bd.host_pointer = host;
  bd.ownership = host ? SYRAH_HOST_WRITE_BACK : SYRAH_HOST_NONE;
  SY_OK(syrah_buffer_create(&bd, &b));
  return b;
}

/* Buffer migration at one size; the buffer lives in `src` (ordinary or
 * pinned) and writes its data back there at release. */
static void sy_buffer_size(sy_state *s, int kind, void *src, int si) {
  size_t n = sizes[si];
  cl_uint seed = (cl_uint)si, now;
  double t[32];
  int i, reps = reps_for(n);
  syrah_host_accessor *ha;
  void *ptr;
  sy_op o;
  memset(&o, 0, sizeof o);
  o.s = s;
  o.n = n;
  pattern(src, n, seed);
  o.ba = sy_make_buffer(n, src);
  gbps[SY_BUFFER][H2D][kind][si] = timed(sy_buffer_h2d, &o, n);
  /* d2h: a kernel makes the device's pages the only current ones (not
   * timed), then the buffer's data comes home. */
  for (i = -1; i < reps; ++i) {
    double t0;
    syrah_event *ev;
    sy_flip(&o);
    t0 = now_us();
    SY_OK(syrah_buffer_update_host(o.ba, &ev));
    SY_OK(syrah_event_wait(ev));
    SY_OK(syrah_event_release(ev));
    if (i >= 0) t[i] = now_us() - t0;
  }
  gbps[SY_BUFFER][D2H][kind][si] = (double)n / (median(t, reps) * 1e3);
  now = o.flips % 2 ? seed ^ 0x5a5a5a5au : seed;
  SY_OK(syrah_buffer_host_access(o.ba, SYRAH_ACCESS_READ, NULL, NULL, &ha, &ptr));
  check("kernel then d2h", ptr, n, now, path_name[SY_BUFFER], kind);
  SY_OK(syrah_host_accessor_release(ha));
  if (kind == PAGEABLE) {
    o.bb = sy_make_buffer(n, NULL);
    gbps[SY_BUFFER][D2D][kind][si] = timed(sy_buffer_d2d, &o, n);
    SY_OK(syrah_buffer_host_access(o.bb, SYRAH_ACCESS_READ, NULL, NULL, &ha, &ptr));
    check("d2d", ptr, n, now, path_name[SY_BUFFER], kind);
    SY_OK(syrah_host_accessor_release(ha));
    SY_OK(syrah_buffer_release(o.bb));
  }
  SY_OK(syrah_buffer_release(o.ba));
  check("write-back at release", src, n, now, path_name[SY_BUFFER], kind);
}

static void sy_begin(sy_state *sp, const char *spec) {
  sy_state s;
  size_t largest = sizes[nsizes - 1];
  s.pin[0] = s.pin[1] = NULL;
  SY_OK(syrah_device_select_by_string(spec, &s.dev));
  SY_OK(syrah_queue_create(NULL, s.dev, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &s.q));
  SY_OK(syrah_queue_get_context(s.q, &s.ctx));
  SY_OK(syrah_program_create_from_source(s.ctx, source, NULL, &s.prog));
  SY_OK(syrah_kernel_create(s.prog, "touch", &s.touch));
  SY_OK(syrah_kernel_create(s.prog, "flip", &s.flip));
  s.pinned = syrah_malloc_pinned(s.ctx, largest, &s.pin[0]) == SYRAH_SUCCESS &&
             syrah_malloc_pinned(s.ctx, largest, &s.pin[1]) == SYRAH_SUCCESS;
  if (!s.pinned) {
    static char why[300];
    snprintf(why, sizeof why, "syrah_malloc_pinned failed: %s", syrah_last_error_message());
    json_safe(why);
    skipped[SY_USM][PINNED] = skipped[SY_BUFFER][PINNED] = why;
    if (s.pin[0]) SY_OK(syrah_free(s.ctx, s.pin[0]));
    s.pin[0] = NULL;
  }
  *sp = s;
}

/* Every Syrah path at size `si`. */
static void sy_sizes(sy_state *s, void *src, void *dst, int si) {
  sy_usm_size(s, PAGEABLE, src, dst, si);
  sy_buffer_size(s, PAGEABLE, src, si);
  if (s->pinned) {
    sy_usm_size(s, PINNED, s->pin[0], s->pin[1], si);
    sy_buffer_size(s, PINNED, s->pin[0], si);
  }
}

static void sy_end(sy_state *sp) {
  sy_state s = *sp;
  if (s.pinned) {
    SY_OK(syrah_free(s.ctx, s.pin[0]));
    SY_OK(syrah_free(s.ctx, s.pin[1]));
  }
  SY_OK(syrah_kernel_release(s.touch));
  SY_OK(syrah_kernel_release(s.flip));
  SY_OK(syrah_program_release(s.prog));
  SY_OK(syrah_context_release(s.ctx));
  SY_OK(syrah_queue_release(s.q));
}

/* ---- report ----------------------------------------------------------- */

static void size_text(size_t n, char *out, size_t cap) {
  if (n >= ((size_t)1 << 30))
    snprintf(out, cap, "%zu GiB", n >> 30);
  else if (n >= ((size_t)1 << 20))
    snprintf(out, cap, "%zu MiB", n >> 20);
  else
    snprintf(out, cap, "%zu KiB", n >> 10);
}

/* Each figure becomes the median of its rounds. */
static void over_rounds(int rounds) {
  int path, dir, kind, si, rd;
  for (path = 0; path < PATHS; ++path)
    for (dir = 0; dir < DIRS; ++dir)
      for (kind = 0; kind < KINDS; ++kind)
        for (si = 0; si < nsizes; ++si) {
          double v[MAX_ROUNDS];
          for (rd = 0; rd < rounds; ++rd) v[rd] = per_round[rd][path][dir][kind][si];
          gbps[path][dir][kind][si] = median(v, rounds);
        }
}

static double best_raw(int dir, int kind, int si) {
  double b = gbps[RAW_BUFFER][dir][kind][si];
  if (gbps[RAW_SVM][dir][kind][si] > b) b = gbps[RAW_SVM][dir][kind][si];
  return b;
}

static void report(const char *spec, const char *name) {
  int dir, kind, path, si;
  char sz[32];
  for (dir = 0; dir < DIRS; ++dir)
    for (kind = 0; kind < KINDS; ++kind) {
      if (dir == D2D && kind == PINNED) continue;
      printf("\n### %s%s%s, GB/s (median)\n\n| size |", dir_name[dir], dir == D2D ? "" : " from/to ",
             dir == D2D ? "" : kind_name[kind]);
      for (path = 0; path < PATHS; ++path) printf(" %s |", path_name[path]);
      printf(" Syrah usm / best raw | Syrah buffer / best raw |\n|---|");
      for (path = 0; path < PATHS + 2; ++path) printf("---|");
      printf("\n");
      for (si = 0; si < nsizes; ++si) {
        double best = best_raw(dir, kind, si);
        size_text(sizes[si], sz, sizeof sz);
        printf("| %s |", sz);
        for (path = 0; path < PATHS; ++path) {
          double g = gbps[path][dir][kind][si];
          if (g > 0) {
            printf(" %.2f |", g);
            bench_json("{\"bench\":\"bandwidth\",\"device\":\"%s\",\"device_name\":\"%s\",\"path\":\"%s\","
                       "\"direction\":\"%s\",\"host\":\"%s\",\"bytes\":%zu,\"gbps\":%.4f}",
                       spec, name, path_name[path], dir_name[dir], dir == D2D ? "none" : kind_name[kind],
                       sizes[si], g);
          } else {
            printf(" skipped: %s |", skipped[path][kind] ? skipped[path][kind] : "not run");
          }
        }
        for (path = SY_USM; path <= SY_BUFFER; ++path) {
          double g = gbps[path][dir][kind][si];
          if (g > 0 && best > 0)
            printf(" %.2f |", g / best);
          else
            printf(" - |");
        }
        printf("\n");
      }
    }
}

int main(int argc, char **argv) {
  unsigned p = 0, d = 0;
  size_t largest = (size_t)1 << 30, smallest = 4096, n;
  char name[256];
  const syrah_device *dev;
  void *src = NULL, *dst = NULL;
  raw_state r;
  sy_state s;
  int si, rd, rounds = 3;
  if (argc > 2) largest = (size_t)strtoull(argv[2], NULL, 10);
  if (argc > 3) smallest = (size_t)strtoull(argv[3], NULL, 10);
  if (argc > 4) rounds = atoi(argv[4]);
  if (argc < 2 || sscanf(argv[1], "%u.%u", &p, &d) != 2 || smallest < 4096 || largest < smallest || rounds < 1 ||
      rounds > MAX_ROUNDS) {
    fprintf(stderr, "usage: bench_bandwidth P.D [largest bytes] [smallest bytes, at least 4096] [rounds 1..%d]\n",
            MAX_ROUNDS);
    return 2;
  }
  for (n = smallest; n <= largest && nsizes < MAX_SIZES; n *= 4) sizes[nsizes++] = n;
  SY_OK(syrah_device_select_by_string(argv[1], &dev));
  SY_OK(syrah_device_get_info_string(dev, SYRAH_DEVICE_INFO_NAME, name, sizeof name, NULL));
  json_safe(name);
  if (posix_memalign(&src, 4096, sizes[nsizes - 1]) || posix_memalign(&dst, 4096, sizes[nsizes - 1])) {
    fprintf(stderr, "cannot allocate %zu bytes of host memory\n", sizes[nsizes - 1]);
    return 1;
  }
  raw_begin(&r, p, d);
  sy_begin(&s, argv[1]);
  /* Into pinned memory, as staging copies. */
  host_all(src, r.pin[0]);
  /* Size by size, raw then Syrah, so that every path at a size is measured
   * close in time: the device and host move between minutes. */
  for (si = 0; si < nsizes; ++si)
    for (rd = 0; rd < rounds; ++rd) {
      raw_sizes(&r, src, dst, si);
      sy_sizes(&s, src, dst, si);
      memcpy(per_round[rd], gbps, sizeof gbps);
    }
  over_rounds(rounds);
  sy_end(&s);
  raw_end(&r);
  printf("## Bandwidth, device %s (%s)\n", argv[1], name);
  report(argv[1], name);
  printf("\n### Host memory copy with %d threads taking 256 KiB pieces in order (staging's host side alone), GB/s\n\n"
         "| size | GB/s |\n|---|---|\n", host_threads);
  for (n = 0; n < (size_t)nsizes; ++n) {
    char sz[32];
    size_text(sizes[n], sz, sizeof sz);
    printf("| %s | %.2f |\n", sz, host_gbps[n]);
    bench_json("{\"bench\":\"bandwidth\",\"device\":\"%s\",\"device_name\":\"%s\",\"path\":\"host memcpy\","
               "\"direction\":\"h2h\",\"host\":\"ordinary\",\"bytes\":%zu,\"gbps\":%.4f,\"threads\":%d}",
               argv[1], name, sizes[n], host_gbps[n], host_threads);
  }
  free(src);
  free(dst);
  if (wrong) fprintf(stderr, "%d transfers delivered wrong data\n", wrong);
  return wrong != 0;
}
