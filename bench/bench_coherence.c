/* Coherence: bytes moved and copy commands for ranged accesses, against
 * the minimum. Each scenario uses a fresh buffer with explicit pages, lets
 * a device (or the host) write a box, then reads another box elsewhere,
 * and compares the buffer's counters of the read's direction with:
 *   - the element minimum: bytes of the written box inside the read box;
 *   - the page minimum: bytes of the pages both boxes touch (what any
 *     page-granular runtime must move);
 *   - the boxes: maximal boxes of those pages (one copy each at most).
 * Also checks the data that arrived.
 *
 * usage: bench_coherence P.D */
#include "bench_common.h"

#include <stdint.h>

static const char *source = "__kernel void mark(__global int *p) { p[0] = 1; }\n";

typedef struct {
  const char *name;
  uint32_t dims;
  size_t range[3], page[3];
  /* The writer's box (device), then the reader's box (host), and for
   * `toward_device` the other way round: host writes, a kernel reads. */
  size_t woff[3], wext[3], roff[3], rext[3];
  int toward_device;
  int writes; /* how many disjoint writer boxes, spaced along dimension 0 */
  size_t wstride;
} scenario;

/* Extents in all three dimensions (leading ones 1 when dims < 3). */
static void full3(const scenario *s, const size_t *in, size_t *out, size_t fill) {
  uint32_t i;
  for (i = 0; i < 3; ++i) out[i] = fill;
  for (i = 0; i < s->dims; ++i) out[3 - s->dims + i] = in[i];
}

static size_t lo_page(size_t x, size_t p) { return x / p * p; }
static size_t hi_page(size_t x, size_t p) { return (x + p - 1) / p * p; }

/* Intersections of one writer box with the reader box, at element and at
 * page granularity; 0 when they do not meet. */
static void meet(const scenario *s, size_t k, size_t *elem_bytes, size_t *page_bytes) {
  size_t r[3], pg[3], wo[3], we[3], ro[3], re[3], i, e = 4, p = 4;
  full3(s, s->range, r, 1);
  full3(s, s->page, pg, 1);
  full3(s, s->woff, wo, 0);
  full3(s, s->wext, we, 1);
  full3(s, s->roff, ro, 0);
  full3(s, s->rext, re, 1);
  wo[3 - s->dims] += k * s->wstride;
  for (i = 0; i < 3; ++i) {
    size_t a = wo[i] > ro[i] ? wo[i] : ro[i];
    size_t b = wo[i] + we[i] < ro[i] + re[i] ? wo[i] + we[i] : ro[i] + re[i];
    size_t pa = lo_page(wo[i], pg[i]) > lo_page(ro[i], pg[i]) ? lo_page(wo[i], pg[i]) : lo_page(ro[i], pg[i]);
    size_t pb1 = hi_page(wo[i] + we[i], pg[i]), pb2 = hi_page(ro[i] + re[i], pg[i]);
    size_t pb = pb1 < pb2 ? pb1 : pb2;
    if (pb > r[i]) pb = r[i];
    e *= b > a ? b - a : 0;
    p *= pb > pa ? pb - pa : 0;
  }
  *elem_bytes = e;
  *page_bytes = p;
}

static syrah_accessor box(syrah_buffer *b, syrah_access_mode m, const size_t *off, const size_t *ext, uint32_t dims) {
  syrah_accessor a;
  uint32_t i;
  memset(&a, 0, sizeof a);
  a.buffer = b;
  a.mode = m;
  for (i = 0; i < dims; ++i) {
    a.offset[i] = off[i];
    a.range[i] = ext[i];
  }
  return a;
}

