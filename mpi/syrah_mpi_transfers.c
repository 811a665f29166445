/* The MPI companion's transfers as Syrah commands. A region's send copies
 * just its bytes, packed, out of the buffer and starts MPI's send as that
 * copy completes; a region's receive is posted at once and the progress
 * thread releases the copy of the message into the region. USM and host
 * memory go to MPI as they are, device USM staged through host memory. */
#define _POSIX_C_SOURCE 200809L
#include "mpi_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- buffer regions --------------------------------------------------- */

static int reads(syrah_access_mode m) {
  return m == SYRAH_ACCESS_READ || m == SYRAH_ACCESS_READ_WRITE;
}

static int writes(syrah_access_mode m) {
  return m == SYRAH_ACCESS_WRITE || m == SYRAH_ACCESS_READ_WRITE || m == SYRAH_ACCESS_DISCARD_WRITE ||
         m == SYRAH_ACCESS_DISCARD_READ_WRITE;
}

/* A new op for `region`: its bytes, packed. */
static syrah_status region_op(syrah_mpi_comm *comm, const syrah_accessor *region, int peer, int tag, op **out) {
  syrah_buffer_info info;
  uint32_t i;
  int whole = 1;
  syrah_status s;
  op *o;
  if (!region) return sm_fail(SYRAH_ERROR_NULL_ARGUMENT, "region is NULL");
  if (!region->buffer) return sm_fail(SYRAH_ERROR_NULL_ARGUMENT, "region->buffer is NULL");
  s = syrah_buffer_get_info(region->buffer, &info);
  if (s != SYRAH_SUCCESS) return s;
  for (i = 0; i < 3; ++i) whole &= region->range[i] == 0;
  o = (op *)calloc(1, sizeof *o);
  if (!o) return sm_fail(SYRAH_ERROR_OUT_OF_HOST_MEMORY, "no host memory for an MPI transfer");
  o->comm = comm;
  o->bytes = info.element_size;
  for (i = 0; i < info.dimensions; ++i) o->bytes *= whole ? info.range[i] : region->range[i];
  o->peer = peer;
  o->tag = tag;
  s = sm_check_size(o->bytes);
  if (s != SYRAH_SUCCESS) {
    free(o);
    return s;
  }
  *out = o;
  return SYRAH_SUCCESS;
}

/* Starts the send of `o` once its copy out of the buffer has completed and
 * the call that submitted it has returned, whichever comes second; a copy
 * that failed sends nothing (its command reports the failure). Frees `o`. */
static void send_copied(op *o, int from_copy) {
  syrah_event_status st = SYRAH_EVENT_FAILED;
  syrah_status s;
  int go;
  pthread_mutex_lock(&o->comm->lock);
  if (from_copy)
    o->copy_done = 1;
  else
    o->submitted = 1;
  go = o->copy_done && o->submitted;
  pthread_mutex_unlock(&o->comm->lock);
  if (!go) return;
  if (o->copied) syrah_event_get_status(o->copied, &st);
  if (st == SYRAH_EVENT_COMPLETE) {
    s = sm_start(o->comm, 0, o->staging, o->bytes, o->peer, o->tag, o->staging, NULL, NULL);
    if (s == SYRAH_SUCCESS) {
      o->staging = NULL; /* the progress thread frees it */
    } else {
      pthread_mutex_lock(&o->comm->lock);
      sm_record_error(o->comm, syrah_last_error_message());
      pthread_mutex_unlock(&o->comm->lock);
    }
  }
  pthread_mutex_lock(&o->comm->lock);
  --o->comm->unstarted;
  pthread_cond_broadcast(&o->comm->changed);
  pthread_mutex_unlock(&o->comm->lock);
  if (o->copied) syrah_event_release(o->copied);
  sm_staging_free(o->staging);
  free(o);
}

/* The copy's release: its data is packed in `o->staging`. */
static void send_release(void *packed, void *user) {
  (void)packed;
  send_copied((op *)user, 1);
}

