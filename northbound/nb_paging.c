/*
 * nb_paging.c - the pages of the List calls: default page sizes, and the
 * page tokens this server hands out (`jobs-after:ID`,
 * `circuits-after:G.PA.PA.PB.PB`, `rail-ports-after:N`), written and read
 * back here for nb_validate.c's checks and the daemon's handlers alike.
 * Pure functions: no globals, no I/O; thread-safe.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "nb_internal.h"

#define JOBS_TOKEN_PREFIX	"jobs-after:"
#define CIRCUITS_TOKEN_PREFIX	"circuits-after:"
#define RAIL_PORTS_TOKEN_PREFIX "rail-ports-after:"

size_t nb_page_size(enum nb_method m, int32_t page_size)
{
	if (page_size > 0)
		return (size_t)page_size;
	return m == NB_JOBS_LIST_JOBS ? NB_LIST_JOBS_PAGE_DEFAULT : NB_LIST_CIRCUITS_PAGE_DEFAULT;
}

const char *nb_jobs_token_after(const char *page_token)
{
	if (!page_token || strncmp(page_token, JOBS_TOKEN_PREFIX, strlen(JOBS_TOKEN_PREFIX)) != 0)
		return NULL;
	return page_token + strlen(JOBS_TOKEN_PREFIX);
}

void nb_jobs_token(const char *id, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s", JOBS_TOKEN_PREFIX, id);
}

bool nb_circuits_token_after(const char *page_token, struct nb_circuit_key *key)
{
	int used = 0;

	if (!page_token ||
	    strncmp(page_token, CIRCUITS_TOKEN_PREFIX, strlen(CIRCUITS_TOKEN_PREFIX)) != 0)
		return false;
	if (sscanf(page_token + strlen(CIRCUITS_TOKEN_PREFIX),
		   "%" SCNd32 ".%" SCNd32 ".%" SCNd32 ".%" SCNd32 ".%" SCNd32 "%n", &key->group,
		   &key->pod_a, &key->port_a, &key->pod_b, &key->port_b, &used) != 5)
		return false;
	return page_token[strlen(CIRCUITS_TOKEN_PREFIX) + (size_t)used] == '\0';
}

void nb_circuits_token(const struct nb_circuit_key *key, char *buf, size_t len)
{
	snprintf(buf, len, "%s%" PRId32 ".%" PRId32 ".%" PRId32 ".%" PRId32 ".%" PRId32,
		 CIRCUITS_TOKEN_PREFIX, key->group, key->pod_a, key->port_a, key->pod_b,
		 key->port_b);
}

int nb_circuit_key_cmp(const struct nb_circuit_key *a, const struct nb_circuit_key *b)
{
	const int32_t x[5] = {a->group, a->pod_a, a->port_a, a->pod_b, a->port_b};
	const int32_t y[5] = {b->group, b->pod_a, b->port_a, b->pod_b, b->port_b};

	for (int i = 0; i < 5; i++)
		if (x[i] != y[i])
			return x[i] < y[i] ? -1 : 1;
	return 0;
}

bool nb_rail_ports_token_after(const char *page_token, int64_t *port)
{
	const char *p;
	long long v;
	int used = 0;

	if (!page_token ||
	    strncmp(page_token, RAIL_PORTS_TOKEN_PREFIX, strlen(RAIL_PORTS_TOKEN_PREFIX)) != 0)
		return false;
	p = page_token + strlen(RAIL_PORTS_TOKEN_PREFIX);
	if (*p < '0' || *p > '9' || sscanf(p, "%lld%n", &v, &used) != 1 || p[used] != '\0')
		return false;
	*port = (int64_t)v;
	return true;
}

void nb_rail_ports_token(int64_t port, char *buf, size_t len)
{
	snprintf(buf, len, "%s%lld", RAIL_PORTS_TOKEN_PREFIX, (long long)port);
}
