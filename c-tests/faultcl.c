/* A library for fault-injection tests. Loaded by Syrah through
 * SYRAH_OPENCL_LIBRARY, it forwards every OpenCL call to the real ICD
 * loader (which it links, so calls it does not define resolve there);
 * through SYRAH_CUDA_LIBRARY it wraps some CUDA driver calls and forwards
 * them to libcuda.so.1. It fails a chosen call on its N-th use after
 * faultcl_arm(). Extension entry points of cl_intel_unified_shared_memory
 * and cl_khr_command_buffer (with its mutable dispatch) are wrapped
 * through clGetExtensionFunctionAddressForPlatform, per platform. */
#define CL_TARGET_OPENCL_VERSION 300
#define _GNU_SOURCE
#include "faultcl.h"

#include <CL/cl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char armed[64];
static int armed_nth, armed_times, seen, fired_total;
static cl_int armed_code;

void faultcl_arm(const char *call, int nth, int times, int code) {
  pthread_mutex_lock(&lock);
  snprintf(armed, sizeof armed, "%s", call);
  armed_nth = nth;
  armed_times = times;
  armed_code = (cl_int)code;
  seen = 0;
  pthread_mutex_unlock(&lock);
}

int faultcl_disarm(void) {
  int n;
  pthread_mutex_lock(&lock);
  n = seen;
  armed[0] = '\0';
  seen = 0;
  pthread_mutex_unlock(&lock);
  return n;
}

int faultcl_fired(void) {
  int n;
  pthread_mutex_lock(&lock);
  n = fired_total;
  pthread_mutex_unlock(&lock);
  return n;
}

/* Whether this use of `call` is the one to fail; its code in `*code`. */
static int should_fail(const char *call, cl_int *code) {
  int fail = 0;
  pthread_mutex_lock(&lock);
  if (armed[0] && strcmp(armed, call) == 0) {
    ++seen;
    if (seen >= armed_nth && (armed_times == 0 || seen < armed_nth + armed_times)) {
      fail = 1;
      *code = armed_code;
      ++fired_total;
    }
  }
  pthread_mutex_unlock(&lock);
  return fail;
}

/* The real entry point `name` of the ICD loader. */
static void *real(const char *name) {
  static void *loader;
  void *f;
  if (!loader) loader = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
  f = loader ? dlsym(loader, name) : NULL;
  if (!f) {
    fprintf(stderr, "faultcl: the OpenCL loader has no %s\n", name);
    abort();
  }
  return f;
}

/* Object and function pointers convert through dlsym's POSIX guarantee. */
#define REAL(name, type) (__extension__(type) real(#name))
#define AS_FN(type, p) (__extension__(type)(p))
#define AS_PTR(f) (__extension__(void *)(f))

/* ---- core entry points ------------------------------------------------- */

cl_mem clCreateBuffer(cl_context c, cl_mem_flags f, size_t s, void *h, cl_int *e) {
  cl_int code;
  if (should_fail("clCreateBuffer", &code)) {
    if (e) *e = code;
    return NULL;
  }
  return REAL(clCreateBuffer, cl_mem (*)(cl_context, cl_mem_flags, size_t, void *, cl_int *))(c, f, s, h, e);
}

cl_int clSetKernelArg(cl_kernel k, cl_uint i, size_t s, const void *v) {
  cl_int code;
  if (should_fail("clSetKernelArg", &code)) return code;
  return REAL(clSetKernelArg, cl_int (*)(cl_kernel, cl_uint, size_t, const void *))(k, i, s, v);
}

cl_int clGetEventInfo(cl_event e, cl_event_info n, size_t s, void *v, size_t *r) {
  cl_int code;
  if (should_fail("clGetEventInfo", &code)) return code;
  return REAL(clGetEventInfo, cl_int (*)(cl_event, cl_event_info, size_t, void *, size_t *))(e, n, s, v, r);
}

void *clSVMAlloc(cl_context c, cl_svm_mem_flags f, size_t s, cl_uint a) {
  cl_int code;
  if (should_fail("clSVMAlloc", &code)) return NULL;
  return REAL(clSVMAlloc, void *(*)(cl_context, cl_svm_mem_flags, size_t, cl_uint))(c, f, s, a);
}

cl_int clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel k, cl_uint d, const size_t *o, const size_t *g,
                              const size_t *l, cl_uint n, const cl_event *w, cl_event *ev) {
  cl_int code;
  if (should_fail("clEnqueueNDRangeKernel", &code)) return code;
  return REAL(clEnqueueNDRangeKernel, cl_int (*)(cl_command_queue, cl_kernel, cl_uint, const size_t *,
                                                 const size_t *, const size_t *, cl_uint, const cl_event *,
                                                 cl_event *))(q, k, d, o, g, l, n, w, ev);
}