static int run(const scenario *s, syrah_queue *q, syrah_kernel *k, const char *spec, const char *name) {
  syrah_buffer_desc bd;
  syrah_buffer *b;
  syrah_buffer_stats st;
  syrah_host_accessor *ha;
  syrah_range one = syrah_range_1d(1);
  syrah_kernel_arg arg = {SYRAH_ARG_ACCESSOR, 0, NULL};
  size_t elem_min = 0, page_min = 0, boxes = 0, moved, copies, i;
  int *p, ok = 1, w;
  memset(&bd, 0, sizeof bd);
  bd.element_size = sizeof(int);
  bd.dimensions = s->dims;
  for (i = 0; i < s->dims; ++i) {
    bd.range[i] = s->range[i];
    bd.page_size[i] = s->page[i];
  }
  SY_OK(syrah_buffer_create(&bd, &b));
  /* Everything starts current on both sides: zeros written on the host,
   * then read once on the device. */
  SY_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_DISCARD_WRITE, NULL, NULL, &ha, (void **)&p));
  memset(p, 0, s->range[0] * (s->dims > 1 ? s->range[1] : 1) * (s->dims > 2 ? s->range[2] : 1) * sizeof(int));
  SY_OK(syrah_host_accessor_release(ha));
  {
    syrah_accessor all = box(b, SYRAH_ACCESS_READ, s->roff, s->rext, 0);
    SY_OK(syrah_queue_submit_kernel(q, k, &one, &all, 1, &arg, 1, NULL, 0, NULL));
    SY_OK(syrah_queue_wait(q));
  }
  for (w = 0; w < s->writes; ++w) {
    size_t off[3], e, pb;
    memcpy(off, s->woff, sizeof off);
    off[0] += (size_t)w * s->wstride;
    if (s->toward_device) {
      SY_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_WRITE, off, s->wext, &ha, (void **)&p));
      p[0] = 1;
      SY_OK(syrah_host_accessor_release(ha));
    } else {
      syrah_accessor a = box(b, SYRAH_ACCESS_WRITE, off, s->wext, s->dims);
      SY_OK(syrah_queue_submit_kernel(q, k, &one, &a, 1, &arg, 1, NULL, 0, NULL));
    }
    meet(s, (size_t)w, &e, &pb);
    elem_min += e;
    page_min += pb;
    boxes += pb > 0;
  }
  SY_OK(syrah_queue_wait(q));
  SY_OK(syrah_buffer_get_stats(b, &st));
  if (s->toward_device) {
    syrah_accessor a = box(b, SYRAH_ACCESS_READ, s->roff, s->rext, s->dims);
    uint64_t before = st.host_to_device_bytes, cbefore = st.host_to_device_copies;
    SY_OK(syrah_queue_submit_kernel(q, k, &one, &a, 1, &arg, 1, NULL, 0, NULL));
    SY_OK(syrah_queue_wait(q));
    SY_OK(syrah_buffer_get_stats(b, &st));
    moved = (size_t)(st.host_to_device_bytes - before);
    copies = (size_t)(st.host_to_device_copies - cbefore);
  } else {
    uint64_t before = st.device_to_host_bytes, cbefore = st.device_to_host_copies;
    SY_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, s->roff, s->rext, &ha, (void **)&p));
    SY_OK(syrah_host_accessor_release(ha));
    SY_OK(syrah_buffer_get_stats(b, &st));
    moved = (size_t)(st.device_to_host_bytes - before);
    copies = (size_t)(st.device_to_host_copies - cbefore);
    /* The first written element (if inside the read box) arrived. */
    SY_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&p));
    {
      size_t r[3], wo[3];
      full3(s, s->range, r, 1);
      full3(s, s->woff, wo, 0);
      ok = p[(wo[0] * r[1] + wo[1]) * r[2] + wo[2]] == 1;
    }
    SY_OK(syrah_host_accessor_release(ha));
  }
  SY_OK(syrah_buffer_release(b));
  ok = ok && moved == page_min && copies <= boxes;
  printf("| %s | %zu | %zu | %zu | %zu | %zu | %s |\n", s->name, moved, elem_min, page_min, copies, boxes,
         ok ? "ok" : "MISSED");
  bench_json("{\"bench\":\"coherence\",\"device\":\"%s\",\"device_name\":\"%s\",\"scenario\":\"%s\",\"bytes\":%zu,"
             "\"element_minimum\":%zu,\"page_minimum\":%zu,\"copies\":%zu,\"boxes\":%zu,\"ok\":%s}",
             spec, name, s->name, moved, elem_min, page_min, copies, boxes, ok ? "true" : "false");
  return ok;
}

int main(int argc, char **argv) {
  static const scenario all[] = {
      {"1D: kernel writes 200,000 elements, host reads an overlapping 300,000", 1, {1 << 20}, {1024},
       {100000}, {200000}, {50000}, {300000}, 0, 1, 0},
      {"1D: three disjoint kernel writes, host reads all", 1, {1 << 20}, {1024},
       {1000}, {5000}, {0}, {1 << 20}, 0, 3, 100000},
      {"1D: host writes 10 elements, kernel reads 1,000,000", 1, {1 << 20}, {1024},
       {500000}, {10}, {0}, {1000000}, 1, 1, 0},
      {"2D 1024x1024: kernel writes a 300x400 tile, host reads the left half", 2, {1024, 1024}, {64, 256},
       {100, 300}, {300, 400}, {0, 0}, {1024, 512}, 0, 1, 0},
      {"2D 1024x1024: host writes a row band, kernel reads a column band", 2, {1024, 1024}, {64, 256},
       {200, 0}, {10, 1024}, {0, 512}, {1024, 100}, 1, 1, 0},
      {"3D 128x128x128: kernel writes a 40x50x60 box, host reads a crossing box", 3, {128, 128, 128},
       {16, 16, 64}, {10, 20, 30}, {40, 50, 60}, {30, 0, 0}, {64, 128, 64}, 0, 1, 0},
      {"3D 128x128x128: two kernel boxes in different slices, host reads the whole", 3, {128, 128, 128},
       {16, 16, 64}, {0, 20, 30}, {8, 50, 60}, {0, 0, 0}, {128, 128, 128}, 0, 2, 64},
  };
  unsigned p = 0, d = 0;
  size_t i;
  int ok = 1;
  char name[256];
  const syrah_device *dev;
  syrah_queue *q;
  syrah_context *ctx;
  syrah_program *prog;
  syrah_kernel *k;
  if (argc < 2 || sscanf(argv[1], "%u.%u", &p, &d) != 2) {
    fprintf(stderr, "usage: bench_coherence P.D\n");
    return 2;
  }
  SY_OK(syrah_device_select_by_string(argv[1], &dev));
  SY_OK(syrah_device_get_info_string(dev, SYRAH_DEVICE_INFO_NAME, name, sizeof name, NULL));
  json_safe(name);
  SY_OK(syrah_queue_create(NULL, dev, 0, NULL, NULL, &q));
  SY_OK(syrah_queue_get_context(q, &ctx));
  SY_OK(syrah_program_create_from_source(ctx, source, NULL, &prog));
  SY_OK(syrah_kernel_create(prog, "mark", &k));
  printf("## Coherence, device %s (%s)\n\n| scenario | bytes moved | element minimum | page minimum | copies | "
         "maximal boxes | result |\n|---|---|---|---|---|---|---|\n",
         argv[1], name);
  for (i = 0; i < sizeof all / sizeof all[0]; ++i) ok &= run(&all[i], q, k, argv[1], name);
  SY_OK(syrah_kernel_release(k));
  SY_OK(syrah_program_release(prog));
  SY_OK(syrah_context_release(ctx));
  SY_OK(syrah_queue_release(q));
  return !ok;
}
