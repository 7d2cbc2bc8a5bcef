/*
 * test_store_fixture.h - what the state store's unit tests (test_store.c,
 * test_store_schema.c) share: a temporary directory per test holding the
 * store file, the store opened on it, collectors for the store's list
 * calls, a second plain SQLite connection to the same file, and jobs and
 * finished intents put in for a test. Every helper fails the running cmocka
 * test on an error.
 */
#ifndef OCSD_TEST_STORE_FIXTURE_H
#define OCSD_TEST_STORE_FIXTURE_H

#include <stdint.h>

#include <sqlite3.h>

#include "store.h"

struct fixture {
	char dir[64];
	char path[96];
};

/* cmocka setup and teardown: a new directory per test, removed after it. */
int setup(void **state);
int teardown(void **state);
/* st_open(path), failing the test on an error; the caller closes it. */
struct st_store *open_store(const char *path);
/* st_job_list collector: appends "id," to the char buffer ctx. */
int count_job(void *ctx, const struct st_job *job);

struct circuits {
	struct st_circuit items[16];
	int n;
};

/* st_circuit_list collector into struct circuits (counts past 16, keeps 16). */
int collect_circuit(void *ctx, const struct st_circuit *c);
/* st_intent_list_* collector: the last intent's id, job, counts and decision into ctx. */
int collect_intent(void *ctx, const struct st_intent *in);

struct links {
	struct st_link items[16];
	size_t n;
};

/* Every stored leaf-spine link (at most 16). */
struct links all_links(struct st_store *st);

/* A second, plain SQLite connection to the store's file (busy timeout 5 s). */
sqlite3 *raw_open(const char *path);
/* Runs sql on its own connection, failing the test on an error. */
void raw_exec(const char *path, const char *sql);
/* The single integer sql returns. */
long raw_long(const char *path, const char *sql);

/* Puts job id (created at 1, updated at updated_ms) into the store. */
void put_job(struct st_store *st, const char *id, const char *key, const char *state,
	     int64_t updated_ms);
/* A finished intent of job_id (confirmed at finished_ms) with one addition and one link. */
int64_t finished_intent(struct st_store *st, const char *job_id, int64_t finished_ms,
			enum st_intent_state outcome);

#endif