syrah_status syrah_mpi_send(const syrah_queue *queue, syrah_mpi_comm *comm, const syrah_accessor *region, int dest,
                            int tag, const syrah_event *const *dependencies, size_t dependency_count,
                            syrah_event **out_event) {
  op *o = NULL;
  syrah_status s = sm_check_common(queue, comm, dest, tag, "destination");
  if (s != SYRAH_SUCCESS) return s;
  if (region && !reads(region->mode))
    return sm_fail(SYRAH_ERROR_INVALID_ARGUMENT,
                "a send reads its region: mode %u is not read (1) or read_write (3)", region->mode);
  s = region_op(comm, region, dest, tag, &o);
  if (s != SYRAH_SUCCESS) return s;
  o->staging = sm_staging_alloc(queue, o->bytes);
  if (!o->staging) {
    size_t bytes = o->bytes;
    free(o);
    return sm_fail(SYRAH_ERROR_OUT_OF_HOST_MEMORY, "no host memory to pack %zu bytes for MPI", bytes);
  }
  /* The region comes packed straight from wherever it is current (only its
   * bytes move); the send starts as soon as the copy completes.
   * syrah_mpi_comm_wait waits for it from now on. */
  pthread_mutex_lock(&comm->lock);
  ++comm->unstarted;
  pthread_mutex_unlock(&comm->lock);
  s = syrah_queue_copy_from_accessor(queue, region, o->staging, send_release, o, dependencies, dependency_count,
                                     &o->copied);
  if (s != SYRAH_SUCCESS) {
    pthread_mutex_lock(&comm->lock);
    --comm->unstarted;
    pthread_cond_broadcast(&comm->changed);
    pthread_mutex_unlock(&comm->lock);
    sm_staging_free(o->staging);
    free(o);
    return s;
  }
  if (out_event) {
    syrah_event_retain(o->copied);
    *out_event = o->copied;
  }
  send_copied(o, 0);
  return SYRAH_SUCCESS;
}

static void unref_op(void *packed, void *user) {
  (void)packed;
  sm_op_unref((op *)user);
}

syrah_status syrah_mpi_recv(const syrah_queue *queue, syrah_mpi_comm *comm, const syrah_accessor *region,
                            int source, int tag, const syrah_event *const *dependencies, size_t dependency_count,
                            syrah_event **out_event) {
  const syrah_event **deps;
  op *o = NULL;
  syrah_status s = sm_check_common(queue, comm, source, tag, "source");
  if (s != SYRAH_SUCCESS) return s;
  if (region && !writes(region->mode))
    return sm_fail(SYRAH_ERROR_INVALID_ARGUMENT, "a receive writes its region: mode %u is not a writing mode", region->mode);
  if (dependency_count && !dependencies)
    return sm_fail(SYRAH_ERROR_NULL_ARGUMENT, "dependencies is NULL but its count is %zu", dependency_count);
  s = region_op(comm, region, source, tag, &o);
  if (s != SYRAH_SUCCESS) return s;
  deps = sm_deps_plus(dependencies, dependency_count, NULL);
  if (!deps) {
    free(o);
    return sm_fail(SYRAH_ERROR_OUT_OF_HOST_MEMORY, "no host memory for a receive");
  }
  o->fail_arrived = 1;
  s = sm_post_staged_recv(queue, o);
  if (s != SYRAH_SUCCESS) {
    free(deps);
    sm_drop_unposted(o);
    return s;
  }
  deps[dependency_count] = o->arrived;
  /* The packed message goes straight into the region wherever the next
   * reader needs it: only its bytes move. */
  s = syrah_queue_copy_to_accessor(queue, o->staging, region, unref_op, o, deps, dependency_count + 1, out_event);
  free(deps);
  /* Posted already: the progress thread finishes it whatever happens here. */
  if (s != SYRAH_SUCCESS) sm_op_unref(o);
  return s;
}

/* ---- USM and host memory ---------------------------------------------- */

/* Whether `pointer` is device USM of the queue's context (which the host
 * cannot touch); anything else the host can read and write. */
