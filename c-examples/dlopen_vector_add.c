/* Uses libsyrah.so without linking to it: dlopen, then every function is
 * resolved by name. Adds two vectors through buffers on the default device
 * (SYRAH_DEVICE picks another) and checks the result. */
#include <syrah.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef syrah_status (*select_fn)(syrah_selector, const syrah_device **);
typedef syrah_status (*queue_create_fn)(const syrah_context *, const syrah_device *, syrah_queue_flags,
                                        syrah_async_handler, void *, syrah_queue **);
typedef syrah_status (*queue_get_context_fn)(const syrah_queue *, syrah_context **);
typedef syrah_status (*program_fn)(const syrah_context *, const char *, const char *, syrah_program **);
typedef syrah_status (*kernel_fn)(const syrah_program *, const char *, syrah_kernel **);
typedef syrah_status (*buffer_create_fn)(const syrah_buffer_desc *, syrah_buffer **);
typedef syrah_status (*submit_fn)(const syrah_queue *, const syrah_kernel *, const syrah_range *,
                                  const syrah_accessor *, size_t, const syrah_kernel_arg *, size_t,
                                  const syrah_event *const *, size_t, syrah_event **);
typedef syrah_status (*release_buffer_fn)(const syrah_buffer *);
typedef syrah_status (*release_kernel_fn)(const syrah_kernel *);
typedef syrah_status (*release_program_fn)(const syrah_program *);
typedef syrah_status (*release_queue_fn)(const syrah_queue *);
typedef syrah_status (*release_context_fn)(const syrah_context *);
typedef const char *(*message_fn)(void);
typedef uint32_t (*version_fn)(void);

static void *lib;

/* dlsym returns an object pointer; copy it into the function pointer. */
static void resolve(const char *name, void *fn, size_t size) {
  void *sym = dlsym(lib, name);
  if (!sym) {
    fprintf(stderr, "symbol %s not found: %s\n", name, dlerror());
    exit(1);
  }
  memcpy(fn, &sym, size);
}
#define RESOLVE(var, name) resolve(name, &var, sizeof var)

static message_fn last_error;
#define CHECK(call)                                                                  \
  do {                                                                               \
    syrah_status s_ = (call);                                                        \
    if (s_ != SYRAH_SUCCESS) {                                                       \
      fprintf(stderr, "%s failed (%d): %s\n", #call, (int)s_, last_error());         \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)

static const char *source =
    "__kernel void vadd(__global const float *a, __global const float *b, __global float *c) {\n"
    "  size_t i = get_global_id(0);\n"
    "  c[i] = a[i] + b[i];\n"
    "}\n";

int main(void) {
  enum { N = 4096 };
  select_fn device_select;
  queue_create_fn queue_create;
  queue_get_context_fn queue_get_context;
  program_fn program_create;
  kernel_fn kernel_create;
  buffer_create_fn buffer_create;
  submit_fn submit_kernel;
  release_buffer_fn buffer_release;
  release_kernel_fn kernel_release;
  release_program_fn program_release;
  release_queue_fn queue_release;
  release_context_fn context_release;
  version_fn api_version;
  const syrah_device *dev;
  syrah_queue *q;
  syrah_context *ctx;
  syrah_program *prog;
  syrah_kernel *k;
  syrah_buffer *buf[3];
  syrah_buffer_desc d;
  syrah_accessor acc[3];
  syrah_kernel_arg args[3];
  syrah_range r = syrah_range_1d(N);
  static float a[N], b[N], c[N];
  int i, wrong = 0;
  lib = dlopen("libsyrah.so.0", RTLD_NOW | RTLD_LOCAL);
  if (!lib) lib = dlopen("libsyrah.so", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "cannot load libsyrah: %s\n", dlerror());
    return 1;
  }
  RESOLVE(last_error, "syrah_last_error_message");
  RESOLVE(api_version, "syrah_api_version");
  RESOLVE(device_select, "syrah_device_select");
  RESOLVE(queue_create, "syrah_queue_create");
  RESOLVE(queue_get_context, "syrah_queue_get_context");
  RESOLVE(program_create, "syrah_program_create_from_source");
  RESOLVE(kernel_create, "syrah_kernel_create");
  RESOLVE(buffer_create, "syrah_buffer_create");
  RESOLVE(submit_kernel, "syrah_queue_submit_kernel");
  RESOLVE(buffer_release, "syrah_buffer_release");
  RESOLVE(kernel_release, "syrah_kernel_release");
  RESOLVE(program_release, "syrah_program_release");
  RESOLVE(queue_release, "syrah_queue_release");
  RESOLVE(context_release, "syrah_context_release");
  if (api_version() / 10000 != SYRAH_VERSION_MAJOR) {
    fprintf(stderr, "libsyrah %u does not match the header's major version %d\n", api_version(), SYRAH_VERSION_MAJOR);
    return 1;
  }
  for (i = 0; i < N; ++i) {
    a[i] = (float)i;
    b[i] = (float)(2 * i);
  }
  CHECK(device_select(SYRAH_SELECTOR_DEFAULT, &dev));
  CHECK(queue_create(NULL, dev, SYRAH_QUEUE_IN_ORDER, NULL, NULL, &q));
  CHECK(queue_get_context(q, &ctx));
  CHECK(program_create(ctx, source, NULL, &prog));
  CHECK(kernel_create(prog, "vadd", &k));
  memset(&d, 0, sizeof d);
  d.element_size = sizeof(float);
  d.dimensions = 1;
  d.range[0] = N;
  d.ownership = SYRAH_HOST_READ_ONLY;
  d.host_pointer = a;
  CHECK(buffer_create(&d, &buf[0]));
  d.host_pointer = b;
  CHECK(buffer_create(&d, &buf[1]));
  d.ownership = SYRAH_HOST_WRITE_BACK;
  d.host_pointer = c;
  CHECK(buffer_create(&d, &buf[2]));
  memset(acc, 0, sizeof acc);
  for (i = 0; i < 3; ++i) {
    acc[i].buffer = buf[i];
    acc[i].mode = i < 2 ? SYRAH_ACCESS_READ : SYRAH_ACCESS_DISCARD_WRITE;
    args[i].kind = SYRAH_ARG_ACCESSOR;
    args[i].size = (size_t)i;
    args[i].value = NULL;
  }
  CHECK(submit_kernel(q, k, &r, acc, 3, args, 3, NULL, 0, NULL));
  for (i = 0; i < 3; ++i) CHECK(buffer_release(buf[i])); /* c is written back here */
  for (i = 0; i < N; ++i) wrong += c[i] != 3.0f * (float)i;
  printf("dlopen_vector_add: libsyrah %u, %d elements, %d wrong\n", api_version(), N, wrong);
  CHECK(kernel_release(k));
  CHECK(program_release(prog));
  CHECK(queue_release(q));
  CHECK(context_release(ctx));
  dlclose(lib);
  return wrong == 0 ? 0 : 1;
}
