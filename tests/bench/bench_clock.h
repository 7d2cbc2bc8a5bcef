/*
 * bench_clock.h - what the C benchmarks share to time and rank samples: a
 * monotonic clock in microseconds, milliseconds or seconds, and the comparison that sorts
 * doubles for medians and percentiles (qsort).
 */
#ifndef OCSD_BENCH_CLOCK_H
#define OCSD_BENCH_CLOCK_H

#include <time.h>

static inline double bench_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static inline double bench_now_ms(void)
{
	return bench_now_us() / 1e3;
}

static inline double bench_now_s(void)
{
	return bench_now_us() / 1e6;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

#endif
