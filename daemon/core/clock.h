/*
 * clock.h - the daemon's one clock. Everything in daemon/ that reads the
 * time reads it through a struct clk, so that tests can run the real code
 * on virtual time (clk_fake) and advance it at will.
 *
 *   wall_ms  milliseconds since the Unix epoch (stored timestamps, API)
 *   mono_us  microseconds of a monotonic clock (durations, deadlines)
 *
 * Thread-safety: clk_system may be read from any thread. A clk_fake is read
 * from any thread too (its fields are atomics), and advanced by the test.
 */
#ifndef OCSD_CLOCK_H
#define OCSD_CLOCK_H

#include <stdatomic.h>
#include <stdint.h>

struct clk {
	int64_t (*wall_ms)(const struct clk *c);
	int64_t (*mono_us)(const struct clk *c);
};

/* The system's clocks (CLOCK_REALTIME, CLOCK_MONOTONIC). */
extern const struct clk clk_system;

static inline int64_t clk_wall_ms(const struct clk *c)
{
	return (c ? c : &clk_system)->wall_ms(c ? c : &clk_system);
}

static inline int64_t clk_mono_us(const struct clk *c)
{
	return (c ? c : &clk_system)->mono_us(c ? c : &clk_system);
}

/* A clock that moves only when told to (tests). */
struct clk_fake {
	struct clk clk; /* first: a struct clk_fake * is a struct clk * */
	_Atomic int64_t wall_ms;
	_Atomic int64_t mono_us;
};

void clk_fake_init(struct clk_fake *f, int64_t wall_ms);
void clk_fake_advance_ms(struct clk_fake *f, int64_t ms);

#endif