cl_int clEnqueueSVMMemcpy(cl_command_queue q, cl_bool b, void *d, const void *s, size_t n, cl_uint nw,
                          const cl_event *w, cl_event *ev) {
  cl_int code;
  if (should_fail("clEnqueueSVMMemcpy", &code)) return code;
  return REAL(clEnqueueSVMMemcpy, cl_int (*)(cl_command_queue, cl_bool, void *, const void *, size_t, cl_uint,
                                             const cl_event *, cl_event *))(q, b, d, s, n, nw, w, ev);
}

cl_int clEnqueueReadBuffer(cl_command_queue q, cl_mem m, cl_bool b, size_t o, size_t n, void *p, cl_uint nw,
                           const cl_event *w, cl_event *ev) {
  cl_int code;
  if (should_fail("clEnqueueReadBuffer", &code)) return code;
  return REAL(clEnqueueReadBuffer, cl_int (*)(cl_command_queue, cl_mem, cl_bool, size_t, size_t, void *, cl_uint,
                                              const cl_event *, cl_event *))(q, m, b, o, n, p, nw, w, ev);
}

cl_int clEnqueueWriteBuffer(cl_command_queue q, cl_mem m, cl_bool b, size_t o, size_t n, const void *p,
                            cl_uint nw, const cl_event *w, cl_event *ev) {
  cl_int code;
  if (should_fail("clEnqueueWriteBuffer", &code)) return code;
  return REAL(clEnqueueWriteBuffer, cl_int (*)(cl_command_queue, cl_mem, cl_bool, size_t, size_t, const void *,
                                               cl_uint, const cl_event *, cl_event *))(q, m, b, o, n, p, nw, w, ev);
}

cl_int clEnqueueCopyBuffer(cl_command_queue q, cl_mem s, cl_mem d, size_t so, size_t dof, size_t n, cl_uint nw,
                           const cl_event *w, cl_event *ev) {
  cl_int code;
  if (should_fail("clEnqueueCopyBuffer", &code)) return code;
  return REAL(clEnqueueCopyBuffer, cl_int (*)(cl_command_queue, cl_mem, cl_mem, size_t, size_t, size_t, cl_uint,
                                              const cl_event *, cl_event *))(q, s, d, so, dof, n, nw, w, ev);
}

cl_int clBuildProgram(cl_program p, cl_uint n, const cl_device_id *d, const char *o,
                      void(CL_CALLBACK *cb)(cl_program, void *), void *u) {
  cl_int code;
  if (should_fail("clBuildProgram", &code)) return code;
  return REAL(clBuildProgram, cl_int (*)(cl_program, cl_uint, const cl_device_id *, const char *,
                                         void(CL_CALLBACK *)(cl_program, void *), void *))(p, n, d, o, cb, u);
}

cl_command_queue clCreateCommandQueueWithProperties(cl_context c, cl_device_id d, const cl_queue_properties *p,
                                                    cl_int *e) {
  cl_int code;
  if (should_fail("clCreateCommandQueueWithProperties", &code)) {
    if (e) *e = code;
    return NULL;
  }
  return REAL(clCreateCommandQueueWithProperties,
              cl_command_queue (*)(cl_context, cl_device_id, const cl_queue_properties *, cl_int *))(c, d, p, e);
}

cl_event clCreateUserEvent(cl_context c, cl_int *e) {
  cl_int code;
  if (should_fail("clCreateUserEvent", &code)) {
    if (e) *e = code;
    return NULL;
  }
  return REAL(clCreateUserEvent, cl_event (*)(cl_context, cl_int *))(c, e);
}

cl_int clEnqueueMarkerWithWaitList(cl_command_queue q, cl_uint n, const cl_event *w, cl_event *ev) {
  cl_int code;
  if (should_fail("clEnqueueMarkerWithWaitList", &code)) return code;
  return REAL(clEnqueueMarkerWithWaitList, cl_int (*)(cl_command_queue, cl_uint, const cl_event *, cl_event *))(
      q, n, w, ev);
}

/* ---- extensions, per platform ------------------------------------------ */

typedef void *(*host_alloc_fn)(cl_context, const cl_ulong *, size_t, cl_uint, cl_int *);
typedef void *(*dev_alloc_fn)(cl_context, cl_device_id, const cl_ulong *, size_t, cl_uint, cl_int *);
typedef cl_int (*memcpy_fn)(cl_command_queue, cl_bool, void *, const void *, size_t, cl_uint, const cl_event *,
                            cl_event *);

