/* Syrah's MPI companion: transfers of buffer regions and USM memory as
 * Syrah commands. A region's send copies just its bytes, packed, out of
 * the buffer and starts MPI's send as that copy completes; a receive is
 * posted at once (or after its dependencies, for USM) and a progress
 * thread completes it, releasing the copy into the region or the user
 * event that stands for it. No runtime thread ever waits for a peer. */
#define _POSIX_C_SOURCE 200809L
#include "syrah_mpi.h"

#include <limits.h>
#include <stdarg.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

/* Room for one message. */
#define MSG 700

/* A transfer that MPI has started and the progress thread completes. */
typedef struct pending pending;

/* A transfer's geometry and, for receives, what the progress thread tells
 * the command that finishes it. */
typedef struct op {
  syrah_mpi_comm *comm;
  size_t ext[3];   /* slices, rows, row length in elements */
  size_t elem, bytes;
  int peer, tag;
  void *staging;         /* packed data */
  syrah_event *arrived;  /* completed when the receive completed in MPI */
  int fail_arrived;      /* a failed receive fails `arrived` with its message */
  int failed;
  char msg[MSG];
  int refs; /* receives: the progress thread and the command each hold one */
  /* Sends: the copy out of the buffer, and which of its completion and the
   * submitting call's return has come (the second starts the send). */
  syrah_event *copied;
  int copy_done, submitted;
} op;

struct pending {
  MPI_Request req;
  int recv;
  int matched;             /* a receive: its message was found and posted */
  void *data;              /* a receive's destination */
  int peer, tag;
  size_t bytes;
  void *owned;             /* freed when the transfer completes */
  op *op;                  /* a receive's op, told of the outcome */
  syrah_event *done;       /* a user event completed with the transfer */
  pending *next;
};

struct syrah_mpi_comm {
  MPI_Comm comm;
  int rank, size;
  pthread_mutex_t lock;
  pthread_cond_t changed;
  pending *list, **tail; /* in the order the transfers were started */
  int stopping;
  pthread_t thread;
  uint64_t sent, received;
  int has_error;
  char error[MSG];
};

/* Sets the message of a failed call and returns `status`. */
__attribute__((format(printf, 2, 3))) static syrah_status fail(syrah_status status, const char *fmt, ...) {
  char msg[800];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  syrah_set_error_message(msg);
  return status;
}

/* "MPI_X failed: <MPI's text>" into `out`. */
static void mpi_message(char *out, size_t cap, const char *call, int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "error code %d", rc);
  snprintf(out, cap, "%s failed: %s", call, text);
}

static syrah_status mpi_fail(const char *call, int rc) {
  char msg[MSG];
  mpi_message(msg, sizeof msg, call, rc);
  syrah_set_error_message(msg);
  return SYRAH_ERROR_COMMUNICATION;
}

static void op_unref(op *o) {
  int last;
  pthread_mutex_lock(&o->comm->lock);
  last = --o->refs == 0;
  pthread_mutex_unlock(&o->comm->lock);
  if (last) {
    if (o->arrived) syrah_event_release(o->arrived);
    free(o->staging);
    free(o);
  }
}

/* ---- the progress thread ---------------------------------------------- */

static void record_error(syrah_mpi_comm *c, const char *msg) {
  if (!c->has_error) {
    c->has_error = 1;
    snprintf(c->error, sizeof c->error, "%s", msg);
  }
}

static void complete(syrah_mpi_comm *c, pending *p, const char *msg);

/* Completes one transfer: `rc` is MPI's outcome. */
static void finish(syrah_mpi_comm *c, pending *p, int rc, MPI_Status *st) {
  char msg[MSG] = "";
  (void)st;
  if (rc != MPI_SUCCESS) mpi_message(msg, sizeof msg, p->recv ? "MPI_Irecv" : "MPI_Isend", rc);
  complete(c, p, msg);
}

