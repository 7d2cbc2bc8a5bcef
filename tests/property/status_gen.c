/*
 * status_gen.c - random status-page snapshots rendered to files, for
 * test_status_property.py: the renderers of daemon/status/ are run here,
 * and their output is judged by Python's own parsers there.
 *
 * usage: status_gen DIR SEED COUNT
 * Writes DIR/K.json and DIR/K.svg for K in 0..COUNT-1, snapshot K made
 * from seed SEED + K (the checker names K and the seed to replay one).
 * Snapshots: any fabric kind, empty ones included; names mixing XML and
 * JSON specials (< & " ' >), non-ASCII UTF-8, bytes that are not UTF-8 and
 * control characters, UTF-16 surrogates and overlong forms; random device states, ring
 * changes and a ring domain's bundle drift (some nodes out of range); sometimes more
 * circuits than SP_MAX_CIRCUIT_PATHS or more devices than SP_MAX_MARKS. Exit 0, or 1 when a
 * renderer returned NULL or a file could not be written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"

/* A name is at most 5 parts of at most 3 bytes. */
#define GEN_NAME_BYTES 16

static unsigned long long rng;

static unsigned rnd(unsigned n)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return n ? (unsigned)((rng >> 33) % n) : 0;
}

/* A random name into buf (GEN_NAME_BYTES). */
static void gen_name(char *buf)
{
	static const char *const parts[] = {"a",
					    "b",
					    "7",
					    "<",
					    "&",
					    "\"",
					    "'",
					    ">",
					    "-",
					    "é",
					    "ß",
					    "\xff",
					    "\x01",
					    " ",
					    "ocs",
					    "job",
					    "\xed\xa0\x80" /* a surrogate */,
					    "\xe0\x80\x80" /* overlong */};
	size_t n = rnd(6), at = 0;

	for (size_t i = 0; i < n; i++) {
		const char *p = parts[rnd(sizeof(parts) / sizeof(parts[0]))];

		memcpy(buf + at, p, strlen(p));
		at += strlen(p);
	}
	buf[at] = '\0';
}

static int write_file(const char *dir, unsigned k, const char *ext, const char *text)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%u.%s", dir, k, ext);
	f = fopen(path, "w");
	if (!f || fputs(text, f) < 0) {
		if (f)
			fclose(f);
		return -1;
	}
	return fclose(f);
}

static const char *pick(const char *const *v, size_t n)
{
	return v[rnd((unsigned)n)];
}