typedef void *(*cb_create_fn)(cl_uint, const cl_command_queue *, const cl_ulong *, cl_int *);
typedef cl_int (*cb_release_fn)(void *);
typedef cl_int (*cb_enqueue_fn)(cl_uint, cl_command_queue *, void *, cl_uint, const cl_event *, cl_event *);
typedef cl_int (*cb_update_fn)(void *, cl_uint, const cl_uint *, const void **);

#define MAX_PLATFORMS 8
static struct {
  cl_platform_id platform;
  host_alloc_fn host_alloc;
  dev_alloc_fn device_alloc, shared_alloc;
  memcpy_fn memcpy;
  cb_create_fn cb_create;
  cb_release_fn cb_release;
  cb_enqueue_fn cb_enqueue;
  cb_update_fn cb_update;
} ext[MAX_PLATFORMS];

static int slot_of(cl_platform_id p) {
  int i;
  for (i = 0; i < MAX_PLATFORMS; ++i)
    if (ext[i].platform == p || !ext[i].platform) {
      ext[i].platform = p;
      return i;
    }
  return -1;
}

static cl_platform_id platform_of_context(cl_context c) {
  cl_device_id d = NULL;
  cl_platform_id p = NULL;
  REAL(clGetContextInfo, cl_int (*)(cl_context, cl_context_info, size_t, void *, size_t *))(
      c, CL_CONTEXT_DEVICES, sizeof d, &d, NULL);
  REAL(clGetDeviceInfo, cl_int (*)(cl_device_id, cl_device_info, size_t, void *, size_t *))(
      d, CL_DEVICE_PLATFORM, sizeof p, &p, NULL);
  return p;
}

static int slot_of_context(cl_context c) {
  int s;
  pthread_mutex_lock(&lock);
  s = slot_of(platform_of_context(c));
  pthread_mutex_unlock(&lock);
  return s;
}

static void *wrap_host_alloc(cl_context c, const cl_ulong *p, size_t s, cl_uint a, cl_int *e) {
  cl_int code;
  if (should_fail("clHostMemAllocINTEL", &code)) {
    if (e) *e = code;
    return NULL;
  }
  return ext[slot_of_context(c)].host_alloc(c, p, s, a, e);
}

static void *wrap_device_alloc(cl_context c, cl_device_id d, const cl_ulong *p, size_t s, cl_uint a, cl_int *e) {
  cl_int code;
  if (should_fail("clDeviceMemAllocINTEL", &code)) {
    if (e) *e = code;
    return NULL;
  }
  return ext[slot_of_context(c)].device_alloc(c, d, p, s, a, e);
}

static void *wrap_shared_alloc(cl_context c, cl_device_id d, const cl_ulong *p, size_t s, cl_uint a, cl_int *e) {
  cl_int code;
  if (should_fail("clSharedMemAllocINTEL", &code)) {
    if (e) *e = code;
    return NULL;
  }
  return ext[slot_of_context(c)].shared_alloc(c, d, p, s, a, e);
}

static cl_int wrap_memcpy(cl_command_queue q, cl_bool b, void *d, const void *s, size_t n, cl_uint nw,
                          const cl_event *w, cl_event *ev) {
  cl_int code;
  cl_context c = NULL;
  if (should_fail("clEnqueueMemcpyINTEL", &code)) return code;
  REAL(clGetCommandQueueInfo, cl_int (*)(cl_command_queue, cl_command_queue_info, size_t, void *, size_t *))(
      q, CL_QUEUE_CONTEXT, sizeof c, &c, NULL);
  return ext[slot_of_context(c)].memcpy(q, b, d, s, n, nw, w, ev);
}

/* Live command-buffers and the platform slot each belongs to. */
#define MAX_COMMAND_BUFFERS 4096
static struct {
  void *cb;
  int slot;
} cbs[MAX_COMMAND_BUFFERS];

static int slot_of_command_buffer(void *cb) {
  int i, s = -1;
  pthread_mutex_lock(&lock);
  for (i = 0; i < MAX_COMMAND_BUFFERS && s < 0; ++i)
    if (cbs[i].cb == cb) s = cbs[i].slot;
  pthread_mutex_unlock(&lock);
  if (s < 0) {
    fprintf(stderr, "faultcl: unknown command-buffer %p\n", cb);
    abort();
  }
  return s;
}

