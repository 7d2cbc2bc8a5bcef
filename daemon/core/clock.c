/*
 * clock.c - implementation of clock.h: the system clock and the fake one.
 */
#include "clock.h"

#include <time.h>

static int64_t sys_wall_ms(const struct clk *c)
{
	struct timespec ts;

	(void)c;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t sys_mono_us(const struct clk *c)
{
	struct timespec ts;

	(void)c;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

const struct clk clk_system = {sys_wall_ms, sys_mono_us};

static int64_t fake_wall_ms(const struct clk *c)
{
	return atomic_load(&((struct clk_fake *)c)->wall_ms);
}

static int64_t fake_mono_us(const struct clk *c)
{
	return atomic_load(&((struct clk_fake *)c)->mono_us);
}

void clk_fake_init(struct clk_fake *f, int64_t wall_ms)
{
	f->clk = (struct clk){fake_wall_ms, fake_mono_us};
	atomic_store(&f->wall_ms, wall_ms);
	atomic_store(&f->mono_us, 1000000);
}

void clk_fake_advance_ms(struct clk_fake *f, int64_t ms)
{
	atomic_fetch_add(&f->wall_ms, ms);
	atomic_fetch_add(&f->mono_us, ms * 1000);
}
