/* Syrah's MPI companion: communicators, the progress thread that completes
 * transfers, and what every transfer shares (checks, starting a transfer,
 * receives staged in host memory). The transfers themselves are in
 * syrah_mpi_transfers.c. No runtime thread ever waits for a peer. */
#define _POSIX_C_SOURCE 200809L
#include "mpi_internal.h"

#include <limits.h>
#include <stdarg.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

/* Sets the message of a failed call and returns `status`. */
syrah_status sm_fail(syrah_status status, const char *fmt, ...) {
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

void sm_op_unref(op *o) {
  int last;
  pthread_mutex_lock(&o->comm->lock);
  last = --o->refs == 0;
  pthread_mutex_unlock(&o->comm->lock);
  if (last) {
    if (o->arrived) syrah_event_release(o->arrived);
    sm_staging_free(o->staging);
    free(o);
  }
}

/* ---- the progress thread ---------------------------------------------- */

void sm_record_error(syrah_mpi_comm *c, const char *msg) {
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
    sm_record_error(c, msg);
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
    sm_op_unref(p->op);
  }
  if (p->done) {
    syrah_user_event_complete(p->done, msg[0] != '\0');
    syrah_event_release(p->done);
  }
  sm_staging_free(p->owned);
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
syrah_status sm_start(syrah_mpi_comm *c, int recv, void *data, size_t bytes, int peer, int tag, void *owned,
                          op *o, syrah_event *done) {
  pending *p = (pending *)calloc(1, sizeof *p);
  int rc;
  if (!p) return sm_fail(SYRAH_ERROR_OUT_OF_HOST_MEMORY, "no host memory for an MPI transfer");
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
  if (!out_comm) return sm_fail(SYRAH_ERROR_NULL_ARGUMENT, "out_comm is NULL");
  if (comm == MPI_COMM_NULL) return sm_fail(SYRAH_ERROR_INVALID_ARGUMENT, "comm is MPI_COMM_NULL");
  rc = MPI_Query_thread(&level);
  if (rc != MPI_SUCCESS) return mpi_fail("MPI_Query_thread", rc);
  if (level != MPI_THREAD_MULTIPLE)
    return sm_fail(SYRAH_ERROR_COMMUNICATION,
                "MPI runs with thread level %ld; Syrah's transfers run on runtime threads and need "
                "MPI_THREAD_MULTIPLE (%ld): initialise MPI with MPI_Init_thread",
                (long)level, (long)MPI_THREAD_MULTIPLE);
  c = (syrah_mpi_comm *)calloc(1, sizeof *c);
  if (!c) return sm_fail(SYRAH_ERROR_OUT_OF_HOST_MEMORY, "no host memory for an MPI communicator");
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
    return sm_fail(SYRAH_ERROR_OUT_OF_HOST_MEMORY, "could not start the MPI progress thread");
  }
  sm_staging_comm_created();
  *out_comm = c;
  return SYRAH_SUCCESS;
}

syrah_status syrah_mpi_comm_wait(syrah_mpi_comm *comm) {
  char msg[MSG] = "";
  if (!comm) return sm_fail(SYRAH_ERROR_NULL_ARGUMENT, "comm is NULL");
  pthread_mutex_lock(&comm->lock);
  while (comm->list || comm->unstarted) pthread_cond_wait(&comm->changed, &comm->lock);
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
  if (!comm) return sm_fail(SYRAH_ERROR_NULL_ARGUMENT, "comm is NULL");
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
  sm_staging_comm_released();
  return s;
}

syrah_status syrah_mpi_comm_get_rank(const syrah_mpi_comm *comm, int *out_rank, int *out_size) {
  if (!comm) return sm_fail(SYRAH_ERROR_NULL_ARGUMENT, "comm is NULL");
  if (!out_rank || !out_size) return sm_fail(SYRAH_ERROR_NULL_ARGUMENT, "out_rank or out_size is NULL");
  *out_rank = comm->rank;
  *out_size = comm->size;
  return SYRAH_SUCCESS;
}

