/*
 * gpu_swaps.c - implementation of gpu_swaps.h: a FIFO of swap requests, one
 * transaction at a time on the swaps' own transaction driver, and the
 * start-up programming (or adoption) of the initial port map.
 */
#include "gpu_swaps.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "config.h"
#include "devices.h"
#include "fabric_state.h"
#include "jobs_util.h"
#include "kind_txn.h"
#include "log.h"
#include "rails.h"

/* Jobs named in one progress report of a swap at most. */
#define RSW_PROGRESS_JOBS 64

/* One request: ReplaceGpu, a fault (MarkGpu, a device) or a retry. */
struct gsw_req {
	struct gsw_req *next;
	int64_t gpu;
	bool replace; /* ReplaceGpu: a refusal changes nothing */
	/* A mark that waited for the swap in flight (see gsw_mark): its
	 * condition is stored when it starts, before anything else queued. */
	bool deferred;
	bool faulty;
	char source[16];
	int64_t received_us;
	gsw_answer_fn answer; /* NULL: nobody waits */
	void *ctx;
};

struct rsw {
	struct gsw_deps d;
	struct jm *jm;
	struct ocs_rail_fabric r;
	int64_t n_gpus;
	struct gsw_req *head, *tail;
	bool busy;     /* our transaction is running */
	bool starting; /* it programs the initial port map (gsw_starting) */
	bool ready;
	char why[640]; /* why not ready */
	/* every job's moved GPUs, oldest first (loaded, then appended) */
	struct st_rail_job_move *moves;
	size_t n_moves, cap_moves;
	uint8_t *quiet; /* by GPU: a refusal of its fault swap was logged */
	/* the swap running */
	struct gsw_req *cur;
	struct rail_swap_result res;
	struct st_rail_move *cur_moves;
	size_t n_cur_moves;
	struct st_circuit *adds;
	int64_t since_ms;
	bool was_faulty;
};

struct rsw *gsw_new(const struct gsw_deps *deps)
{
	struct rsw *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->d = *deps;
	s->r = deps->cfg->rail;
	s->n_gpus = ocs_rail_gpus(&s->r);
	s->quiet = calloc((size_t)s->n_gpus, 1);
	if (!s->quiet) {
		free(s);
		return NULL;
	}
	snprintf(s->why, sizeof(s->why), "the port map was not read from the devices yet");
	return s;
}

static void answer_error(struct gsw_req *q, enum err_status st, const char *field, const char *msg)
{
	struct err_info err;

	err_set(&err, st, field, "%s", msg);
	if (q->answer)
		q->answer(q->ctx, &err, NULL);
}

void gsw_free(struct rsw *s)
{
	if (!s)
		return;
	while (s->head) {
		struct gsw_req *q = s->head;

		s->head = q->next;
		answer_error(q, ERR_UNAVAILABLE, "", "ocsd is shutting down");
		free(q);
	}
	if (s->cur) /* its transaction is gone with the driver */
		answer_error(s->cur, ERR_UNAVAILABLE, "", "ocsd is shutting down");
	free(s->cur);
	rail_swap_result_clear(&s->res);
	free(s->cur_moves);
	free(s->adds);
	free(s->moves);
	free(s->quiet);
	free(s);
}

void gsw_attach(struct rsw *s, struct jm *jm)
{
	s->jm = jm;
}

bool gsw_busy(void *arg)
{
	return ((const struct rsw *)arg)->busy;
}

bool gsw_ready(const struct rsw *s, const char **why)
{
	if (why)
		*why = s->why;
	return s->ready;
}

bool gsw_starting(const struct rsw *s)
{
	return s->starting;
}

static bool live(const struct jm_job *j)
{
	return j->state != JM_RELEASED && j->state != JM_FAILED;
}

/* Calls held(ctx, gpu, job id) for every GPU of the fabric a live job holds. */
static void each_held(const struct rsw *s, void (*held)(void *ctx, int64_t gpu, const char *id),
		      void *ctx)
{
	for (size_t i = 0; s->jm && i < jm_count(s->jm); i++) {
		const struct jm_job *j = jm_at(s->jm, i);

		if (!live(j))
			continue;
		for (size_t k = 0; k < j->n_gpus; k++)
			if (j->gpus[k] >= 0 && j->gpus[k] < s->n_gpus)
				held(ctx, j->gpus[k], j->id);
	}
}