/* Completes one transfer that failed with `msg`. */
static void fail_pending(syrah_mpi_comm *c, pending *p, const char *msg) {
  complete(c, p, msg);
}

/* Completes one transfer: `msg` is empty on success. */
static void complete(syrah_mpi_comm *c, pending *p, const char *msg) {
  pending **at;
  pthread_mutex_lock(&c->lock);
  for (at = &c->list; *at && *at != p; at = &(*at)->next) {
  }
  if (*at) {
    *at = p->next;
    if (c->tail == &p->next) c->tail = at;
  }
  if (!msg[0]) {
    if (p->recv)
      c->received += p->bytes;
    else
      c->sent += p->bytes;
  } else if (!p->op) {
    record_error(c, msg);
  }
  if (p->op && msg[0]) {
    p->op->failed = 1;
    snprintf(p->op->msg, sizeof p->op->msg, "%s", msg);
  }
  pthread_cond_broadcast(&c->changed);
  pthread_mutex_unlock(&c->lock);
  if (p->op) {
    if (msg[0] && p->op->fail_arrived) {
      /* What the region receives in place of the message. */
      memset(p->op->staging, 0, p->op->bytes);
      syrah_user_event_fail(p->op->arrived, msg);
    } else {
      syrah_user_event_complete(p->op->arrived, false);
    }
    op_unref(p->op);
  }
  if (p->done) {
    syrah_user_event_complete(p->done, msg[0] != '\0');
    syrah_event_release(p->done);
  }
  free(p->owned);
  free(p);
}

/* Looks for the message a receive waits for, with a matched probe: one of
 * the expected size is received into place; another size is taken off
 * MPI's queue and reported, so that MPI never truncates (MPICH would
 * abort the process on a truncated receive whatever the communicator's
 * error handler). Returns whether the message was there. */
static int match(syrah_mpi_comm *c, pending *p) {
  MPI_Message m;
  MPI_Status st;
  int flag = 0, count = 0, rc = MPI_Improbe(p->peer, p->tag, c->comm, &flag, &m, &st);
  if (rc != MPI_SUCCESS) {
    finish(c, p, rc, &st);
    return 1;
  }
  if (!flag) return 0;
  MPI_Get_count(&st, MPI_BYTE, &count);
  if ((size_t)count == p->bytes) {
    rc = MPI_Imrecv(p->data, count, MPI_BYTE, &m, &p->req);
    if (rc != MPI_SUCCESS) {
      finish(c, p, rc, &st);
      return 1;
    }
    pthread_mutex_lock(&c->lock);
    p->matched = 1;
    pthread_mutex_unlock(&c->lock);
    return 1;
  }
  {
    char *drop = (char *)malloc(count > 0 ? (size_t)count : 1);
    char msg[MSG];
    rc = MPI_Mrecv(drop, count, MPI_BYTE, &m, &st);
    free(drop);
    snprintf(msg, sizeof msg, "MPI_Irecv from rank %d tag %d: the message holds %d bytes, the receive %zu", p->peer,
             p->tag, count, p->bytes);
    fail_pending(c, p, msg);
  }
  return 1;
}

/* Microseconds on a monotonic clock. */
static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* After a transfer completes, the progress thread keeps looking (giving
 * its core to others between looks) this long before it sleeps between
 * looks: the next message of a halo exchange is usually that close. */
#define SPIN_US 300.0

