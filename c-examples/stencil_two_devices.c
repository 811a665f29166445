/* A 2D Jacobi stencil split over two devices. Each device updates its half
 * of the rows; the buffer's pages are bands of 8 rows, so every iteration
 * only the halo pages next to the split move between the devices. The
 * result is checked against the same computation on the host. With a
 * single device, two queues on it play the two parts. */
#include "example.h"

#include <math.h>
#include <string.h>

enum { H = 512, W = 512, ITERS = 20, BAND = 8 };

static const char *source =
    "__kernel void jacobi(__global const float *in, __global float *out, int width) {\n"
    "  /* `in` starts one row above this part's first row, `out` at it. */\n"
    "  /* Dimension 0 runs along a row: neighbouring work-items, neighbouring addresses. */\n"
    "  int x = (int)get_global_id(0), y = (int)get_global_id(1);\n"
    "  const __global float *c = in + (y + 1) * width;\n"
    "  float v = c[x];\n"
    "  if (x > 0 && x < width - 1)\n"
    "    v = 0.25f * (c[x - 1] + c[x + 1] + c[x - width] + c[x + width]);\n"
    "  out[y * width + x] = v;\n"
    "}\n";

static const syrah_device *second_device(const syrah_device *first) {
  const syrah_device *all[64];
  size_t n = 0, i;
  CHECK(syrah_get_devices(all, 64, &n));
  for (i = 0; i < n; ++i) {
    bool usm = false;
    CHECK(syrah_device_has_aspect(all[i], SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS, &usm));
    if (all[i] != first && usm) return all[i];
  }
  return first;
}