static void set_holder(void *ctx, int64_t gpu, const char *id)
{
	const char **holder = ctx;

	holder[gpu] = id;
}

static void set_held(void *ctx, int64_t gpu, const char *id)
{
	uint8_t *flags = ctx;

	flags[gpu] |= RAIL_GPU_HELD;
}

int gsw_holders(const struct rsw *s, const char **holder)
{
	for (int64_t g = 0; g < s->n_gpus; g++)
		holder[g] = NULL;
	each_held(s, set_holder, holder);
	return 0;
}

struct st_rail_job_move *gsw_job_moves(const struct rsw *s, const char *job_id, size_t *n)
{
	struct st_rail_job_move *out = NULL;
	size_t k = 0;

	*n = 0;
	for (size_t i = 0; i < s->n_moves; i++)
		k += strcmp(s->moves[i].job_id, job_id) == 0;
	if (k == 0 || !(out = malloc(k * sizeof(*out))))
		return NULL;
	for (size_t i = 0; i < s->n_moves; i++)
		if (strcmp(s->moves[i].job_id, job_id) == 0)
			out[(*n)++] = s->moves[i];
	return out;
}

static int add_move(struct rsw *s, const struct st_rail_job_move *m)
{
	if (s->n_moves == s->cap_moves) {
		size_t cap = s->cap_moves ? 2 * s->cap_moves : 16;
		struct st_rail_job_move *g = realloc(s->moves, cap * sizeof(*g));

		if (!g)
			return -ENOMEM;
		s->moves = g;
		s->cap_moves = cap;
	}
	s->moves[s->n_moves++] = *m;
	return 0;
}

/* Job job_id now holds new_gpu where it held old_gpu. 0, -ENOENT, -ENOMEM. */
static int move_job_gpu(struct rsw *s, const char *job_id, int64_t old_gpu, int64_t new_gpu)
{
	const struct jm_job *j = s->jm ? jm_find(s->jm, job_id) : NULL;
	int64_t *gpus;
	int rc;

	if (!j)
		return -ENOENT;
	gpus = malloc((j->n_gpus ? j->n_gpus : 1) * sizeof(*gpus));
	if (!gpus)
		return -ENOMEM;
	for (size_t k = 0; k < j->n_gpus; k++)
		gpus[k] = j->gpus[k] == old_gpu ? new_gpu : j->gpus[k];
	rc = jm_set_gpus(s->jm, job_id, gpus, j->n_gpus);
	free(gpus);
	return rc;
}

/* The swap's per-GPU flags: faulty, and held by a live job. NULL on ENOMEM. */
static uint8_t *gpu_flags(const struct rsw *s)
{
	uint8_t *flags = calloc((size_t)s->n_gpus, 1);

	if (!flags)
		return NULL;
	for (int64_t g = 0; g < s->n_gpus; g++)
		if (rl_faulty(s->d.rl, g))
			flags[g] |= RAIL_GPU_FAULTY;
	each_held(s, set_held, flags);
	return flags;
}

static void run_next(struct rsw *s);

/* Stores and applies a GPU's condition, with its event. 0 or the store's -errno. */
static int set_condition(struct rsw *s, int64_t gpu, bool faulty, const char *source)
{
	int rc;

	if (rl_faulty(s->d.rl, gpu) == faulty)
		return 0;
	rc = st_rail_fault_set(s->d.store, gpu, faulty, source, clk_wall_ms(NULL));
	if (rc)
		return rc;
	rl_set_faulty(s->d.rl, gpu, faulty, source, clk_wall_ms(NULL));
	s->quiet[gpu] = 0;
	if (s->d.events.gpu_changed)
		s->d.events.gpu_changed(s->d.events.ctx, gpu, faulty, source);
	log_msg(faulty ? LOG_WARNING : LOG_NOTICE, "gpu %lld marked %s by %s", (long long)gpu,
		faulty ? "faulty" : "healthy", source);
	return 0;
}

