/* C = A x B with buffers and a tiled kernel: each work-group stages 16x16
 * tiles of A and B in group-local memory (kernel-scope __local arrays).
 * Checked against a host multiplication. */
#include "example.h"

#include <math.h>
#include <string.h>

enum { N = 256, TILE = 16 };

static const char *source =
    "#define TILE 16\n"
    "__kernel void matmul(__global const float *a, __global const float *b, __global float *c, int n) {\n"
    "  __local float ta[TILE][TILE];\n"
    "  __local float tb[TILE][TILE];\n"
    "  /* Dimension 0 runs along a row, so neighbouring work-items read and\n"
    "     write neighbouring addresses. */\n"
    "  int col = (int)get_global_id(0), row = (int)get_global_id(1);\n"
    "  int lc = (int)get_local_id(0), lr = (int)get_local_id(1);\n"
    "  float sum = 0.0f;\n"
    "  for (int t = 0; t < n; t += TILE) {\n"
    "    ta[lr][lc] = a[row * n + t + lc];\n"
    "    tb[lr][lc] = b[(t + lr) * n + col];\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    for (int k = 0; k < TILE; ++k) sum += ta[lr][k] * tb[k][lc];\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  }\n"
    "  c[row * n + col] = sum;\n"
    "}\n";

int main(void) {
  const syrah_device *device = NULL;
  syrah_queue *queue = example_queue(&device);
  syrah_context *ctx = NULL;
  syrah_program *program = NULL;
  syrah_kernel *kernel = NULL;
  float *a = (float *)malloc(sizeof(float) * N * N), *b = (float *)malloc(sizeof(float) * N * N);
  float *c = (float *)malloc(sizeof(float) * N * N);
  syrah_buffer *ba = NULL, *bb = NULL, *bc = NULL;
  syrah_buffer_desc d;
  syrah_accessor acc[3];
  syrah_kernel_arg args[4];
  syrah_range r = syrah_nd_range_2d(N, N, TILE, TILE);
  int i, j, k, n = N;
  double maxerr = 0;
  uint64_t local = 0;
  if (!a || !b || !c) return 1;
  for (i = 0; i < N * N; ++i) {
    a[i] = (float)((i * 7) % 13) / 13.0f;
    b[i] = (float)((i * 5) % 11) / 11.0f;
  }
  CHECK(syrah_queue_get_context(queue, &ctx));
  CHECK(syrah_program_create_from_source(ctx, source, NULL, &program));
  CHECK(syrah_kernel_create(program, "matmul", &kernel));
  CHECK(syrah_kernel_get_info(kernel, device, SYRAH_KERNEL_INFO_LOCAL_MEM_SIZE, &local));
  memset(&d, 0, sizeof d);
  d.element_size = sizeof(float);
  d.dimensions = 2;
  d.range[0] = N;
  d.range[1] = N;
  d.ownership = SYRAH_HOST_READ_ONLY;
  d.host_pointer = a;
  CHECK(syrah_buffer_create(&d, &ba));
  d.host_pointer = b;
  CHECK(syrah_buffer_create(&d, &bb));
  d.host_pointer = c;
  d.ownership = SYRAH_HOST_WRITE_BACK;
  CHECK(syrah_buffer_create(&d, &bc));
  memset(acc, 0, sizeof acc);
  acc[0].buffer = ba;
  acc[0].mode = SYRAH_ACCESS_READ;
  acc[1].buffer = bb;
  acc[1].mode = SYRAH_ACCESS_READ;
  acc[2].buffer = bc;
  acc[2].mode = SYRAH_ACCESS_DISCARD_WRITE;
  for (i = 0; i < 3; ++i) {
    args[i].kind = SYRAH_ARG_ACCESSOR;
    args[i].size = (size_t)i;
    args[i].value = NULL;
  }
  args[3] = syrah_arg_value(&n, sizeof n);
  CHECK(syrah_queue_submit_kernel(queue, kernel, &r, acc, 3, args, 4, NULL, 0, NULL));
  /* Releasing C writes the product back into `c` (and waits for it). */
  CHECK(syrah_buffer_release(bc));
  for (i = 0; i < N; ++i)
    for (j = 0; j < N; ++j) {
      double s = 0, e;
      for (k = 0; k < N; ++k) s += (double)a[i * N + k] * (double)b[k * N + j];
      e = fabs(s - (double)c[i * N + j]);
      if (e > maxerr) maxerr = e;
    }
  printf("matmul_tiled: %dx%d, tiles of %dx%d in %llu B of kernel-scope local memory: max error %.2e\n", N, N,
         TILE, TILE, (unsigned long long)local, maxerr);
  CHECK(syrah_buffer_release(ba));
  CHECK(syrah_buffer_release(bb));
  CHECK(syrah_kernel_release(kernel));
  CHECK(syrah_program_release(program));
  CHECK(syrah_context_release(ctx));
  CHECK(syrah_queue_release(queue));
  free(a);
  free(b);
  free(c);
  return maxerr < 1e-2 ? 0 : 1;
}
