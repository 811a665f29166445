/* The OpenCL calls clcalls.c counts, and how a program reads the counts. */
#ifndef SYRAH_CLCALLS_H
#define SYRAH_CLCALLS_H

typedef struct {
  const char *name;
  unsigned long long calls, nanoseconds;
} clcalls_row;

/* Fills up to `capacity` rows with the calls made since the last take
 * (functions never called are left out) and starts a new count; returns
 * the number of rows there were. */
typedef int (*clcalls_take_fn)(clcalls_row *rows, int capacity);

#ifdef CL_API_ENTRY
typedef void(CL_CALLBACK *clcalls_notify)(cl_event, cl_int, void *);

/* X(return type, name, parameters, arguments) for each counted call. */
#define CLCALLS_LIST(X)                                                                                         \
  X(cl_int, clEnqueueNDRangeKernel,                                                                             \
    (cl_command_queue q, cl_kernel k, cl_uint d, const size_t *o, const size_t *g, const size_t *l, cl_uint n,  \
     const cl_event *w, cl_event *e),                                                                           \
    (q, k, d, o, g, l, n, w, e))                                                                                \
  X(cl_int, clFlush, (cl_command_queue q), (q))                                                                 \
  X(cl_int, clFinish, (cl_command_queue q), (q))                                                                \
  X(cl_int, clSetKernelArg, (cl_kernel k, cl_uint i, size_t s, const void *v), (k, i, s, v))                    \
  X(cl_int, clSetKernelArgSVMPointer, (cl_kernel k, cl_uint i, const void *v), (k, i, v))                       \
  X(cl_int, clEnqueueMarkerWithWaitList, (cl_command_queue q, cl_uint n, const cl_event *w, cl_event *e),        \
    (q, n, w, e))                                                                                               \
  X(cl_int, clEnqueueBarrierWithWaitList, (cl_command_queue q, cl_uint n, const cl_event *w, cl_event *e),       \
    (q, n, w, e))                                                                                               \
  X(cl_int, clGetEventInfo, (cl_event e, cl_event_info p, size_t s, void *v, size_t *r), (e, p, s, v, r))       \
  X(cl_int, clGetEventProfilingInfo, (cl_event e, cl_profiling_info p, size_t s, void *v, size_t *r),           \
    (e, p, s, v, r))                                                                                            \
  X(cl_int, clRetainEvent, (cl_event e), (e))                                                                   \
  X(cl_int, clReleaseEvent, (cl_event e), (e))                                                                  \
  X(cl_int, clWaitForEvents, (cl_uint n, const cl_event *l), (n, l))                                            \
  X(cl_int, clSetEventCallback, (cl_event e, cl_int t, clcalls_notify f, void *u), (e, t, f, u))                \
  X(cl_event, clCreateUserEvent, (cl_context c, cl_int *r), (c, r))                                             \
  X(cl_int, clSetUserEventStatus, (cl_event e, cl_int s), (e, s))                                               \
  X(cl_int, clEnqueueSVMMemcpy,                                                                                 \
    (cl_command_queue q, cl_bool b, void *d, const void *s, size_t z, cl_uint n, const cl_event *w, cl_event *e), \
    (q, b, d, s, z, n, w, e))                                                                                   \
  X(cl_int, clEnqueueSVMMemFill,                                                                                \
    (cl_command_queue q, void *p, const void *t, size_t ts, size_t z, cl_uint n, const cl_event *w, cl_event *e), \
    (q, p, t, ts, z, n, w, e))                                                                                  \
  X(cl_int, clEnqueueCopyBuffer,                                                                                \
    (cl_command_queue q, cl_mem s, cl_mem d, size_t so, size_t dof, size_t z, cl_uint n, const cl_event *w,      \
     cl_event *e),                                                                                              \
    (q, s, d, so, dof, z, n, w, e))                                                                             \
  X(cl_int, clEnqueueWriteBuffer,                                                                               \
    (cl_command_queue q, cl_mem m, cl_bool b, size_t o, size_t z, const void *p, cl_uint n, const cl_event *w,   \
     cl_event *e),                                                                                              \
    (q, m, b, o, z, p, n, w, e))                                                                                \
  X(cl_int, clEnqueueReadBuffer,                                                                                \
    (cl_command_queue q, cl_mem m, cl_bool b, size_t o, size_t z, void *p, cl_uint n, const cl_event *w,         \
     cl_event *e),                                                                                              \
    (q, m, b, o, z, p, n, w, e))                                                                                \
  X(cl_int, clRetainMemObject, (cl_mem m), (m))                                                                 \
  X(cl_int, clReleaseMemObject, (cl_mem m), (m))                                                                \
  X(cl_mem, clCreateBuffer, (cl_context c, cl_mem_flags f, size_t z, void *p, cl_int *r), (c, f, z, p, r))      \
  X(cl_mem, clCreateSubBuffer, (cl_mem m, cl_mem_flags f, cl_buffer_create_type t, const void *i, cl_int *r),   \
    (m, f, t, i, r))                                                                                            \
  X(void *, clSVMAlloc, (cl_context c, cl_svm_mem_flags f, size_t z, cl_uint a), (c, f, z, a))

enum {
#define X(ret, name, params, args) CLCALLS_##name,
  CLCALLS_LIST(X)
#undef X
      CLCALLS_N
};
#endif

#endif