static void clear_current(struct rsw *s)
{
	rail_swap_result_clear(&s->res);
	free(s->cur_moves);
	free(s->adds);
	s->cur_moves = NULL;
	s->adds = NULL;
	s->n_cur_moves = 0;
	free(s->cur);
	s->cur = NULL;
}

/* The report of the current swap (no transaction yet). */
static struct gsw_report report_of(const struct rsw *s)
{
	return (struct gsw_report){.res = &s->res,
				   .moves = s->cur_moves,
				   .n_moves = s->n_cur_moves,
				   .source = s->cur->source};
}

static void swap_done(void *arg, const struct txn_outcome *o)
{
	struct rsw *s = arg;
	struct gsw_req *q = s->cur;
	struct gsw_report rep = report_of(s);
	struct err_info err = {0};

	s->busy = false;
	rep.txn_id = o->txn_id;
	rep.devices = o->devices;
	rep.n_devices = o->n_devices;
	rep.devices_us = o->engine_us;
	rep.reaction_us = o->finished_us - q->received_us;
	if (o->result == TXN_CONFIRMED && !o->store_failed) {
		int64_t gpu = s->res.failed_gpu;

		if (rl_load_map(s->d.rl, s->d.fs) != 0)
			log_msg(LOG_ERR, "rail swap %llu: cannot rebuild the port map in memory",
				(unsigned long long)o->txn_id);
		if (!s->was_faulty) { /* stored with the outcome (st_intent_finish) */
			rl_set_faulty(s->d.rl, gpu, true, q->source, s->since_ms);
			if (s->d.events.gpu_changed)
				s->d.events.gpu_changed(s->d.events.ctx, gpu, true, q->source);
		}
		s->quiet[gpu] = 0;
		for (size_t i = 0; i < s->n_cur_moves; i++) {
			const struct st_rail_move *m = &s->cur_moves[i];
			struct st_rail_job_move jm = {.txn_id = (int64_t)o->txn_id,
						      .rail_port = m->rail_port,
						      .old_gpu = m->old_gpu,
						      .new_gpu = m->new_gpu,
						      .moved_ms = clk_wall_ms(NULL)};

			if (!m->job_id[0])
				continue;
			snprintf(jm.job_id, sizeof(jm.job_id), "%s", m->job_id);
			if (move_job_gpu(s, m->job_id, m->old_gpu, m->new_gpu) != 0 ||
			    add_move(s, &jm) != 0)
				log_msg(LOG_ERR,
					"rail swap %llu: job %s: cannot move gpu %lld to %lld in "
					"memory (stored: right after a restart)",
					(unsigned long long)o->txn_id, m->job_id,
					(long long)m->old_gpu, (long long)m->new_gpu);
		}
		log_msg(LOG_NOTICE,
			"gpu %lld swapped out (%s, %s): %zu rail port(s) re-joined in transaction "
			"%llu, %lld us",
			(long long)gpu, rail_swap_kind_name(s->res.kind), q->source,
			s->res.n_changes, (unsigned long long)o->txn_id,
			(long long)rep.reaction_us);
		if (s->d.events.swapped)
			s->d.events.swapped(s->d.events.ctx, &rep);
		if (q->answer)
			q->answer(q->ctx, NULL, &rep);
	} else {
		if (o->store_failed)
			err_set(&err, ERR_UNAVAILABLE, "gpu",
				"the swap's outcome could not be stored (%s); recovery sets "
				"store and devices right at the next start",
				o->store_error);
		else
			err_set(&err, ERR_UNAVAILABLE, "gpu", "the swap's transaction %s (%s)%s",
				o->result == TXN_FAILED ? "failed and its rollback could not "
							  "be proven"
							: "was rolled back",
				o->message ? o->message : "",
				o->result == TXN_FAILED ? "; reconciliation reports the drift"
							: "; nothing changed");
		log_msg(LOG_ERR, "gpu %lld: %s%s", (long long)s->res.failed_gpu, err.message,
			q->replace ? "" : "; tried again in a second");
		if (q->answer)
			q->answer(q->ctx, &err, &rep);
	}
	clear_current(s);
	run_next(s);
}