static void *wrap_cb_create(cl_uint n, const cl_command_queue *qs, const cl_ulong *p, cl_int *e) {
  cl_int code;
  cl_context c = NULL;
  void *cb;
  int s, i;
  if (should_fail("clCreateCommandBufferKHR", &code)) {
    if (e) *e = code;
    return NULL;
  }
  REAL(clGetCommandQueueInfo, cl_int (*)(cl_command_queue, cl_command_queue_info, size_t, void *, size_t *))(
      qs[0], CL_QUEUE_CONTEXT, sizeof c, &c, NULL);
  s = slot_of_context(c);
  cb = ext[s].cb_create(n, qs, p, e);
  if (!cb) return cb;
  pthread_mutex_lock(&lock);
  for (i = 0; i < MAX_COMMAND_BUFFERS && cbs[i].cb; ++i) {
  }
  if (i < MAX_COMMAND_BUFFERS) {
    cbs[i].cb = cb;
    cbs[i].slot = s;
  }
  pthread_mutex_unlock(&lock);
  if (i == MAX_COMMAND_BUFFERS) {
    fprintf(stderr, "faultcl: more than %d live command-buffers\n", MAX_COMMAND_BUFFERS);
    abort();
  }
  return cb;
}

static cl_int wrap_cb_release(void *cb) {
  int s = slot_of_command_buffer(cb), i;
  cl_int rc = ext[s].cb_release(cb);
  pthread_mutex_lock(&lock);
  for (i = 0; i < MAX_COMMAND_BUFFERS; ++i)
    if (cbs[i].cb == cb) cbs[i].cb = NULL;
  pthread_mutex_unlock(&lock);
  return rc;
}

static cl_int wrap_cb_enqueue(cl_uint n, cl_command_queue *qs, void *cb, cl_uint nw, const cl_event *w,
                              cl_event *ev) {
  cl_int code;
  if (should_fail("clEnqueueCommandBufferKHR", &code)) return code;
  return ext[slot_of_command_buffer(cb)].cb_enqueue(n, qs, cb, nw, w, ev);
}

static cl_int wrap_cb_update(void *cb, cl_uint n, const cl_uint *types, const void **configs) {
  cl_int code;
  if (should_fail("clUpdateMutableCommandsKHR", &code)) return code;
  return ext[slot_of_command_buffer(cb)].cb_update(cb, n, types, configs);
}

void *clGetExtensionFunctionAddressForPlatform(cl_platform_id p, const char *name) {
  void *f = REAL(clGetExtensionFunctionAddressForPlatform, void *(*)(cl_platform_id, const char *))(p, name);
  int s;
  if (!f || !name) return f;
  pthread_mutex_lock(&lock);
  s = slot_of(p);
  pthread_mutex_unlock(&lock);
  if (s < 0) return f;
  if (strcmp(name, "clHostMemAllocINTEL") == 0) {
    ext[s].host_alloc = AS_FN(host_alloc_fn, f);
    return AS_PTR(wrap_host_alloc);
  }
  if (strcmp(name, "clDeviceMemAllocINTEL") == 0) {
    ext[s].device_alloc = AS_FN(dev_alloc_fn, f);
    return AS_PTR(wrap_device_alloc);
  }
  if (strcmp(name, "clSharedMemAllocINTEL") == 0) {
    ext[s].shared_alloc = AS_FN(dev_alloc_fn, f);
    return AS_PTR(wrap_shared_alloc);
  }
  if (strcmp(name, "clEnqueueMemcpyINTEL") == 0) {
    ext[s].memcpy = AS_FN(memcpy_fn, f);
    return AS_PTR(wrap_memcpy);
  }
  if (strcmp(name, "clCreateCommandBufferKHR") == 0) {
    ext[s].cb_create = AS_FN(cb_create_fn, f);
    return AS_PTR(wrap_cb_create);
  }
  if (strcmp(name, "clReleaseCommandBufferKHR") == 0) {
    ext[s].cb_release = AS_FN(cb_release_fn, f);
    return AS_PTR(wrap_cb_release);
  }
  if (strcmp(name, "clEnqueueCommandBufferKHR") == 0) {
    ext[s].cb_enqueue = AS_FN(cb_enqueue_fn, f);
    return AS_PTR(wrap_cb_enqueue);
  }
  if (strcmp(name, "clUpdateMutableCommandsKHR") == 0) {
    ext[s].cb_update = AS_FN(cb_update_fn, f);
    return AS_PTR(wrap_cb_update);
  }
  return f;
}

