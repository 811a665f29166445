/* What the page size costs and saves, on one device.
 *
 * For a 64 MiB buffer and page sizes from 4 KiB to the whole buffer:
 *  - update: the host rewrites a 1 MiB window (at an offset that is not
 *    page-aligned) and a kernel then reads the whole buffer on the device:
 *    the bytes and time the transfer takes;
 *  - submit: the host cost of submitting a kernel whose accessor spans the
 *    whole, already current, buffer (page-state tracking over every page).
 *
 * usage: bench_pages P.D     (prints a Markdown table) */
#include "bench_common.h"

enum { BYTES = 64 << 20, WINDOW = 1 << 20, WINDOW_AT = (10 << 20) + 12345 * 4, SUBMITS = 2000 };

int main(int argc, char **argv) {
  const syrah_device *dev;
  syrah_queue *q;
  syrah_context *ctx;
  syrah_program *prog;
  syrah_kernel *k;
  size_t page;
  const char *src = "__kernel void peek(__global const int *p) { (void)p; }\n";
  char name[256];
  if (argc < 2) {
    fprintf(stderr, "usage: bench_pages P.D\n");
    return 2;
  }
  SY_OK(syrah_device_select_by_string(argv[1], &dev));
  SY_OK(syrah_device_get_info_string(dev, SYRAH_DEVICE_INFO_NAME, name, sizeof name, NULL));
  SY_OK(syrah_queue_create(NULL, dev, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q));
  SY_OK(syrah_queue_get_context(q, &ctx));
  SY_OK(syrah_program_create_from_source(ctx, src, NULL, &prog));
  SY_OK(syrah_kernel_create(prog, "peek", &k));
  printf("## Page size on device %s (%s): 64 MiB buffer\n\n", argv[1], name);
  printf("| page | pages | 1 MiB host update: bytes moved | transfer ms | submit µs (whole-buffer accessor) |\n");
  printf("|---|---|---|---|---|\n");
  for (page = 4096; page <= BYTES; page *= 4) {
    syrah_buffer *b;
    syrah_buffer_desc bd;
    syrah_buffer_stats before, after;
    syrah_host_accessor *ha;
    syrah_accessor acc;
    syrah_kernel_arg arg;
    syrah_range r = syrah_range_1d(1);
    void *p;
    size_t off = WINDOW_AT / 4, len = WINDOW / 4;
    double t0, t1;
    int i;
    memset(&bd, 0, sizeof bd);
    bd.element_size = 4;
    bd.dimensions = 1;
    bd.range[0] = BYTES / 4;
    bd.page_size[0] = page / 4;
    SY_OK(syrah_buffer_create(&bd, &b));
    memset(&acc, 0, sizeof acc);
    acc.buffer = b;
    acc.mode = SYRAH_ACCESS_DISCARD_WRITE;
    arg.kind = SYRAH_ARG_ACCESSOR;
    arg.size = 0;
    arg.value = NULL;
    SY_OK(syrah_queue_submit_kernel(q, k, &r, &acc, 1, &arg, 1, NULL, 0, NULL));
    SY_OK(syrah_queue_wait(q));
    acc.mode = SYRAH_ACCESS_READ;
    /* Host update of a window, then a device read of everything. */
    SY_OK(syrah_buffer_host_access(b, SYRAH_ACCESS_WRITE, &off, &len, &ha, &p));
    memset(p, 1, WINDOW);
    SY_OK(syrah_host_accessor_release(ha));
    SY_OK(syrah_buffer_get_stats(b, &before));
    t0 = now_us();
    SY_OK(syrah_queue_submit_kernel(q, k, &r, &acc, 1, &arg, 1, NULL, 0, NULL));
    SY_OK(syrah_queue_wait(q));
    t1 = now_us();
    SY_OK(syrah_buffer_get_stats(b, &after));
    /* Submission cost on current data. */
    {
      double s0 = now_us(), s1;
      for (i = 0; i < SUBMITS; ++i) SY_OK(syrah_queue_submit_kernel(q, k, &r, &acc, 1, &arg, 1, NULL, 0, NULL));
      s1 = now_us();
      SY_OK(syrah_queue_wait(q));
      printf("| %zu KiB | %zu | %llu | %.2f | %.2f |\n", page / 1024, (size_t)BYTES / page,
             (unsigned long long)(after.host_to_device_bytes - before.host_to_device_bytes), (t1 - t0) / 1e3,
             (s1 - s0) / SUBMITS);
    }
    SY_OK(syrah_buffer_release(b));
  }
  SY_OK(syrah_kernel_release(k));
  SY_OK(syrah_program_release(prog));
  SY_OK(syrah_context_release(ctx));
  SY_OK(syrah_queue_release(q));
  return 0;
}