/* The moves of the current result (the job holding each old GPU) and its additions. */
static int build_change(struct rsw *s)
{
	const char **holder = malloc((size_t)s->n_gpus * sizeof(*holder));

	s->cur_moves = calloc(s->res.n_changes + 1, sizeof(*s->cur_moves));
	s->adds = calloc(s->res.n_additions + 1, sizeof(*s->adds));
	if (!holder || !s->cur_moves || !s->adds || gsw_holders(s, holder) != 0) {
		free(holder);
		return -ENOMEM;
	}
	for (size_t i = 0; i < s->res.n_changes; i++) {
		const struct rail_port_change *c = &s->res.changes[i];
		struct st_rail_move *m = &s->cur_moves[i];

		*m = (struct st_rail_move){c->rail_port, c->old_gpu, c->new_gpu, ""};
		if (c->old_gpu >= 0 && c->old_gpu < s->n_gpus && holder[c->old_gpu])
			snprintf(m->job_id, sizeof(m->job_id), "%s", holder[c->old_gpu]);
	}
	s->n_cur_moves = s->res.n_changes;
	for (size_t i = 0; i < s->res.n_additions; i++) {
		s->adds[i].xc = s->res.additions[i];
		snprintf(s->adds[i].job_id, sizeof(s->adds[i].job_id), "%s", ST_RAIL_OWNER);
	}
	free(holder);
	return 0;
}

/* The swap's transaction progress, told with the jobs whose GPUs it moves. */
static void swap_progress(void *arg, const struct txn_progress *p)
{
	struct rsw *s = arg;
	const char *jobs[RSW_PROGRESS_JOBS];
	size_t n = 0;

	if (!s->d.events.progress)
		return;
	for (size_t i = 0; i < s->n_cur_moves && n < RSW_PROGRESS_JOBS; i++) {
		const char *id = s->cur_moves[i].job_id;
		bool seen = !id[0];

		for (size_t k = 0; k < n && !seen; k++)
			seen = strcmp(jobs[k], id) == 0;
		if (!seen)
			jobs[n++] = id;
	}
	if (n)
		s->d.events.progress(s->d.events.ctx, jobs, n, p);
}

/* A refusal of the current request: answered, and for a fault logged once. */
static void refuse(struct rsw *s, enum err_status st, const char *msg)
{
	struct gsw_req *q = s->cur;
	struct gsw_report rep = report_of(s);
	struct err_info err;
	int64_t gpu = q->gpu;

	err_set(&err, st, "gpu", "%s", msg);
	if (!q->replace && !s->quiet[gpu]) {
		s->quiet[gpu] = 1;
		log_msg(LOG_ERR,
			"gpu %lld is faulty and stays on its rail port: %s (tried again "
			"every second)",
			(long long)gpu, msg);
		if (s->d.events.swapped && s->res.kind == RAIL_SWAP_REFUSED)
			s->d.events.swapped(s->d.events.ctx, &rep);
	}
	/* A fault's refusal is an answer, not an error: the fault is recorded. */
	if (q->answer && !q->replace && s->res.kind == RAIL_SWAP_REFUSED)
		q->answer(q->ctx, NULL, &rep);
	else if (q->answer)
		q->answer(q->ctx, &err, s->res.kind == RAIL_SWAP_REFUSED ? &rep : NULL);
}