static void *progress(void *arg) {
  syrah_mpi_comm *c = (syrah_mpi_comm *)arg;
  double busy = now_us();
#ifdef __linux__
  /* Sleeps overrun by the timer slack, 50 µs by default. */
  prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
#endif
  for (;;) {
    pending *batch[64];
    int n = 0, i, done = 0;
    pending *p;
    pthread_mutex_lock(&c->lock);
    while (!c->list && !c->stopping) pthread_cond_wait(&c->changed, &c->lock);
    if (!c->list && c->stopping) {
      pthread_mutex_unlock(&c->lock);
      return NULL;
    }
    for (p = c->list; p && n < 64; p = p->next) batch[n++] = p;
    pthread_mutex_unlock(&c->lock);
    for (i = 0; i < n; ++i) {
      MPI_Request r = batch[i]->req;
      MPI_Status st;
      int flag = 0, rc;
      if (batch[i]->recv && !batch[i]->matched) {
        /* Receives are matched in the order they were started. */
        int k, earlier = 0;
        for (k = 0; k < i; ++k)
          earlier |= batch[k]->recv && !batch[k]->matched && batch[k]->peer == batch[i]->peer &&
                     batch[k]->tag == batch[i]->tag;
        if (!earlier && match(c, batch[i])) ++done;
        continue;
      }
      rc = MPI_Test(&r, &flag, &st);
      if (rc != MPI_SUCCESS || flag) {
        finish(c, batch[i], rc, &st);
        ++done;
      }
    }
    if (done) {
      busy = now_us();
    } else if (now_us() - busy < SPIN_US) {
      sched_yield();
    } else {
      struct timespec ts = {0, 20000};
      nanosleep(&ts, NULL);
    }
  }
}

static void add_pending(syrah_mpi_comm *c, pending *p) {
  pthread_mutex_lock(&c->lock);
  p->next = NULL;
  *c->tail = p;
  c->tail = &p->next;
  pthread_cond_broadcast(&c->changed);
  pthread_mutex_unlock(&c->lock);
}

/* Starts a transfer of `bytes` at `data` and hands it to the progress
 * thread; `owned` is freed once it completes. */
static syrah_status start(syrah_mpi_comm *c, int recv, void *data, size_t bytes, int peer, int tag, void *owned,
                          op *o, syrah_event *done) {
  pending *p = (pending *)calloc(1, sizeof *p);
  int rc;
  if (!p) return fail(SYRAH_ERROR_OUT_OF_HOST_MEMORY, "no host memory for an MPI transfer");
  /* A receive is posted once its message is found (see `match`). */
  rc = recv ? MPI_SUCCESS : MPI_Isend(data, (int)bytes, MPI_BYTE, peer, tag, c->comm, &p->req);
  if (rc != MPI_SUCCESS) {
    free(p);
    return mpi_fail("MPI_Isend", rc);
  }
  p->data = data;
  p->peer = peer;
  p->tag = tag;
  p->recv = recv;
  p->bytes = bytes;
  p->owned = owned;
  p->op = o;
  p->done = done;
  add_pending(c, p);
  return SYRAH_SUCCESS;
}

/* ---- communicators ---------------------------------------------------- */

syrah_status syrah_mpi_comm_create(MPI_Comm comm, syrah_mpi_comm **out_comm) {
  int level = 0, rc;
  syrah_mpi_comm *c;
  if (!out_comm) return fail(SYRAH_ERROR_NULL_ARGUMENT, "out_comm is NULL");
  if (comm == MPI_COMM_NULL) return fail(SYRAH_ERROR_INVALID_ARGUMENT, "comm is MPI_COMM_NULL");
  rc = MPI_Query_thread(&level);
  if (rc != MPI_SUCCESS) return mpi_fail("MPI_Query_thread", rc);
  if (level != MPI_THREAD_MULTIPLE)
    return fail(SYRAH_ERROR_COMMUNICATION,
                "MPI runs with thread level %ld; Syrah's transfers run on runtime threads and need "
                "MPI_THREAD_MULTIPLE (%ld): initialise MPI with MPI_Init_thread",
                (long)level, (long)MPI_THREAD_MULTIPLE);
  c = (syrah_mpi_comm *)calloc(1, sizeof *c);
  if (!c) return fail(SYRAH_ERROR_OUT_OF_HOST_MEMORY, "no host memory for an MPI communicator");
  rc = MPI_Comm_dup(comm, &c->comm);
  if (rc != MPI_SUCCESS) {
    free(c);
    return mpi_fail("MPI_Comm_dup", rc);
  }
  MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(c->comm, &c->rank);
  MPI_Comm_size(c->comm, &c->size);
  c->tail = &c->list;
  pthread_mutex_init(&c->lock, NULL);
  pthread_cond_init(&c->changed, NULL);
  if (pthread_create(&c->thread, NULL, progress, c) != 0) {
    MPI_Comm_free(&c->comm);
    free(c);
    return fail(SYRAH_ERROR_OUT_OF_HOST_MEMORY, "could not start the MPI progress thread");
  }
  *out_comm = c;
  return SYRAH_SUCCESS;
}

