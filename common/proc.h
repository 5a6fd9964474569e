/* SPDX-License-Identifier: Apache-2.0 */
/* proc.h - the signal handling the three daemons share: SIGTERM and SIGINT
 * are blocked in every thread and taken by the main thread's wait, SIGPIPE
 * is ignored (a peer that closes is an error return, not a death). */
#ifndef PODRES_PROC_H
#define PODRES_PROC_H
#include <signal.h>
#include <stdbool.h>

/* Block SIGTERM and SIGINT (call before any thread starts, so every thread
 * inherits the mask) and ignore SIGPIPE. *sigs is set for proc_wait. */
void proc_signals(sigset_t *sigs);

/* Wait at most 'ms' milliseconds for one of 'sigs'. True when SIGTERM or
 * SIGINT came (logged as the reason to shut down), false on the timeout. */
bool proc_wait(const sigset_t *sigs, unsigned ms);

#endif