/* Starts the current request (s->cur); it is finished here unless a transaction runs. */
static void start_swap(struct rsw *s)
{
	struct gsw_req *q = s->cur;
	struct txn_change c;
	struct st_rail_swap sw;
	uint8_t *flags;
	char why[800] = "";
	int rc, group;

	if (q->deferred) {
		rc = set_condition(s, q->gpu, q->faulty, q->source);
		if (rc) {
			snprintf(why, sizeof(why), "cannot store the GPU's condition (%s); %s",
				 strerror(-rc), st_changed_note(rc));
			answer_error(q, ERR_UNAVAILABLE, "gpu", why);
			clear_current(s);
			return;
		}
		if (!q->faulty || rl_gpu_port(s->d.rl, q->gpu) == RAIL_NONE) {
			if (q->answer)
				q->answer(q->ctx, NULL, NULL);
			clear_current(s);
			return;
		}
	}
	if (!s->ready) {
		snprintf(why, sizeof(why), "the rail port map is not on the devices: %s", s->why);
		answer_error(q, ERR_PRECONDITION, "gpu", why);
		clear_current(s);
		return;
	}
	if (!q->replace && !rl_faulty(s->d.rl, q->gpu)) {
		if (q->answer) /* marked healthy since it was asked */
			q->answer(q->ctx, NULL, NULL);
		clear_current(s);
		return;
	}
	flags = gpu_flags(s);
	rc = flags ? rail_swap(&s->r, rl_map(s->d.rl), flags, q->gpu, &s->res) : -ENOMEM;
	free(flags);
	if (rc) {
		answer_error(q, rc == -ENOMEM ? ERR_INTERNAL : ERR_INVALID, "gpu",
			     rc == -ENOMEM ? "out of memory" : "not a GPU of the fabric");
		clear_current(s);
		return;
	}
	group = s->res.group;
	if (s->res.kind == RAIL_SWAP_NONE) {
		/* It serves no rail port: ReplaceGpu takes it out, nothing moves. */
		rc = set_condition(s, q->gpu, true, q->source);
		if (rc) {
			snprintf(why, sizeof(why), "cannot store the GPU's condition (%s)",
				 strerror(-rc));
			answer_error(q, ERR_UNAVAILABLE, "gpu", why);
		} else if (q->answer) {
			struct gsw_report rep = report_of(s);

			q->answer(q->ctx, NULL, &rep);
		}
		clear_current(s);
		return;
	}
	if (dev_drained(s->d.devs, group)) {
		snprintf(why, sizeof(why),
			 "gpu %lld is on device %s (OCS group %d), which is drained: a swap would "
			 "program it; undrain it first%s",
			 (long long)q->gpu, dev_name(s->d.devs, group), group,
			 q->replace ? "" : " (the GPU is marked faulty and swapped out then)");
		refuse(s, ERR_PRECONDITION, why);
		clear_current(s);
		return;
	}
	if (s->res.kind == RAIL_SWAP_REFUSED) {
		refuse(s, ERR_EXHAUSTED, s->res.reason);
		clear_current(s);
		return;
	}
	if (build_change(s) != 0) {
		answer_error(q, ERR_INTERNAL, "", "out of memory");
		clear_current(s);
		return;
	}
	s->was_faulty = rl_faulty(s->d.rl, q->gpu);
	s->since_ms = clk_wall_ms(NULL);
	sw = (struct st_rail_swap){.gpu = q->gpu,
				   .kind = rail_swap_kind_name(s->res.kind),
				   .source = q->source,
				   .since_ms = s->since_ms,
				   .moves = s->cur_moves,
				   .n_moves = s->n_cur_moves};
	c = (struct txn_change){.job_id = ST_RAIL_OWNER,
				.removals = s->res.removals,
				.n_removals = s->res.n_removals,
				.additions = s->adds,
				.n_additions = s->res.n_additions,
				.kind = &krl_swap_ops,
				.kind_change = &sw,
				.progress = swap_progress};
	s->busy = true;
	rc = s->d.txn_start(s->d.txn_ctx, &c, swap_done, s, why, sizeof(why));
	if (rc) {
		s->busy = false;
		answer_error(q, rc == -ENOMEM ? ERR_INTERNAL : ERR_UNAVAILABLE, "gpu", why);
		clear_current(s);
	}
}

static void run_next(struct rsw *s)
{
	while (!s->busy && !s->cur && s->head) {
		s->cur = s->head;
		s->head = s->cur->next;
		if (!s->head)
			s->tail = NULL;
		s->cur->next = NULL;
		start_swap(s);
	}
}