syrah_status syrah_mpi_comm_wait(syrah_mpi_comm *comm) {
  char msg[MSG] = "";
  if (!comm) return fail(SYRAH_ERROR_NULL_ARGUMENT, "comm is NULL");
  pthread_mutex_lock(&comm->lock);
  while (comm->list) pthread_cond_wait(&comm->changed, &comm->lock);
  if (comm->has_error) {
    snprintf(msg, sizeof msg, "%s", comm->error);
    comm->has_error = 0;
  }
  pthread_mutex_unlock(&comm->lock);
  if (msg[0]) {
    syrah_set_error_message(msg);
    return SYRAH_ERROR_COMMUNICATION;
  }
  return SYRAH_SUCCESS;
}

syrah_status syrah_mpi_comm_release(syrah_mpi_comm *comm) {
  syrah_status s;
  if (!comm) return fail(SYRAH_ERROR_NULL_ARGUMENT, "comm is NULL");
  s = syrah_mpi_comm_wait(comm);
  pthread_mutex_lock(&comm->lock);
  comm->stopping = 1;
  pthread_cond_broadcast(&comm->changed);
  pthread_mutex_unlock(&comm->lock);
  pthread_join(comm->thread, NULL);
  MPI_Comm_free(&comm->comm);
  pthread_mutex_destroy(&comm->lock);
  pthread_cond_destroy(&comm->changed);
  free(comm);
  return s;
}

syrah_status syrah_mpi_comm_get_rank(const syrah_mpi_comm *comm, int *out_rank, int *out_size) {
  if (!comm) return fail(SYRAH_ERROR_NULL_ARGUMENT, "comm is NULL");
  if (!out_rank || !out_size) return fail(SYRAH_ERROR_NULL_ARGUMENT, "out_rank or out_size is NULL");
  *out_rank = comm->rank;
  *out_size = comm->size;
  return SYRAH_SUCCESS;
}

syrah_status syrah_mpi_comm_get_stats(const syrah_mpi_comm *comm, uint64_t *out_bytes_sent,
                                      uint64_t *out_bytes_received) {
  syrah_mpi_comm *c = (syrah_mpi_comm *)comm;
  if (!comm) return fail(SYRAH_ERROR_NULL_ARGUMENT, "comm is NULL");
  if (!out_bytes_sent || !out_bytes_received)
    return fail(SYRAH_ERROR_NULL_ARGUMENT, "out_bytes_sent or out_bytes_received is NULL");
  pthread_mutex_lock(&c->lock);
  *out_bytes_sent = c->sent;
  *out_bytes_received = c->received;
  pthread_mutex_unlock(&c->lock);
  return SYRAH_SUCCESS;
}

/* ---- checks shared by every transfer ---------------------------------- */

