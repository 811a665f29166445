/* With SYRAH_VALIDATE=1: released handles and USM kernel arguments outside
 * any allocation are caught. */
#include "testing.h"

static void test_handles(const syrah_device *d) {
  syrah_context *ctx = NULL;
  syrah_queue *q = NULL;
  syrah_program *p = NULL;
  syrah_kernel *k = NULL;
  syrah_event *e = NULL;
  const syrah_device *dev = NULL;
  int local = 0;
  REQUIRE_OK(syrah_context_create(&d, 1, &ctx));
  REQUIRE_OK(syrah_queue_create(ctx, d, 0, NULL, NULL, &q));
  EXPECT_OK(syrah_queue_release(q));
  EXPECT_ERR(syrah_queue_get_device(q, &dev), SYRAH_ERROR_INVALID_HANDLE, "not a live handle");
  EXPECT_ERR(syrah_queue_release(q), SYRAH_ERROR_INVALID_HANDLE, "released twice");
  EXPECT_ERR(syrah_context_retain((syrah_context *)&local), SYRAH_ERROR_INVALID_HANDLE, "not a live handle");
  REQUIRE_OK(syrah_program_create_from_source(ctx, "__kernel void f(__global int *p) { p[0] = 1; }", NULL, &p));
  REQUIRE_OK(syrah_kernel_create(p, "f", &k));
  EXPECT_OK(syrah_program_release(p));
  EXPECT_ERR(syrah_kernel_create(p, "f", &k), SYRAH_ERROR_INVALID_HANDLE, "program");
  REQUIRE_OK(syrah_user_event_create(ctx, &e));
  EXPECT_OK(syrah_user_event_complete(e, false));
  EXPECT_OK(syrah_event_release(e));
  EXPECT_ERR(syrah_event_wait(e), SYRAH_ERROR_INVALID_HANDLE, "event");
  if (t_has(d, SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS)) {
    void *mem = NULL;
    syrah_kernel_arg arg;
    syrah_range r = syrah_range_1d(1);
    REQUIRE_OK(syrah_queue_create(ctx, d, 0, NULL, NULL, &q));
    REQUIRE_OK(syrah_malloc_device(ctx, d, 64, &mem));
    arg = syrah_arg_usm(&local);
    EXPECT_ERR(syrah_queue_launch(q, k, &r, &arg, 1, NULL, 0, NULL), SYRAH_ERROR_INVALID_POINTER,
               "argument 0 of kernel 'f'");
    arg = syrah_arg_usm((char *)mem + 60);
    EXPECT_OK(syrah_queue_launch(q, k, &r, &arg, 1, NULL, 0, NULL));
    EXPECT_OK(syrah_queue_wait(q));
    EXPECT_OK(syrah_free(ctx, mem));
    EXPECT_OK(syrah_queue_release(q));
  } else {
    t_skip("USM argument validation", "the device has no USM");
  }
  EXPECT_OK(syrah_kernel_release(k));
  EXPECT_ERR(syrah_kernel_release(k), SYRAH_ERROR_INVALID_HANDLE, "kernel");
  EXPECT_OK(syrah_context_release(ctx));
  EXPECT_ERR(syrah_context_release(ctx), SYRAH_ERROR_INVALID_HANDLE, "context");
}

int main(void) {
  const char *v = getenv("SYRAH_VALIDATE");
  if (!v || strcmp(v, "1") != 0) {
    printf("test_validate needs SYRAH_VALIDATE=1 (CTest sets it)\n");
    return 1;
  }
  t_for_each_device(test_handles);
  return t_finish("test_validate");
}