/* A request to queue; NULL when out of memory (then answered). */
static struct gsw_req *new_req(int64_t gpu, const char *source, int64_t received_us,
			       gsw_answer_fn answer, void *ctx)
{
	struct gsw_req *q = calloc(1, sizeof(*q));

	if (!q) {
		struct gsw_req tmp = {.answer = answer, .ctx = ctx};

		answer_error(&tmp, ERR_INTERNAL, "", "out of memory");
		return NULL;
	}
	*q = (struct gsw_req){.gpu = gpu, .received_us = received_us, .answer = answer, .ctx = ctx};
	snprintf(q->source, sizeof(q->source), "%s", source);
	return q;
}

static void enqueue(struct rsw *s, int64_t gpu, bool replace, const char *source,
		    int64_t received_us, gsw_answer_fn answer, void *ctx)
{
	struct gsw_req *q = new_req(gpu, source, received_us, answer, ctx);

	if (!q)
		return;
	q->replace = replace;
	if (s->tail)
		s->tail->next = q;
	else
		s->head = q;
	s->tail = q;
	run_next(s);
}

void gsw_replace(struct rsw *s, int64_t gpu, const char *source, gsw_answer_fn answer, void *ctx)
{
	struct gsw_req q = {.answer = answer, .ctx = ctx};

	if (gpu < 0 || gpu >= s->n_gpus) {
		answer_error(&q, ERR_INVALID, "gpu", "not a GPU of the fabric");
		return;
	}
	enqueue(s, gpu, true, source, clk_mono_us(NULL), answer, ctx);
}

/*
 * True when gpu must wait to change its condition: the swap in flight puts
 * it on a rail port (it chose it as a healthy idle GPU; marked faulty now,
 * the swap would confirm onto a faulty GPU), or a mark of it waits already
 * (marks of one GPU keep their order).
 */
static bool mark_waits(const struct rsw *s, int64_t gpu)
{
	for (const struct gsw_req *q = s->head; q && q->deferred; q = q->next)
		if (q->gpu == gpu)
			return true;
	if (!s->busy || !s->cur)
		return false;
	for (size_t i = 0; i < s->res.n_changes; i++)
		if (s->res.changes[i].new_gpu == gpu)
			return true;
	return false;
}

/* Queues a mark that waits for the swap in flight: after the marks that
 * wait already, ahead of every other request (which would plan with it). */
static void defer_mark(struct rsw *s, int64_t gpu, bool faulty, const char *source,
		       int64_t received_us, gsw_answer_fn answer, void *ctx)
{
	struct gsw_req *q = new_req(gpu, source, received_us, answer, ctx);
	struct gsw_req **at = &s->head;

	if (!q)
		return;
	q->deferred = true;
	q->faulty = faulty;
	while (*at && (*at)->deferred)
		at = &(*at)->next;
	q->next = *at;
	*at = q;
	if (!q->next)
		s->tail = q;
	log_msg(LOG_NOTICE, "gpu %lld: marked %s once the swap in flight onto it is finished",
		(long long)gpu, faulty ? "faulty" : "healthy");
}

void gsw_mark(struct rsw *s, int64_t gpu, bool faulty, const char *source, int64_t received_us,
	      gsw_answer_fn answer, void *ctx)
{
	struct gsw_req q = {.answer = answer, .ctx = ctx};
	char why[160];
	int rc;

	if (gpu < 0 || gpu >= s->n_gpus) {
		answer_error(&q, ERR_INVALID, "gpu", "not a GPU of the fabric");
		return;
	}
	if (mark_waits(s, gpu)) {
		defer_mark(s, gpu, faulty, source, received_us, answer, ctx);
		return;
	}
	rc = set_condition(s, gpu, faulty, source);
	if (rc) {
		snprintf(why, sizeof(why), "cannot store the GPU's condition (%s); %s",
			 strerror(-rc), st_changed_note(rc));
		answer_error(&q, ERR_UNAVAILABLE, "gpu", why);
		return;
	}
	if (!faulty || rl_gpu_port(s->d.rl, gpu) == RAIL_NONE) {
		if (answer)
			answer(ctx, NULL, NULL);
		return;
	}
	enqueue(s, gpu, false, source, received_us, answer, ctx);
}