static syrah_status check_common(const syrah_queue *queue, const syrah_mpi_comm *comm, int peer, int tag,
                                 const char *who) {
  int flag = 0, *ub = NULL;
  if (!queue) return fail(SYRAH_ERROR_NULL_ARGUMENT, "queue is NULL");
  if (!comm) return fail(SYRAH_ERROR_NULL_ARGUMENT, "comm is NULL");
  if (peer < 0 || peer >= comm->size)
    return fail(SYRAH_ERROR_INVALID_ARGUMENT, "%s rank %d is not a rank of the communicator (0 to %d)", who, peer,
                comm->size - 1);
  MPI_Comm_get_attr(comm->comm, MPI_TAG_UB, &ub, &flag);
  if (tag < 0 || (flag && ub && tag > *ub))
    return fail(SYRAH_ERROR_INVALID_ARGUMENT, "tag %ld is outside 0 to %ld", (long)tag,
                flag && ub ? (long)*ub : 32767L);
  return SYRAH_SUCCESS;
}

static syrah_status check_size(size_t bytes) {
  if (bytes == 0) return fail(SYRAH_ERROR_INVALID_ARGUMENT, "a transfer of 0 bytes");
  if (bytes > (size_t)INT_MAX)
    return fail(SYRAH_ERROR_INVALID_ARGUMENT, "a transfer of %zu bytes is over MPI's count limit of %d", bytes, INT_MAX);
  return SYRAH_SUCCESS;
}

/* The dependencies plus one more event. */
static const syrah_event **deps_plus(const syrah_event *const *deps, size_t n, const syrah_event *extra) {
  const syrah_event **all = (const syrah_event **)malloc((n + 1) * sizeof *all);
  size_t i;
  if (!all) return NULL;
  for (i = 0; i < n; ++i) all[i] = deps[i];
  all[n] = extra;
  return all;
}

/* ---- buffer regions --------------------------------------------------- */

static int reads(syrah_access_mode m) {
  return m == SYRAH_ACCESS_READ || m == SYRAH_ACCESS_READ_WRITE;
}

static int writes(syrah_access_mode m) {
  return m == SYRAH_ACCESS_WRITE || m == SYRAH_ACCESS_READ_WRITE || m == SYRAH_ACCESS_DISCARD_WRITE ||
         m == SYRAH_ACCESS_DISCARD_READ_WRITE;
}

/* A new op for `region`: its geometry in slices, rows and row elements. */
static syrah_status region_op(syrah_mpi_comm *comm, const syrah_accessor *region, int peer, int tag, op **out) {
  syrah_buffer_info info;
  size_t r[3];
  int i, whole = 1;
  syrah_status s;
  op *o;
  if (!region) return fail(SYRAH_ERROR_NULL_ARGUMENT, "region is NULL");
  if (!region->buffer) return fail(SYRAH_ERROR_NULL_ARGUMENT, "region->buffer is NULL");
  s = syrah_buffer_get_info(region->buffer, &info);
  if (s != SYRAH_SUCCESS) return s;
  for (i = 0; i < 3; ++i) whole &= region->range[i] == 0;
  for (i = 0; i < 3; ++i) r[i] = whole ? info.range[i] : region->range[i];
  o = (op *)calloc(1, sizeof *o);
  if (!o) return fail(SYRAH_ERROR_OUT_OF_HOST_MEMORY, "no host memory for an MPI transfer");
  o->comm = comm;
  o->elem = info.element_size;
  o->ext[0] = info.dimensions == 3 ? r[0] : 1;
  o->ext[1] = info.dimensions == 3 ? r[1] : info.dimensions == 2 ? r[0] : 1;
  o->ext[2] = r[info.dimensions - 1];
  o->bytes = o->ext[0] * o->ext[1] * o->ext[2] * o->elem;
  o->peer = peer;
  o->tag = tag;
  s = check_size(o->bytes);
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
    s = start(o->comm, 0, o->staging, o->bytes, o->peer, o->tag, o->staging, NULL, NULL);
    if (s == SYRAH_SUCCESS) {
      o->staging = NULL; /* the progress thread frees it */
    } else {
      pthread_mutex_lock(&o->comm->lock);
      record_error(o->comm, syrah_last_error_message());
      pthread_mutex_unlock(&o->comm->lock);
    }
  }
  if (o->copied) syrah_event_release(o->copied);
  free(o->staging);
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
  syrah_status s = check_common(queue, comm, dest, tag, "destination");
  if (s != SYRAH_SUCCESS) return s;
  if (region && !reads(region->mode))
    return fail(SYRAH_ERROR_INVALID_ARGUMENT,
                "a send reads its region: mode %u is not read (1) or read_write (3)", region->mode);
  s = region_op(comm, region, dest, tag, &o);
  if (s != SYRAH_SUCCESS) return s;
  o->staging = malloc(o->bytes);
  if (!o->staging) {
    size_t bytes = o->bytes;
    free(o);
    return fail(SYRAH_ERROR_OUT_OF_HOST_MEMORY, "no host memory to pack %zu bytes for MPI", bytes);
  }
  /* The region comes packed straight from wherever it is current (only its
   * bytes move); the send starts as soon as the copy completes. */
  s = syrah_queue_copy_from_accessor(queue, region, o->staging, send_release, o, dependencies, dependency_count,
                                     &o->copied);
  if (s != SYRAH_SUCCESS) {
    free(o->staging);
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
  op_unref((op *)user);
}