syrah_status syrah_mpi_comm_get_stats(const syrah_mpi_comm *comm, uint64_t *out_bytes_sent,
                                      uint64_t *out_bytes_received) {
  syrah_mpi_comm *c = (syrah_mpi_comm *)comm;
  if (!comm) return sm_fail(SYRAH_ERROR_NULL_ARGUMENT, "comm is NULL");
  if (!out_bytes_sent || !out_bytes_received)
    return sm_fail(SYRAH_ERROR_NULL_ARGUMENT, "out_bytes_sent or out_bytes_received is NULL");
  pthread_mutex_lock(&c->lock);
  *out_bytes_sent = c->sent;
  *out_bytes_received = c->received;
  pthread_mutex_unlock(&c->lock);
  return SYRAH_SUCCESS;
}

/* ---- checks shared by every transfer ---------------------------------- */

syrah_status sm_check_common(const syrah_queue *queue, const syrah_mpi_comm *comm, int peer, int tag,
                                 const char *who) {
  int flag = 0, *ub = NULL;
  if (!queue) return sm_fail(SYRAH_ERROR_NULL_ARGUMENT, "queue is NULL");
  if (!comm) return sm_fail(SYRAH_ERROR_NULL_ARGUMENT, "comm is NULL");
  if (peer < 0 || peer >= comm->size)
    return sm_fail(SYRAH_ERROR_INVALID_ARGUMENT, "%s rank %d is not a rank of the communicator (0 to %d)", who, peer,
                comm->size - 1);
  MPI_Comm_get_attr(comm->comm, MPI_TAG_UB, &ub, &flag);
  if (tag < 0 || (flag && ub && tag > *ub))
    return sm_fail(SYRAH_ERROR_INVALID_ARGUMENT, "tag %ld is outside 0 to %ld", (long)tag,
                flag && ub ? (long)*ub : 32767L);
  return SYRAH_SUCCESS;
}

syrah_status sm_check_size(size_t bytes) {
  if (bytes == 0) return sm_fail(SYRAH_ERROR_INVALID_ARGUMENT, "a transfer of 0 bytes");
  if (bytes > (size_t)INT_MAX)
    return sm_fail(SYRAH_ERROR_INVALID_ARGUMENT, "a transfer of %zu bytes is over MPI's count limit of %d", bytes, INT_MAX);
  return SYRAH_SUCCESS;
}

/* The dependencies plus one more event. */
const syrah_event **sm_deps_plus(const syrah_event *const *deps, size_t n, const syrah_event *extra) {
  const syrah_event **all = (const syrah_event **)malloc((n + 1) * sizeof *all);
  size_t i;
  if (!all) return NULL;
  for (i = 0; i < n; ++i) all[i] = deps[i];
  all[n] = extra;
  return all;
}

/* ---- receives staged in host memory --------------------------------- */

/* A user event of the queue's context. */
syrah_status sm_user_event(const syrah_queue *queue, syrah_event **out) {
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
syrah_status sm_post_staged_recv(const syrah_queue *queue, op *o) {
  syrah_status s = sm_user_event(queue, &o->arrived);
  if (s != SYRAH_SUCCESS) return s;
  o->staging = sm_staging_alloc(queue, o->bytes);
  if (!o->staging)
    return sm_fail(SYRAH_ERROR_OUT_OF_HOST_MEMORY, "no host memory to receive %zu bytes", o->bytes);
  o->refs = 2;
  s = sm_start(o->comm, 1, o->staging, o->bytes, o->peer, o->tag, NULL, o, NULL);
  if (s != SYRAH_SUCCESS) o->refs = 0;
  return s;
}

void sm_drop_unposted(op *o) {
  if (o->arrived) {
    syrah_user_event_complete(o->arrived, true);
    syrah_event_release(o->arrived);
  }
  sm_staging_free(o->staging);
  free(o);
}

