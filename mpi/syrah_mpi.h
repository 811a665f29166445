/* Syrah's MPI companion: point-to-point transfers of buffer regions and USM
 * memory between MPI ranks, submitted to a Syrah queue like any command
 * and ordered by the same accessor rules as kernels, so that a halo
 * exchange overlaps with independent work.
 *
 * Link Syrah::syrah_mpi (CMake) or -lsyrah_mpi. MPI must be initialised
 * with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...): transfers are
 * started and finished on runtime threads. libsyrah itself does not link
 * MPI; only this library does.
 *
 * Every function returns a syrah_status; on failure
 * syrah_last_error_message() says what was wrong, with MPI's own error
 * text where an MPI call failed (SYRAH_ERROR_COMMUNICATION). A transfer
 * that fails after it was submitted is an asynchronous error of its
 * command, or is returned by syrah_mpi_comm_wait.
 *
 * Matching: messages between two ranks are matched by (source, tag) in
 * the order MPI sees them posted. Receives into buffers are posted when
 * submitted; sends, and receives into USM, when their dependencies are
 * met. Two transfers in flight between the same pair of ranks that are
 * not ordered by their accessors or events need distinct tags. */
#ifndef SYRAH_MPI_H
#define SYRAH_MPI_H

#include <mpi.h>
#include <syrah.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A communicator Syrah transfers on: a duplicate of the user's, whose
 * errors are returned rather than fatal, with a thread that completes its
 * transfers. */
typedef struct syrah_mpi_comm syrah_mpi_comm;

/* Collective over `comm`: duplicates it for Syrah's transfers. Fails with
 * SYRAH_ERROR_COMMUNICATION unless MPI runs with MPI_THREAD_MULTIPLE. */
syrah_status syrah_mpi_comm_create(MPI_Comm comm, syrah_mpi_comm **out_comm);

/* Waits for every transfer started on `comm`, then frees it (collective
 * over the communicator it was made from). Returns the first failure not
 * reported yet, as syrah_mpi_comm_wait does. Releasing the last
 * communicator also waits for the copies of arrived messages into their
 * regions and USM, then frees the pinned memory transfers staged
 * through (as syrah_free does, after the contexts' queued commands). */
syrah_status syrah_mpi_comm_release(syrah_mpi_comm *comm);

/* Waits until every transfer started on `comm` so far has completed in
 * MPI; returns the first failure of one that nobody waited on (a send
 * whose MPI request failed after its command completed), once. */
syrah_status syrah_mpi_comm_wait(syrah_mpi_comm *comm);

/* The rank of this process in `comm`, and the number of ranks. */
syrah_status syrah_mpi_comm_get_rank(const syrah_mpi_comm *comm, int *out_rank, int *out_size);

/* Bytes this process has sent and received through `comm` so far
 * (completed transfers only). */
syrah_status syrah_mpi_comm_get_stats(const syrah_mpi_comm *comm, uint64_t *out_bytes_sent,
                                      uint64_t *out_bytes_received);

/* Sends the elements of `region` (a window of a buffer: 1D range, 2D rows
 * or columns, 3D box; its mode must read) to rank `dest` with `tag`, once
 * `dependencies` and earlier conflicting commands are done. The elements
 * go packed, row after row. Its event completes once the data is taken
 * (copied for MPI), so later writers of the region may run while MPI
 * still sends. */
syrah_status syrah_mpi_send(const syrah_queue *queue, syrah_mpi_comm *comm, const syrah_accessor *region, int dest,
                            int tag, const syrah_event *const *dependencies, size_t dependency_count,
                            syrah_event **out_event);

/* Receives packed elements from rank `source` with `tag` into `region`
 * (its mode must write); later readers of the region wait for it. The
 * message must hold exactly the region's bytes. */
syrah_status syrah_mpi_recv(const syrah_queue *queue, syrah_mpi_comm *comm, const syrah_accessor *region,
                            int source, int tag, const syrah_event *const *dependencies, size_t dependency_count,
                            syrah_event **out_event);

/* Sends `size` bytes at `pointer` to `dest`: memory the host can read
 * (host or shared USM, pinned or ordinary host memory) goes to MPI as it
 * is, and the event completes when MPI has sent it; device USM is first
 * copied to host memory, and the event completes once it is. */
syrah_status syrah_mpi_send_usm(const syrah_queue *queue, syrah_mpi_comm *comm, const void *pointer, size_t size,
                                int dest, int tag, const syrah_event *const *dependencies, size_t dependency_count,
                                syrah_event **out_event);

/* Receives `size` bytes from `source` into `pointer`: memory the host can
 * write is given to MPI as it is; device USM is received into host memory
 * and copied to the device. The event completes when the data is there. */
syrah_status syrah_mpi_recv_usm(const syrah_queue *queue, syrah_mpi_comm *comm, void *pointer, size_t size,
                                int source, int tag, const syrah_event *const *dependencies, size_t dependency_count,
                                syrah_event **out_event);

#ifdef __cplusplus
}
#endif

#endif