/* A user event of the queue's context. */
static syrah_status user_event(const syrah_queue *queue, syrah_event **out) {
  syrah_context *ctx = NULL;
  syrah_status s = syrah_queue_get_context(queue, &ctx);
  if (s != SYRAH_SUCCESS) return s;
  s = syrah_user_event_create(ctx, out);
  syrah_context_release(ctx);
  return s;
}

/* Posts the receive of `o` into its staging memory; `o->arrived`
 * completes when it has arrived. The progress thread holds one reference
 * to `o`. */
static syrah_status post_staged_recv(const syrah_queue *queue, op *o) {
  syrah_status s = user_event(queue, &o->arrived);
  if (s != SYRAH_SUCCESS) return s;
  o->staging = malloc(o->bytes);
  if (!o->staging)
    return fail(SYRAH_ERROR_OUT_OF_HOST_MEMORY, "no host memory to receive %zu bytes", o->bytes);
  o->refs = 2;
  s = start(o->comm, 1, o->staging, o->bytes, o->peer, o->tag, NULL, o, NULL);
  if (s != SYRAH_SUCCESS) o->refs = 0;
  return s;
}

static void drop_unposted(op *o) {
  if (o->arrived) {
    syrah_user_event_complete(o->arrived, true);
    syrah_event_release(o->arrived);
  }
  free(o->staging);
  free(o);
}

