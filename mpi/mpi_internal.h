/* What the MPI companion's two files share: its transfers' state and the
 * helpers both use. Internal: never installed. */
#ifndef SYRAH_MPI_INTERNAL_H
#define SYRAH_MPI_INTERNAL_H

#include "syrah_mpi.h"

#include <pthread.h>
#include <stddef.h>

#define SM_HIDDEN __attribute__((visibility("hidden")))

/* Room for one message. */
#define MSG 700

/* A transfer that MPI has started and the progress thread completes. */
typedef struct pending pending;

/* A transfer's size and, for receives, what the progress thread tells
 * the command that finishes it. */
typedef struct op {
  syrah_mpi_comm *comm;
  size_t bytes; /* the packed data */
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
  void *owned;             /* staging memory, freed when the transfer completes */
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
  int unstarted; /* sends submitted whose MPI send has not been started yet */
  char error[MSG];
};

/* Sets the message of a failed call and returns `status`. */
SM_HIDDEN __attribute__((format(printf, 2, 3))) syrah_status sm_fail(syrah_status status, const char *fmt, ...);
/* Drops a reference to `o`; the last frees it. */
SM_HIDDEN void sm_op_unref(op *o);
/* Notes a failure for syrah_mpi_comm_wait (the first is kept); the caller
 * holds `c->lock`. */
SM_HIDDEN void sm_record_error(syrah_mpi_comm *c, const char *msg);
/* Starts a transfer of `bytes` at `data` and hands it to the progress
 * thread; `owned` is freed once it completes, `o` (receives) is told its
 * outcome, `done` is completed with it. */
SM_HIDDEN syrah_status sm_start(syrah_mpi_comm *c, int recv, void *data, size_t bytes, int peer, int tag,
                                void *owned, op *o, syrah_event *done);
/* The checks every transfer makes: queue, communicator, peer and tag. */
SM_HIDDEN syrah_status sm_check_common(const syrah_queue *queue, const syrah_mpi_comm *comm, int peer, int tag,
                                       const char *who);
/* A transfer's size: at least a byte, at most MPI's count limit. */
SM_HIDDEN syrah_status sm_check_size(size_t bytes);
/* The dependencies plus one more event (freed by the caller). */
SM_HIDDEN const syrah_event **sm_deps_plus(const syrah_event *const *deps, size_t n, const syrah_event *extra);
/* A user event of the queue's context. */
SM_HIDDEN syrah_status sm_user_event(const syrah_queue *queue, syrah_event **out);
/* Posts the receive of `o` into its staging memory (see the definition). */
SM_HIDDEN syrah_status sm_post_staged_recv(const syrah_queue *queue, op *o);
/* Frees an op whose receive was never posted, failing its user event. */
SM_HIDDEN void sm_drop_unposted(op *o);
/* `bytes` of host memory to stage a transfer of `queue` through (pinned
 * where it can be; NULL where there is no memory), and its return
 * (syrah_mpi_staging.c). */
SM_HIDDEN void *sm_staging_alloc(const syrah_queue *queue, size_t bytes);
SM_HIDDEN void sm_staging_free(void *p);
/* Staging memory is kept for reuse while a communicator exists. */
SM_HIDDEN void sm_staging_comm_created(void);
SM_HIDDEN void sm_staging_comm_released(void);

#endif