static syrah_status is_device_usm(const syrah_queue *queue, const void *pointer, int *out) {
  syrah_context *ctx = NULL;
  syrah_usm_alloc kind = SYRAH_USM_ALLOC_UNKNOWN;
  syrah_status s = syrah_queue_get_context(queue, &ctx);
  if (s != SYRAH_SUCCESS) return s;
  s = syrah_get_pointer_type(ctx, pointer, &kind);
  syrah_context_release(ctx);
  *out = kind == SYRAH_USM_ALLOC_DEVICE;
  return s;
}

/* A host task that starts one transfer described by its `usm_task`. */
typedef struct {
  syrah_mpi_comm *comm;
  int recv;
  void *data;
  size_t bytes;
  int peer, tag;
  void *owned;
  syrah_event *done;
  op *op;
} usm_task;

static syrah_status usm_run(const syrah_host_task_context *ctx, void *user) {
  usm_task *u = (usm_task *)user;
  syrah_status s;
  (void)ctx;
  if (u->op) { /* a device receive's last step: report its outcome */
    int failed;
    char msg[MSG];
    pthread_mutex_lock(&u->comm->lock);
    failed = u->op->failed;
    memcpy(msg, u->op->msg, sizeof msg);
    pthread_mutex_unlock(&u->comm->lock);
    if (failed) {
      syrah_set_error_message(msg);
      return SYRAH_ERROR_COMMUNICATION;
    }
    return SYRAH_SUCCESS;
  }
  s = sm_start(u->comm, u->recv, u->data, u->bytes, u->peer, u->tag, u->owned, NULL, u->done);
  if (s == SYRAH_SUCCESS) {
    u->owned = NULL; /* the progress thread frees it, and completes `done` */
    u->done = NULL;
  }
  return s;
}

static void usm_release(void *user) {
  usm_task *u = (usm_task *)user;
  if (u->done) { /* never started: nobody else completes it */
    syrah_user_event_complete(u->done, true);
    syrah_event_release(u->done);
  }
  if (u->op) sm_op_unref(u->op);
  sm_staging_free(u->owned);
  free(u);
}

/* Submits `u` as a host task after `deps`. */
static syrah_status submit_usm(const syrah_queue *queue, usm_task *u, const syrah_event *const *deps, size_t n,
                               syrah_event **out_event) {
  syrah_host_task t;
  syrah_status s;
  t.run = usm_run;
  t.user_data = u;
  t.release = usm_release;
  s = syrah_queue_submit_host_tasks(queue, NULL, 0, &t, 1, deps, n, out_event);
  if (s != SYRAH_SUCCESS) usm_release(u);
  return s;
}

/* Host memory: the task starts the transfer on `pointer` itself, and the
 * returned event is a user event completed with it. */
static syrah_status usm_direct(const syrah_queue *queue, syrah_mpi_comm *comm, int recv, void *pointer, size_t size,
                               int peer, int tag, const syrah_event *const *deps, size_t n, syrah_event **out_event) {
  usm_task *u = (usm_task *)calloc(1, sizeof *u);
  syrah_event *done = NULL;
  syrah_status s;
  if (!u) return sm_fail(SYRAH_ERROR_OUT_OF_HOST_MEMORY, "no host memory for an MPI transfer");
  s = sm_user_event(queue, &done);
  if (s != SYRAH_SUCCESS) {
    free(u);
    return s;
  }
  u->comm = comm;
  u->recv = recv;
  u->data = pointer;
  u->bytes = size;
  u->peer = peer;
  u->tag = tag;
  u->done = done;
  syrah_event_retain(done); /* one for the transfer, one for the caller */
  s = submit_usm(queue, u, deps, n, NULL);
  if (s != SYRAH_SUCCESS || !out_event)
    syrah_event_release(done);
  else
    *out_event = done;
  return s;
}