syrah_status syrah_mpi_recv(const syrah_queue *queue, syrah_mpi_comm *comm, const syrah_accessor *region,
                            int source, int tag, const syrah_event *const *dependencies, size_t dependency_count,
                            syrah_event **out_event) {
  const syrah_event **deps;
  op *o = NULL;
  syrah_status s = check_common(queue, comm, source, tag, "source");
  if (s != SYRAH_SUCCESS) return s;
  if (region && !writes(region->mode))
    return fail(SYRAH_ERROR_INVALID_ARGUMENT, "a receive writes its region: mode %u is not a writing mode", region->mode);
  if (dependency_count && !dependencies)
    return fail(SYRAH_ERROR_NULL_ARGUMENT, "dependencies is NULL but its count is %zu", dependency_count);
  s = region_op(comm, region, source, tag, &o);
  if (s != SYRAH_SUCCESS) return s;
  deps = deps_plus(dependencies, dependency_count, NULL);
  if (!deps) {
    free(o);
    return fail(SYRAH_ERROR_OUT_OF_HOST_MEMORY, "no host memory for a receive");
  }
  o->fail_arrived = 1;
  s = post_staged_recv(queue, o);
  if (s != SYRAH_SUCCESS) {
    free(deps);
    drop_unposted(o);
    return s;
  }
  deps[dependency_count] = o->arrived;
  /* The packed message goes straight into the region wherever the next
   * reader needs it: only its bytes move. */
  s = syrah_queue_copy_to_accessor(queue, o->staging, region, unref_op, o, deps, dependency_count + 1, out_event);
  free(deps);
  /* Posted already: the progress thread finishes it whatever happens here. */
  if (s != SYRAH_SUCCESS) op_unref(o);
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
  s = start(u->comm, u->recv, u->data, u->bytes, u->peer, u->tag, u->owned, NULL, u->done);
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
  if (u->op) op_unref(u->op);
  free(u->owned);
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
  if (!u) return fail(SYRAH_ERROR_OUT_OF_HOST_MEMORY, "no host memory for an MPI transfer");
  s = user_event(queue, &done);
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
  syrah_status s = check_common(queue, comm, dest, tag, "destination");
  if (s != SYRAH_SUCCESS) return s;
  if (!pointer) return fail(SYRAH_ERROR_NULL_ARGUMENT, "pointer is NULL");
  if ((s = check_size(size)) != SYRAH_SUCCESS || (s = is_device_usm(queue, pointer, &device)) != SYRAH_SUCCESS)
    return s;
  if (!device)
    return usm_direct(queue, comm, 0, (void *)pointer, size, dest, tag, dependencies, dependency_count, out_event);
  /* Device memory: a copy to host memory first, then the send from there. */
  u = (usm_task *)calloc(1, sizeof *u);
  if (!u || !(u->owned = malloc(size))) {
    free(u);
    return fail(SYRAH_ERROR_OUT_OF_HOST_MEMORY, "no host memory to stage %zu bytes for MPI", size);
  }
  s = syrah_queue_memcpy(queue, u->owned, pointer, size, dependencies, dependency_count, &copied);
  if (s != SYRAH_SUCCESS) {
    free(u->owned);
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
  syrah_status s = check_common(queue, comm, source, tag, "source");
  if (s != SYRAH_SUCCESS) return s;
  if (!pointer) return fail(SYRAH_ERROR_NULL_ARGUMENT, "pointer is NULL");
  if (dependency_count && !dependencies)
    return fail(SYRAH_ERROR_NULL_ARGUMENT, "dependencies is NULL but its count is %zu", dependency_count);
  if ((s = check_size(size)) != SYRAH_SUCCESS || (s = is_device_usm(queue, pointer, &device)) != SYRAH_SUCCESS)
    return s;
  if (!device)
    return usm_direct(queue, comm, 1, pointer, size, source, tag, dependencies, dependency_count, out_event);
  /* Device memory: received into host memory, then copied to the device;
   * a last host task reports the receive's outcome and frees the memory. */
  o = (op *)calloc(1, sizeof *o);
  u = (usm_task *)calloc(1, sizeof *u);
  deps = deps_plus(dependencies, dependency_count, NULL);
  if (!o || !u || !deps) {
    free(o);
    free(u);
    free((void *)deps);
    return fail(SYRAH_ERROR_OUT_OF_HOST_MEMORY, "no host memory for a receive of %zu bytes", size);
  }
  o->comm = comm;
  o->bytes = size;
  o->peer = source;
  o->tag = tag;
  s = post_staged_recv(queue, o);
  if (s != SYRAH_SUCCESS) {
    free(u);
    free((void *)deps);
    drop_unposted(o);
    return s;
  }
  deps[dependency_count] = o->arrived;
  s = syrah_queue_memcpy(queue, pointer, o->staging, size, deps, dependency_count + 1, &copied);
  free((void *)deps);
  if (s != SYRAH_SUCCESS) {
    op_unref(o);
    return s;
  }
  u->comm = comm;
  u->op = o; /* the task's reference to `o` */
  s = submit_usm(queue, u, (const syrah_event *const *)&copied, 1, out_event);
  syrah_event_release(copied);
  return s;
}