void gsw_port_state(void *arg, int device, int port, bool up, int64_t received_us)
{
	struct rsw *s = arg;
	struct ocs_rail_port_owner o;

	if (ocs_rail_port_owner(&s->r, device, port, &o) != 0) {
		log_msg(LOG_WARNING,
			"device %s: port-state-change on port %d, which it does not have",
			dev_name(s->d.devs, device), port);
		return;
	}
	if (!o.is_gpu) {
		log_msg(LOG_WARNING, "device %s: switch-side port %d (rail port %lld) is %s",
			dev_name(s->d.devs, device), port, (long long)o.rail_port,
			up ? "up" : "down");
		return;
	}
	if (up) {
		if (rl_faulty(s->d.rl, o.gpu))
			log_msg(LOG_NOTICE,
				"gpu %lld: light is back on device %s port %d; it stays faulty "
				"until an operator marks it healthy (MarkGpu)",
				(long long)o.gpu, dev_name(s->d.devs, device), port);
		return;
	}
	log_msg(LOG_WARNING, "device %s: gpu %lld (port %d) lost light: a GPU fault",
		dev_name(s->d.devs, device), (long long)o.gpu, port);
	gsw_mark(s, o.gpu, true, "device", received_us, NULL, NULL);
}

static bool queued(const struct rsw *s, int64_t gpu)
{
	if (s->cur && s->cur->gpu == gpu)
		return true;
	for (const struct gsw_req *q = s->head; q; q = q->next)
		if (q->gpu == gpu)
			return true;
	return false;
}

void gsw_retry(struct rsw *s)
{
	if (!s->ready)
		return;
	for (int64_t g = 0; g < s->n_gpus; g++) {
		const char *source;

		if (!rl_faulty(s->d.rl, g) || rl_gpu_port(s->d.rl, g) == RAIL_NONE || queued(s, g))
			continue;
		source = rl_fault_source(s->d.rl, g, NULL);
		enqueue(s, g, false, source && source[0] ? source : "device", clk_mono_us(NULL),
			NULL, NULL);
	}
}

/* ---- start-up ---- */

static int load_move(void *arg, const struct st_rail_job_move *m)
{
	struct rsw *s = arg;
	int rc = move_job_gpu(s, m->job_id, m->old_gpu, m->new_gpu);

	if (rc == -ENOMEM)
		return rc;
	return add_move(s, m);
}

static void init_done(void *arg, const struct txn_outcome *o)
{
	struct rsw *s = arg;

	s->busy = s->starting = false;
	if (o->result == TXN_CONFIRMED && !o->store_failed && rl_load_map(s->d.rl, s->d.fs) == 0) {
		s->ready = true;
		s->why[0] = '\0';
		log_msg(LOG_NOTICE,
			"rail port map programmed: %lld rail ports joined on %zu devices "
			"(transaction %llu)",
			(long long)rl_joined(s->d.rl), o->n_devices, (unsigned long long)o->txn_id);
	} else {
		snprintf(s->why, sizeof(s->why), "programming the initial port map failed: %s",
			 o->store_failed ? o->store_error
			 : o->message	 ? o->message
					 : "");
		log_msg(LOG_ERR, "%s; restart ocsd to try again", s->why);
	}
	free(s->adds);
	s->adds = NULL;
	if (s->d.events.map_settled)
		s->d.events.map_settled(s->d.events.ctx);
	run_next(s);
}

/* Equal sorted lists of one device's cross-connects. */
static bool same_xcs(const struct sb_xc *a, size_t n_a, const struct ocs_xc *b, size_t n_b)
{
	if (n_a != n_b)
		return false;
	for (size_t i = 0; i < n_a; i++)
		if (a[i].in != b[i].in || a[i].out != b[i].out)
			return false;
	return true;
}

/*
 * Reads every device and programs, adopts or leaves alone the initial port
 * map (gpu_swaps.h). Nothing here fails ocsd's start but the store.
 */