syrah_status syrah_mpi_send_usm(const syrah_queue *queue, syrah_mpi_comm *comm, const void *pointer, size_t size,
                                int dest, int tag, const syrah_event *const *dependencies, size_t dependency_count,
                                syrah_event **out_event) {
  int device = 0;
  usm_task *u;
  syrah_event *copied = NULL;
  syrah_status s = sm_check_common(queue, comm, dest, tag, "destination");
  if (s != SYRAH_SUCCESS) return s;
  if (!pointer) return sm_fail(SYRAH_ERROR_NULL_ARGUMENT, "pointer is NULL");
  if ((s = sm_check_size(size)) != SYRAH_SUCCESS || (s = is_device_usm(queue, pointer, &device)) != SYRAH_SUCCESS)
    return s;
  if (!device)
    return usm_direct(queue, comm, 0, (void *)pointer, size, dest, tag, dependencies, dependency_count, out_event);
  /* Device memory: a copy to host memory first, then the send from there. */
  u = (usm_task *)calloc(1, sizeof *u);
  if (!u || !(u->owned = sm_staging_alloc(queue, size))) {
    free(u);
    return sm_fail(SYRAH_ERROR_OUT_OF_HOST_MEMORY, "no host memory to stage %zu bytes for MPI", size);
  }
  s = syrah_queue_memcpy(queue, u->owned, pointer, size, dependencies, dependency_count, &copied);
  if (s != SYRAH_SUCCESS) {
    sm_staging_free(u->owned);
    free(u);
    return s;
  }
  u->comm = comm;
  u->data = u->owned;
  u->bytes = size;
  u->peer = dest;
  u->tag = tag;
  s = submit_usm(queue, u, (const syrah_event *const *)&copied, 1, out_event);
  syrah_event_release(copied);
  return s;
}

syrah_status syrah_mpi_recv_usm(const syrah_queue *queue, syrah_mpi_comm *comm, void *pointer, size_t size,
                                int source, int tag, const syrah_event *const *dependencies, size_t dependency_count,
                                syrah_event **out_event) {
  int device = 0;
  op *o;
  usm_task *u;
  const syrah_event **deps;
  syrah_event *copied = NULL;
  syrah_status s = sm_check_common(queue, comm, source, tag, "source");
  if (s != SYRAH_SUCCESS) return s;
  if (!pointer) return sm_fail(SYRAH_ERROR_NULL_ARGUMENT, "pointer is NULL");
  if (dependency_count && !dependencies)
    return sm_fail(SYRAH_ERROR_NULL_ARGUMENT, "dependencies is NULL but its count is %zu", dependency_count);
  if ((s = sm_check_size(size)) != SYRAH_SUCCESS || (s = is_device_usm(queue, pointer, &device)) != SYRAH_SUCCESS)
    return s;
  if (!device)
    return usm_direct(queue, comm, 1, pointer, size, source, tag, dependencies, dependency_count, out_event);
  /* Device memory: received into host memory, then copied to the device;
   * a last host task reports the receive's outcome and frees the memory. */
  o = (op *)calloc(1, sizeof *o);
  u = (usm_task *)calloc(1, sizeof *u);
  deps = sm_deps_plus(dependencies, dependency_count, NULL);
  if (!o || !u || !deps) {
    free(o);
    free(u);
    free((void *)deps);
    return sm_fail(SYRAH_ERROR_OUT_OF_HOST_MEMORY, "no host memory for a receive of %zu bytes", size);
  }
  o->comm = comm;
  o->bytes = size;
  o->peer = source;
  o->tag = tag;
  s = sm_post_staged_recv(queue, o);
  if (s != SYRAH_SUCCESS) {
    free(u);
    free((void *)deps);
    sm_drop_unposted(o);
    return s;
  }
  deps[dependency_count] = o->arrived;
  s = syrah_queue_memcpy(queue, pointer, o->staging, size, deps, dependency_count + 1, &copied);
  free((void *)deps);
  if (s != SYRAH_SUCCESS) {
    sm_op_unref(o);
    return s;
  }
  u->comm = comm;
  u->op = o; /* the task's reference to `o` */
  s = submit_usm(queue, u, (const syrah_event *const *)&copied, 1, out_event);
  syrah_event_release(copied);
  return s;
}