static int one(const char *dir, unsigned k, unsigned long long seed)
{
	static const char *const sessions[] = {"connecting", "connected", "disconnected"};
	static const char *const healths[] = {"unknown", "healthy", "unreachable"};
	static const char *const states[] = {"PENDING", "ACTIVE", "FAILED", "RELEASED"};
	static const char *const changes[] = {"placed", "bypassed", "bypass-extended", "lost"};
	static const char *const settings[] = {"loopback", "external 1 up", "external 3 down"};
	struct sp_snapshot s = {0};
	size_t n_dev = rnd(4) == 0 ? 0 : rnd(3) == 0 ? SP_MAX_MARKS + rnd(1000) : rnd(40);
	size_t n_jobs = rnd(3) == 0 ? 0 : rnd(8) == 0 ? 20 + rnd(40) : rnd(20);
	size_t n_rings = rnd(30);
	char(*names)[GEN_NAME_BYTES] = calloc(n_dev + n_jobs + 2, sizeof(*names));
	struct sp_device *devs = calloc(n_dev + 1, sizeof(*devs));
	struct sp_job *jobs = calloc(n_jobs + 1, sizeof(*jobs));
	struct sp_ring *rings = calloc(n_rings + 1, sizeof(*rings));
	int *ring_nodes = calloc(n_rings * 8 + 1, sizeof(*ring_nodes)), faulty[16];
	int64_t gpus[16];
	struct sp_bundle_drift drift[16];
	struct sp_event events[4];
	char *json = NULL, *svg = NULL;
	int rc = -1;

	rng = seed;
	if (!names || !devs || !jobs || !rings || !ring_nodes)
		goto out;
	s.kind = (enum sp_kind)rnd(3);
	gen_name(names[0]);
	gen_name(names[1]);
	s.name = names[0];
	s.role = rnd(2) ? "leader" : "follower";
	s.leader = names[1];
	s.now_ms = 1700000000000LL + rnd(1000000);
	s.pods = rnd(4) == 0 ? 0 : rnd(3) == 0 ? SP_MAX_MARKS + (int)rnd(600) : 1 + (int)rnd(16);
	s.groups = (int)rnd(8);
	s.nodes = rnd(3) == 0 ? (int)rnd(2000) : (int)rnd(64);
	s.closed = rnd(2);
	s.servers = (int)rnd(rnd(3) == 0 ? 2000 : 16);
	s.rails = (int)rnd(9);
	for (size_t i = 0; i < n_dev; i++) {
		gen_name(names[2 + i]);
		devs[i] = (struct sp_device){names[2 + i],
					     (int)rnd(8) - 1,
					     pick(sessions, 3),
					     pick(healths, 3),
					     rnd(2) ? "" : "a <b>",
					     rnd(4) == 0,
					     rnd(3) == 0 ? rnd(5) : 0};
	}
	for (size_t j = 0; j < n_jobs; j++) {
		size_t n = rnd(8) == 0 ? SP_MAX_CIRCUIT_PATHS / 2 + rnd(SP_MAX_CIRCUIT_PATHS)
				       : rnd(40);
		struct sp_circuit *c = calloc(n + 1, sizeof(*c));

		if (!c)
			goto out;
		gen_name(names[2 + n_dev + j]);
		for (size_t i = 0; i < n; i++) {
			int pods = s.pods > 0 ? s.pods : 1;

			c[i] = (struct sp_circuit){(int)rnd((unsigned)n_dev + 2) - 1, (int)rnd(64),
						   (int)rnd(64), (int)rnd((unsigned)pods + 1) - 1,
						   (int)rnd((unsigned)pods + 1) - 1};
		}
		jobs[j] = (struct sp_job){
			names[2 + n_dev + j], pick(states, 4), rnd(2) ? "" : "x&y", rnd(100), c, n};
	}
	for (size_t r = 0; r < n_rings; r++) {
		size_t m = rnd(8);

		for (size_t i = 0; i < m; i++)
			ring_nodes[r * 8 + i] = s.nodes > 0 ? (int)rnd((unsigned)s.nodes) : 0;
		rings[r] = (struct sp_ring){n_jobs ? jobs[rnd((unsigned)n_jobs)].id : "lone",
					    (int)r,
					    ring_nodes + r * 8,
					    m,
					    pick(changes, 4),
					    (int)rnd(10) - 1};
	}
	for (size_t i = 0; i < 16; i++) {
		faulty[i] = s.nodes > 0 ? (int)rnd((unsigned)s.nodes) : 0;
		gpus[i] = (int64_t)rnd((unsigned)(s.servers * s.rails + 1));
		/* nodes in range, but for one in eight: a renderer must not trust them */
		drift[i] = (struct sp_bundle_drift){
			rnd(8) ? faulty[i] : (int)rnd(4000) - 1000,
			(int)rnd(2),
			n_jobs && rnd(2) ? jobs[rnd((unsigned)n_jobs)].id : "",
			pick(settings, 3),
			pick(settings, 3),
			(int)rnd(10) - 1};
	}
	for (size_t i = 0; i < 4; i++)
		events[i] = (struct sp_event){s.now_ms - 1000 * (int64_t)(4 - i), names[0]};
	s.devices = devs;
	s.n_devices = n_dev;
	s.jobs = jobs;
	s.n_jobs = n_jobs;
	s.rings = s.kind == SP_RING ? rings : NULL;
	s.n_rings = s.kind == SP_RING ? n_rings : 0;
	s.faulty_nodes = faulty;
	s.n_faulty_nodes = s.kind == SP_RING && s.nodes > 0 ? rnd(16) : 0;
	s.bundle_drift = drift;
	s.n_bundle_drift = s.kind == SP_RING ? rnd(17) : 0;
	s.faulty_gpus = gpus;
	s.n_faulty_gpus = s.kind == SP_RAIL ? rnd(16) : 0;
	s.events = events;
	s.n_events = rnd(5);
	json = sp_state_json(&s, NULL);
	svg = sp_topology_svg(&s, NULL);
	if (!json || !svg) {
		fprintf(stderr, "instance %u (seed %llu): a renderer returned NULL\n", k, seed);
		goto out;
	}
	rc = write_file(dir, k, "json", json) || write_file(dir, k, "svg", svg) ? -1 : 0;
out:
	for (size_t j = 0; jobs && j < n_jobs; j++)
		free(jobs[j].circuits);
	free(json);
	free(svg);
	free(names);
	free(devs);
	free(jobs);
	free(rings);
	free(ring_nodes);
	return rc;
}

int main(int argc, char **argv)
{
	unsigned long long seed;
	unsigned count;

	if (argc != 4) {
		fprintf(stderr, "usage: status_gen DIR SEED COUNT\n");
		return 2;
	}
	seed = strtoull(argv[2], NULL, 10);
	count = (unsigned)strtoul(argv[3], NULL, 10);
	for (unsigned k = 0; k < count; k++)
		if (one(argv[1], k, seed + k) != 0)
			return 1;
	return 0;
}