int main(void) {
  const syrah_device *dev[2];
  syrah_queue *q[2];
  syrah_kernel *k[2];
  syrah_buffer *grid[2];
  float *init = (float *)malloc(sizeof(float) * H * W);
  float *ref = (float *)malloc(sizeof(float) * H * W), *tmp = (float *)malloc(sizeof(float) * H * W);
  float *result = (float *)malloc(sizeof(float) * H * W);
  int it, p, y, x, width = W;
  double maxerr = 0;
  syrah_buffer_stats s0, s1;
  char name[2][256];
  if (!init || !ref || !tmp || !result) return 1;
  q[0] = example_queue(&dev[0]);
  dev[1] = second_device(dev[0]);
  {
    /* Devices of one platform share a context: pages then move directly
     * between them; otherwise they go through the host. */
    uint64_t p0 = 0, p1 = 1;
    CHECK(syrah_device_get_info_u64(dev[0], SYRAH_DEVICE_INFO_PLATFORM_INDEX, &p0));
    CHECK(syrah_device_get_info_u64(dev[1], SYRAH_DEVICE_INFO_PLATFORM_INDEX, &p1));
    if (p0 == p1 && dev[0] != dev[1]) {
      syrah_context *shared = NULL;
      CHECK(syrah_context_create(dev, 2, &shared));
      CHECK(syrah_queue_release(q[0]));
      CHECK(syrah_queue_create(shared, dev[0], SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q[0]));
      CHECK(syrah_queue_create(shared, dev[1], SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q[1]));
      CHECK(syrah_context_release(shared));
    } else {
      CHECK(syrah_queue_create(NULL, dev[1], SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q[1]));
    }
  }
  for (p = 0; p < 2; ++p) {
    syrah_context *ctx = NULL;
    syrah_program *prog = NULL;
    CHECK(syrah_device_get_info_string(dev[p], SYRAH_DEVICE_INFO_NAME, name[p], sizeof name[p], NULL));
    CHECK(syrah_queue_get_context(q[p], &ctx));
    CHECK(syrah_program_create_from_source(ctx, source, NULL, &prog));
    CHECK(syrah_kernel_create(prog, "jacobi", &k[p]));
    CHECK(syrah_program_release(prog));
    CHECK(syrah_context_release(ctx));
  }
  printf("parts on: '%s' and '%s'%s\n", name[0], name[1], dev[0] == dev[1] ? " (one device, two queues)" : "");

  for (y = 0; y < H; ++y)
    for (x = 0; x < W; ++x) init[y * W + x] = (y == 0 || y == H - 1 || x == 0 || x == W - 1) ? 100.0f : 0.0f;
  memcpy(ref, init, sizeof(float) * H * W);
  for (it = 0; it < ITERS; ++it) {
    memcpy(tmp, ref, sizeof(float) * H * W);
    for (y = 1; y < H - 1; ++y)
      for (x = 1; x < W - 1; ++x)
        ref[y * W + x] = 0.25f * (tmp[y * W + x - 1] + tmp[y * W + x + 1] + tmp[(y - 1) * W + x] + tmp[(y + 1) * W + x]);
  }

  for (p = 0; p < 2; ++p) {
    syrah_buffer_desc d;
    memset(&d, 0, sizeof d);
    d.element_size = sizeof(float);
    d.dimensions = 2;
    d.range[0] = H;
    d.range[1] = W;
    d.page_size[0] = BAND;
    d.page_size[1] = W;
    d.host_pointer = init;
    d.ownership = SYRAH_HOST_COPY_IN;
    CHECK(syrah_buffer_create(&d, &grid[p]));
  }
  for (it = 0; it < ITERS; ++it) {
    syrah_buffer *in = grid[it % 2], *out = grid[(it + 1) % 2];
    for (p = 0; p < 2; ++p) {
      /* Part p updates rows [r0, r1); it reads rows r0-1 .. r1. */
      size_t r0 = p == 0 ? 1 : H / 2, r1 = p == 0 ? H / 2 : H - 1;
      syrah_accessor acc[2];
      syrah_kernel_arg args[3];
      syrah_range r = syrah_range_2d(W, r1 - r0);
      memset(acc, 0, sizeof acc);
      acc[0].buffer = in;
      acc[0].mode = SYRAH_ACCESS_READ;
      acc[0].offset[0] = r0 - 1;
      acc[0].range[0] = r1 - r0 + 2;
      acc[0].range[1] = W;
      acc[1].buffer = out;
      acc[1].mode = SYRAH_ACCESS_DISCARD_WRITE;
      acc[1].offset[0] = r0;
      acc[1].range[0] = r1 - r0;
      acc[1].range[1] = W;
      args[0].kind = SYRAH_ARG_ACCESSOR;
      args[0].size = 0;
      args[0].value = NULL;
      args[1] = args[0];
      args[1].size = 1;
      args[2] = syrah_arg_value(&width, sizeof width);
      CHECK(syrah_queue_submit_kernel(q[p], k[p], &r, acc, 2, args, 3, NULL, 0, NULL));
    }
  }
  {
    /* The boundary rows never change: copy them in from the initial grid. */
    syrah_buffer *last = grid[ITERS % 2];
    syrah_host_accessor *ha = NULL;
    float *data = NULL;
    CHECK(syrah_buffer_host_access(last, SYRAH_ACCESS_READ, NULL, NULL, &ha, (void **)&data));
    for (y = 1; y < H - 1; ++y)
      for (x = 0; x < W; ++x) result[y * W + x] = data[y * W + x];
    CHECK(syrah_host_accessor_release(ha));
  }
  for (y = 1; y < H - 1; ++y)
    for (x = 0; x < W; ++x) {
      double e = fabs((double)result[y * W + x] - (double)ref[y * W + x]);
      if (e > maxerr) maxerr = e;
    }
  CHECK(syrah_buffer_get_stats(grid[0], &s0));
  CHECK(syrah_buffer_get_stats(grid[1], &s1));
  printf("stencil %dx%d, %d iterations: max error %.2e; moved %llu B host->device, %llu B device->device, "
         "%llu B device->host\n",
         H, W, ITERS, maxerr, (unsigned long long)(s0.host_to_device_bytes + s1.host_to_device_bytes),
         (unsigned long long)(s0.device_to_device_bytes + s1.device_to_device_bytes),
         (unsigned long long)(s0.device_to_host_bytes + s1.device_to_host_bytes));
  for (p = 0; p < 2; ++p) {
    CHECK(syrah_buffer_release(grid[p]));
    CHECK(syrah_kernel_release(k[p]));
    CHECK(syrah_queue_release(q[p]));
  }
  free(init);
  free(ref);
  free(tmp);
  free(result);
  return maxerr < 1e-3 ? 0 : 1;
}
