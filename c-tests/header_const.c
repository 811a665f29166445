/* A program that keeps every handle as a pointer to const compiles with
 * -Wall -Wextra -Werror -pedantic (every handle argument of the header is
 * const) and runs on the default device. */
#include <syrah.h>

#include <stdio.h>

static const char *SRC = "__kernel void twice(__global int *p) { p[get_global_id(0)] *= 2; }";

int main(void) {
  const syrah_device *dev = NULL;
  const syrah_context *ctx = NULL;
  const syrah_queue *q = NULL;
  const syrah_program *prog = NULL;
  const syrah_kernel *k = NULL;
  const syrah_buffer *b = NULL;
  const syrah_event *ev = NULL;
  const syrah_host_accessor *ha = NULL;
  int host[64], i, ok = 1;
  void *p = NULL;
  syrah_buffer_desc desc = {4, 1, {64, 0, 0}, {0, 0, 0}, NULL, SYRAH_HOST_WRITE_BACK, NULL, NULL, NULL};
  syrah_accessor acc;
  syrah_kernel_arg arg;
  syrah_range r = syrah_range_1d(64);
  for (i = 0; i < 64; ++i) host[i] = i;
  desc.host_pointer = host;
  /* Outputs are written through non-const pointers to handles, then kept const. */
  {
    syrah_context *c = NULL;
    syrah_queue *qq = NULL;
    syrah_program *pp = NULL;
    syrah_kernel *kk = NULL;
    syrah_buffer *bb = NULL;
    syrah_event *ee = NULL;
    syrah_host_accessor *aa = NULL;
    if (syrah_device_select(SYRAH_SELECTOR_DEFAULT, &dev) || syrah_context_create(&dev, 1, &c)) goto fail;
    ctx = c;
    if (syrah_queue_create(ctx, dev, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &qq)) goto fail;
    q = qq;
    if (syrah_program_create_from_source(ctx, SRC, NULL, &pp)) goto fail;
    prog = pp;
    if (syrah_kernel_create(prog, "twice", &kk)) goto fail;
    k = kk;
    if (syrah_buffer_create(&desc, &bb)) goto fail;
    b = bb;
    acc.buffer = b;
    acc.mode = SYRAH_ACCESS_READ_WRITE;
    for (i = 0; i < 3; ++i) acc.offset[i] = acc.range[i] = 0;
    arg.kind = SYRAH_ARG_ACCESSOR;
    arg.size = 0;
    arg.value = NULL;
    if (syrah_queue_submit_kernel(q, k, &r, &acc, 1, &arg, 1, NULL, 0, &ee)) goto fail;
    ev = ee;
    if (syrah_event_retain(ev) || syrah_event_wait(ev) || syrah_event_release(ev)) goto fail;
    if (syrah_queue_wait(q) || syrah_queue_retain(q) || syrah_queue_release(q)) goto fail;
    if (syrah_buffer_host_access(b, SYRAH_ACCESS_READ, NULL, NULL, &aa, &p)) goto fail;
    ha = aa;
    ok = ((const int *)p)[63] == 126;
  }
  if (syrah_host_accessor_release(ha) || syrah_event_release(ev) || syrah_buffer_release(b) ||
      syrah_kernel_release(k) || syrah_program_release(prog) || syrah_queue_release(q) ||
      syrah_context_release(ctx))
    goto fail;
  printf("header_const: every handle const, result %s\n", ok && host[63] == 126 ? "right" : "wrong");
  return ok && host[63] == 126 ? 0 : 1;
fail:
  printf("header_const: %s\n", syrah_last_error_message());
  return 1;
}
