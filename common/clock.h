/* SPDX-License-Identifier: Apache-2.0 */
/* clock.h - the clocks of podres, in one place. Monotonic time is for
 * intervals, deadlines and back-off; wall time is for what a user reads
 * (timestamps in answers, history, Events). Thread-safe; never fails. */
#ifndef PODRES_CLOCK_H
#define PODRES_CLOCK_H
#include <stdint.h>
#include <time.h>

uint64_t clock_mono_ms(void); /* milliseconds since an arbitrary start */
uint64_t clock_mono_us(void); /* microseconds since an arbitrary start */
uint64_t clock_wall_ms(void); /* milliseconds since the Unix epoch */

/* The CLOCK_MONOTONIC time 'ms' milliseconds from now, for
 * pthread_cond_timedwait on a condition variable whose clock is
 * CLOCK_MONOTONIC (pthread_condattr_setclock). */
struct timespec clock_mono_after(uint64_t ms);

#endif
