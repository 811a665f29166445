/* Back-to-back staged copies one way between ordinary host memory and a
 * device allocation, each followed by a queue wait: the spread of single
 * copies, where the bandwidth benchmark gives one median per size. The
 * copies are timed after 3 untimed; the data is checked after the last.
 * Run it with SYRAH_LINGER_US=0 and without to see what lingering threads
 * save, and with SYRAH_STAGING=off to see the driver's own path.
 *
 * usage: bench_staged P.D [MiB, default 64] [h2d|d2h, default h2d]
 *                    [copies 1..1000, default 40] */
#include "bench_common.h"

static void fill(unsigned char *p, size_t n, unsigned seed) {
  size_t i;
  for (i = 0; i < n; ++i) p[i] = (unsigned char)((i * 131 + seed) >> 3);
}

int main(int argc, char **argv) {
  size_t mib = 64, n, i;
  int reps = 40, rep, d2h = 0, ok = 1;
  const syrah_device *dev;
  syrah_queue *q;
  syrah_context *ctx;
  char name[256];
  void *a = NULL, *h = NULL, *back = NULL;
  double *g;
  if (argc > 2) mib = (size_t)strtoull(argv[2], NULL, 10);
  if (argc > 3) d2h = strcmp(argv[3], "d2h") == 0 ? 1 : strcmp(argv[3], "h2d") == 0 ? 0 : -1;
  if (argc > 4) reps = atoi(argv[4]);
  if (argc < 2 || argc > 5 || mib < 1 || mib > 4096 || d2h < 0 || reps < 1 || reps > 1000) {
    fprintf(stderr, "usage: bench_staged P.D [MiB 1..4096] [h2d|d2h] [copies 1..1000]\n");
    return 2;
  }
  n = mib << 20;
  g = (double *)malloc(sizeof(double) * (size_t)reps);
  if (!g || posix_memalign(&h, 4096, n) || posix_memalign(&back, 4096, n)) {
    fprintf(stderr, "cannot allocate %zu bytes of host memory twice\n", n);
    return 1;
  }
  fill((unsigned char *)h, n, 7);
  memset(back, 0, n);
  SY_OK(syrah_device_select_by_string(argv[1], &dev));
  SY_OK(syrah_device_get_info_string(dev, SYRAH_DEVICE_INFO_NAME, name, sizeof name, NULL));
  json_safe(name);
  SY_OK(syrah_queue_create(NULL, dev, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q));
  SY_OK(syrah_queue_get_context(q, &ctx));
  SY_OK(syrah_malloc_device(ctx, dev, n, &a));
  /* Towards the host, the device holds the data first. */
  if (d2h) {
    SY_OK(syrah_queue_memcpy(q, a, h, n, NULL, 0, NULL));
    SY_OK(syrah_queue_wait(q));
  }
  for (rep = -3; rep < reps; ++rep) {
    double t0 = now_us();
    if (d2h)
      SY_OK(syrah_queue_memcpy(q, back, a, n, NULL, 0, NULL));
    else
      SY_OK(syrah_queue_memcpy(q, a, h, n, NULL, 0, NULL));
    SY_OK(syrah_queue_wait(q));
    if (rep >= 0) g[rep] = (double)n / ((now_us() - t0) * 1e3);
  }
  if (!d2h) {
    SY_OK(syrah_queue_memcpy(q, back, a, n, NULL, 0, NULL));
    SY_OK(syrah_queue_wait(q));
  }
  for (i = 0; i < n && ok; ++i) ok = ((unsigned char *)back)[i] == ((unsigned char *)h)[i];
  qsort(g, (size_t)reps, sizeof(double), bench_cmp);
  printf("## Staged copies, device %s (%s)\n\n| direction | MiB | copies | min | first quartile | median | third quartile "
         "| max GB/s | result |\n|---|---|---|---|---|---|---|---|---|\n| %s | %zu | %d | %.2f | %.2f | %.2f | %.2f | "
         "%.2f | %s |\n",
         argv[1], name, d2h ? "d2h" : "h2d", mib, reps, g[0], g[reps / 4], median(g, reps), g[3 * reps / 4],
         g[reps - 1], ok ? "ok" : "WRONG");
  bench_json("{\"bench\":\"staged\",\"device\":\"%s\",\"device_name\":\"%s\",\"direction\":\"%s\",\"bytes\":%zu,"
             "\"copies\":%d,\"gbps_min\":%.4f,\"gbps_median\":%.4f,\"gbps_max\":%.4f,\"ok\":%s}",
             argv[1], name, d2h ? "d2h" : "h2d", n, reps, g[0], median(g, reps), g[reps - 1], ok ? "true" : "false");
  SY_OK(syrah_free(ctx, a));
  SY_OK(syrah_context_release(ctx));
  SY_OK(syrah_queue_release(q));
  free(g);
  free(h);
  free(back);
  return !ok;
}