/* ---- CUDA driver entry points ----------------------------------------- */
/* Loaded by Syrah through SYRAH_CUDA_LIBRARY, which takes the entry points
 * this library defines from it and the rest from libcuda.so.1. Each fails
 * under the name the CUDA API documents (no version suffix) and returns
 * the armed CUDA error. No CUDA header is needed: handles are pointers,
 * device addresses 64-bit integers. */

typedef int cu_result;
typedef unsigned long long cu_ptr;

/* The real entry point `name` of the CUDA driver library. */
static void *real_cuda(const char *name) {
  static void *driver;
  void *f;
  if (!driver) driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  f = driver ? dlsym(driver, name) : NULL;
  if (!f) {
    fprintf(stderr, "faultcl: the CUDA driver library has no %s\n", name);
    abort();
  }
  return f;
}

#define REAL_CUDA(sym, type) (__extension__(type) real_cuda(#sym))

cu_result cuMemAlloc_v2(cu_ptr *p, size_t n) {
  cl_int code;
  if (should_fail("cuMemAlloc", &code)) return code;
  return REAL_CUDA(cuMemAlloc_v2, cu_result (*)(cu_ptr *, size_t))(p, n);
}

cu_result cuMemcpyAsync(cu_ptr d, cu_ptr s, size_t n, void *stream) {
  cl_int code;
  if (should_fail("cuMemcpyAsync", &code)) return code;
  return REAL_CUDA(cuMemcpyAsync, cu_result (*)(cu_ptr, cu_ptr, size_t, void *))(d, s, n, stream);
}

cu_result cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                         unsigned shared, void *stream, void **params, void **extra) {
  cl_int code;
  if (should_fail("cuLaunchKernel", &code)) return code;
  return REAL_CUDA(cuLaunchKernel, cu_result (*)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                                 unsigned, void *, void **, void **))(f, gx, gy, gz, bx, by, bz,
                                                                                      shared, stream, params, extra);
}

cu_result cuPointerGetAttribute(void *data, int attribute, cu_ptr p) {
  cl_int code;
  if (should_fail("cuPointerGetAttribute", &code)) return code;
  return REAL_CUDA(cuPointerGetAttribute, cu_result (*)(void *, int, cu_ptr))(data, attribute, p);
}

cu_result cuModuleLoadDataEx(void **module, const void *image, unsigned n, int *options, void **values) {
  cl_int code;
  if (should_fail("cuModuleLoadDataEx", &code)) return code;
  return REAL_CUDA(cuModuleLoadDataEx, cu_result (*)(void **, const void *, unsigned, int *, void **))(
      module, image, n, options, values);
}

cu_result cuStreamCreate(void **stream, unsigned flags) {
  cl_int code;
  if (should_fail("cuStreamCreate", &code)) return code;
  return REAL_CUDA(cuStreamCreate, cu_result (*)(void **, unsigned))(stream, flags);
}

cu_result cuGraphCreate(void **graph, unsigned flags) {
  cl_int code;
  if (should_fail("cuGraphCreate", &code)) return code;
  return REAL_CUDA(cuGraphCreate, cu_result (*)(void **, unsigned))(graph, flags);
}

cu_result cuGraphLaunch(void *exec, void *stream) {
  cl_int code;
  if (should_fail("cuGraphLaunch", &code)) return code;
  return REAL_CUDA(cuGraphLaunch, cu_result (*)(void *, void *))(exec, stream);
}

cu_result cuGraphExecKernelNodeSetParams_v2(void *exec, void *node, const void *params) {
  cl_int code;
  if (should_fail("cuGraphExecKernelNodeSetParams", &code)) return code;
  return REAL_CUDA(cuGraphExecKernelNodeSetParams_v2, cu_result (*)(void *, void *, const void *))(exec, node,
                                                                                                    params);
}

cu_result cuStreamWriteValue32_v2(void *stream, cu_ptr addr, unsigned value, unsigned flags) {
  cl_int code;
  if (should_fail("cuStreamWriteValue32", &code)) return code;
  return REAL_CUDA(cuStreamWriteValue32_v2, cu_result (*)(void *, cu_ptr, unsigned, unsigned))(stream, addr, value,
                                                                                               flags);
}

cu_result cuStreamWaitValue32_v2(void *stream, cu_ptr addr, unsigned value, unsigned flags) {
  cl_int code;
  if (should_fail("cuStreamWaitValue32", &code)) return code;
  return REAL_CUDA(cuStreamWaitValue32_v2, cu_result (*)(void *, cu_ptr, unsigned, unsigned))(stream, addr, value,
                                                                                              flags);
}