static int init_map(struct rsw *s, const struct ocs_xc *xcs, size_t n)
{
	int groups = ocs_rail_groups(&s->r);
	bool empty = true, exact = true;
	char why[400] = "the devices hold part of the initial port map";
	size_t at = 0;
	int64_t txn;
	int rc;

	for (int d = 0; d < groups; d++) {
		struct dev_readback rb = {0};
		size_t k = at;

		while (k < n && xcs[k].group == d)
			k++;
		if (dev_read(s->d.devs, d, DEV_ROLE_TXN, &rb) != 0) {
			snprintf(s->why, sizeof(s->why), "device %s could not be read (%s)",
				 dev_name(s->d.devs, d), rb.error);
			dev_readback_clear(&rb);
			log_msg(LOG_ERR, "rail port map: %s; restart ocsd once it is reachable",
				s->why);
			return 0;
		}
		empty = empty && rb.n == 0;
		if (!same_xcs(rb.xcs, rb.n, xcs + at, k - at)) {
			exact = false;
			if (rb.n)
				snprintf(why, sizeof(why),
					 "device %s holds %zu cross-connects that are not the "
					 "initial port map (first %u->%u)",
					 dev_name(s->d.devs, d), rb.n, rb.xcs[0].in, rb.xcs[0].out);
		}
		dev_readback_clear(&rb);
		at = k;
	}
	if (!exact && !empty) {
		snprintf(s->why, sizeof(s->why),
			 "%s: ocsd never overwrites circuits it does not know (fail static); clear "
			 "the devices and restart ocsd",
			 why);
		log_msg(LOG_ERR, "rail port map: %s", s->why);
		return 0;
	}
	s->adds = calloc(n + 1, sizeof(*s->adds));
	if (!s->adds)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		s->adds[i].xc = xcs[i];
		snprintf(s->adds[i].job_id, sizeof(s->adds[i].job_id), "%s", ST_RAIL_OWNER);
	}
	if (exact && n) {
		/* The devices hold exactly the initial map: stored without touching them. */
		rc = st_intent_begin(s->d.store, ST_RAIL_OWNER, NULL, 0, s->adds, n, NULL, 0,
				     clk_wall_ms(NULL), &txn);
		if (rc == 0)
			rc = st_intent_finish(s->d.store, txn, ST_INTENT_CONFIRMED,
					      "adopted: the devices held the initial port map",
					      clk_wall_ms(NULL));
		if (rc == 0)
			rc = fs_apply(s->d.fs, NULL, 0, s->adds, n);
		if (rc == 0)
			rc = rl_load_map(s->d.rl, s->d.fs);
		free(s->adds);
		s->adds = NULL;
		if (rc)
			return rc;
		s->ready = true;
		s->why[0] = '\0';
		log_msg(LOG_NOTICE, "rail port map adopted: the devices held it (%lld rail ports)",
			(long long)rl_joined(s->d.rl));
		return 0;
	}
	s->busy = s->starting = true;
	{
		struct txn_change c = {
			.job_id = ST_RAIL_OWNER, .additions = s->adds, .n_additions = n};

		rc = s->d.txn_start(s->d.txn_ctx, &c, init_done, s, why, sizeof(why));
	}
	if (rc) {
		s->busy = s->starting = false;
		free(s->adds);
		s->adds = NULL;
		snprintf(s->why, sizeof(s->why), "programming the initial port map failed: %s",
			 why);
		log_msg(LOG_ERR, "%s; restart ocsd to try again", s->why);
	}
	return 0;
}

int gsw_start(struct rsw *s)
{
	struct rail_port_map m = {0};
	struct ocs_xc *xcs = NULL;
	size_t n = 0;
	int rc = rl_load_faults(s->d.rl, s->d.store);

	if (rc == 0)
		rc = rl_load_map(s->d.rl, s->d.fs);
	if (rc == 0)
		rc = st_rail_move_list(s->d.store, load_move, s);
	if (rc)
		return rc;
	if (rl_joined(s->d.rl) > 0) {
		s->ready = true;
		s->why[0] = '\0';
		return 0;
	}
	rc = rail_port_map_init(&m, &s->r);
	if (rc == 0)
		rc = rail_port_map_xcs(&s->r, &m, &xcs, &n);
	rail_port_map_clear(&m);
	if (rc == 0) /* sorted by (group, device, in, out): one run per device */
		rc = init_map(s, xcs, n);
	free(xcs);
	return rc;
}
