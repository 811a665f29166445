/* Host memory that the MPI companion's transfers stage through: pinned
 * memory of the queue's context where Syrah can make it, so that copies
 * between the device and the staging memory go straight to the device's
 * copy engine, and kept for the next transfer of a like size while a
 * communicator exists (a halo exchange stages the same sizes every
 * iteration, and pinning memory costs far more than a copy). Ordinary
 * memory where pinning fails. */
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

/* Blocks kept at most, and their bytes. */
#define KEEP_BLOCKS 64
#define KEEP_BYTES ((size_t)64 << 20)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static block *kept;
static size_t kept_blocks, kept_bytes;
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
  if (syrah_queue_get_context(queue, &ctx) != SYRAH_SUCCESS) ctx = NULL;
  pthread_mutex_lock(&lock);
  /* A kept block of this context, large enough and not twice too large. */
  for (at = &kept; *at; at = &(*at)->next)
    if ((*at)->ctx == ctx && (*at)->cap >= bytes && (*at)->cap / 2 <= bytes) {
      b = *at;
      *at = b->next;
      --kept_blocks;
      kept_bytes -= b->cap;
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
  pthread_mutex_lock(&lock);
  if (b->ctx && live_comms > 0 && kept_blocks < KEEP_BLOCKS && kept_bytes + b->cap <= KEEP_BYTES) {
    b->next = kept;
    kept = b;
    ++kept_blocks;
    kept_bytes += b->cap;
    b = NULL;
  }
  pthread_mutex_unlock(&lock);
  if (b) release_block(b);
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
    all = kept;
    kept = NULL;
    kept_blocks = 0;
    kept_bytes = 0;
  }
  pthread_mutex_unlock(&lock);
  while (all) {
    block *next = all->next;
    release_block(all);
    all = next;
  }
}
