/* Host memory that the MPI companion's transfers stage through: pinned
 * memory of the queue's context where Syrah can make it, so that copies
 * between the device and the staging memory go straight to the device's
 * copy engine, kept for the next transfer of a like size (a halo exchange
 * stages the same sizes every iteration, and pinning memory costs far
 * more than a copy). Ordinary memory for transfers over PINNED_MAX bytes
 * (the runtime stages those through its own pinned chunks) and where
 * pinning fails.
 *
 * Pinned memory is freed only when the last communicator is released, on
 * the caller's thread, once every block has come back: freeing USM may
 * wait for the context's queued commands, which must never happen on the
 * progress thread or in a runtime callback, where blocks come back. */
#define _POSIX_C_SOURCE 200809L
#include "mpi_internal.h"

#include <stdint.h>
#include <stdlib.h>

/* What precedes each block's bytes: its capacity, the context its pinned
 * memory belongs to (NULL: ordinary memory), and the next kept block. */
typedef struct block {
  size_t cap;
  syrah_context *ctx;
  struct block *next;
} block;

/* Room for the header, keeping the bytes as aligned as the allocation. */
#define HEADER 64

/* The largest transfer staged through pinned memory. */
#define PINNED_MAX ((size_t)16 << 20)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t returned = PTHREAD_COND_INITIALIZER;
static block *kept;
static size_t out; /* pinned blocks handed out and not yet back */
static int live_comms;

static void *bytes_of(block *b) { return (char *)b + HEADER; }

static void release_block(block *b) {
  if (b->ctx) {
    syrah_context *ctx = b->ctx;
    syrah_free(ctx, b);
    syrah_context_release(ctx);
  } else {
    free(b);
  }
}

void *sm_staging_alloc(const syrah_queue *queue, size_t bytes) {
  syrah_context *ctx = NULL;
  block **at, *b = NULL;
  void *p = NULL;
  if (bytes > SIZE_MAX - HEADER) return NULL;
  if (bytes > PINNED_MAX || syrah_queue_get_context(queue, &ctx) != SYRAH_SUCCESS) ctx = NULL;
  pthread_mutex_lock(&lock);
  /* A kept block of this context, large enough and not twice too large. */
  for (at = &kept; *at; at = &(*at)->next)
    if (ctx && (*at)->ctx == ctx && (*at)->cap >= bytes && (*at)->cap / 2 <= bytes) {
      b = *at;
      *at = b->next;
      ++out;
      break;
    }
  pthread_mutex_unlock(&lock);
  if (b) {
    if (ctx) syrah_context_release(ctx);
    return bytes_of(b);
  }
  if (ctx && syrah_malloc_pinned(ctx, HEADER + bytes, &p) != SYRAH_SUCCESS) p = NULL;
  if (p) {
    b = (block *)p;
    b->ctx = ctx; /* the block keeps the reference */
    pthread_mutex_lock(&lock);
    ++out;
    pthread_mutex_unlock(&lock);
  } else {
    if (ctx) syrah_context_release(ctx);
    b = (block *)malloc(HEADER + bytes);
    if (!b) return NULL;
    b->ctx = NULL;
  }
  b->cap = bytes;
  b->next = NULL;
  return bytes_of(b);
}

void sm_staging_free(void *p) {
  block *b;
  if (!p) return;
  b = (block *)((char *)p - HEADER);
  if (!b->ctx) {
    free(b);
    return;
  }
  pthread_mutex_lock(&lock);
  b->next = kept;
  kept = b;
  --out;
  pthread_cond_broadcast(&returned);
  pthread_mutex_unlock(&lock);
}

void sm_staging_comm_created(void) {
  pthread_mutex_lock(&lock);
  ++live_comms;
  pthread_mutex_unlock(&lock);
}

void sm_staging_comm_released(void) {
  block *all = NULL;
  pthread_mutex_lock(&lock);
  if (--live_comms == 0) {
    /* The copies of arrived messages into their regions may still hold
     * blocks (comm_wait saw every transfer end in MPI). */
    while (out > 0 && live_comms == 0) pthread_cond_wait(&returned, &lock);
    if (live_comms == 0) {
      all = kept;
      kept = NULL;
    }
  }
  pthread_mutex_unlock(&lock);
  while (all) {
    block *next = all->next;
    release_block(all);
    all = next;
  }
}
