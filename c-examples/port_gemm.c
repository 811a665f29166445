/* A GEMM port through Syrah's buffers: the inputs are read-only buffers
 * over the host arrays, C is written back into its array at release. Host
 * code only; the kernel and the check are in port_gemm.h. */
#include <syrah.h>

#include "port_gemm.h"

#define CHECK(call)                                                                \
  do {                                                                             \
    if ((call) != SYRAH_SUCCESS) {                                                 \
      fprintf(stderr, "%s failed: %s\n", #call, syrah_last_error_message());       \
      return 1;                                                                    \
    }                                                                              \
  } while (0)

enum { N = 256 };
static float a[N * N], b[N * N], c[N * N], expect[N * N];

int main(void) {
  const syrah_device *device;
  syrah_queue *queue;
  syrah_context *ctx;
  syrah_program *program;
  syrah_kernel *kernel;
  syrah_buffer *ba, *bb, *bc;
  int n = N;
  float alpha = 1.5f, beta = 0.5f;
  gemm_init(N, a, b, c, expect, alpha, beta);
  CHECK(syrah_device_select(SYRAH_SELECTOR_DEFAULT, &device));
  CHECK(syrah_queue_create(NULL, device, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &queue));
  CHECK(syrah_queue_get_context(queue, &ctx));
  CHECK(syrah_program_create_from_source(ctx, gemm_source, NULL, &program));
  CHECK(syrah_kernel_create(program, "gemm", &kernel));
  syrah_buffer_desc da = syrah_buffer_desc_2d(sizeof(float), N, N, a, SYRAH_HOST_READ_ONLY);
  syrah_buffer_desc db = syrah_buffer_desc_2d(sizeof(float), N, N, b, SYRAH_HOST_READ_ONLY);
  syrah_buffer_desc dc = syrah_buffer_desc_2d(sizeof(float), N, N, c, SYRAH_HOST_WRITE_BACK);
  CHECK(syrah_buffer_create(&da, &ba));
  CHECK(syrah_buffer_create(&db, &bb));
  CHECK(syrah_buffer_create(&dc, &bc));
  syrah_accessor acc[3] = {syrah_accessor_whole(ba, SYRAH_ACCESS_READ),
                           syrah_accessor_whole(bb, SYRAH_ACCESS_READ),
                           syrah_accessor_whole(bc, SYRAH_ACCESS_READ_WRITE)};
  syrah_kernel_arg args[6] = {syrah_arg_accessor(0), syrah_arg_accessor(1),
                              syrah_arg_accessor(2), syrah_arg_value(&n, sizeof n),
                              syrah_arg_value(&alpha, sizeof alpha),
                              syrah_arg_value(&beta, sizeof beta)};
  syrah_range range = syrah_range_2d(N, N);
  CHECK(syrah_queue_submit_kernel(queue, kernel, &range, acc, 3, args, 6, NULL, 0, NULL));
  CHECK(syrah_buffer_release(ba));
  CHECK(syrah_buffer_release(bb));
  CHECK(syrah_buffer_release(bc)); /* waits for the kernel, writes C back */
  CHECK(syrah_kernel_release(kernel));
  CHECK(syrah_program_release(program));
  CHECK(syrah_queue_release(queue));
  CHECK(syrah_context_release(ctx));
  return gemm_check("port_gemm (Syrah buffers)", N, c, expect);
}
