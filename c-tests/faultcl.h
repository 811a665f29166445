/* Control of the fault-injecting OpenCL and CUDA library (faultcl.c). */
#ifndef FAULTCL_H
#define FAULTCL_H

/* From now on, `times` uses (0: every use until disarmed) of OpenCL or
 * CUDA entry point `call` (CUDA's without a version suffix), from its
 * `nth` use on (1 = the next), fail with `code`: calls that return a
 * status return it, calls that create an object return NULL and write it
 * to their error output, clSVMAlloc returns NULL. Replaces any earlier
 * arming. */
void faultcl_arm(const char *call, int nth, int times, int code);
/* Stops failing; returns how often the armed call was used meanwhile. */
int faultcl_disarm(void);
/* How many faults were injected so far in this process. */
int faultcl_fired(void);

#endif
