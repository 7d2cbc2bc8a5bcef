/*
 * store_touched.c - what the changesets a copy applies change, row by row
 * (store_repl.h, struct st_touched): for a follower that updates its view
 * by the change instead of rebuilding it (follower.c). Each applied
 * changeset is walked once (sqlite3changeset_start) and the keys of the
 * rows the view holds are noted: job ids (jobs, job_figures), circuit keys
 * (circuits), and the circuits a confirm entry derives (store_repl.h:
 * the keys of its intent's rows). Tables the view does not hold are
 * skipped; any other table (drains, rings, faults, moves: small, and
 * rarely written), an image
 * loaded, more than ST_TOUCHED_MAX rows, or a note that cannot be kept
 * (out of memory) asks for a rebuild (`all`).
 *
 * Threading: as store.h (the store's thread only).
 */
#include "store_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_repl.h"

/*
 * A change of more rows than this is not noted row by row: reading each
 * again (a query per row) would cost more than rebuilding the view, and
 * the notes stay bounded whatever a log entry's size (131,072 circuits).
 */
#define ST_TOUCHED_MAX 2048

/* Tables a follower's view does not hold: changes there need no note. */
static const char *const unheld[] = {"intents",	  "intent_xcs",	      "intent_links",
				     "job_links", "intent_decisions", "intent_jobs"};

void st_touched_track(struct st_store *st, bool on)
{
	if (!on) {
		st_touched_clear(st->touched);
		free(st->touched);
		st->touched = NULL;
	} else if (!st->touched) {
		st->touched = calloc(1, sizeof(*st->touched));
	}
}

void st_touched_take(struct st_store *st, struct st_touched *out)
{
	if (!st->touched) {
		*out = (struct st_touched){.all = true};
		return;
	}
	*out = *st->touched;
	memset(st->touched, 0, sizeof(*st->touched));
}

void st_touched_clear(struct st_touched *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n_jobs; i++)
		free(t->jobs[i]);
	free(t->jobs);
	free(t->circuits);
	memset(t, 0, sizeof(*t));
}

/* Drops the row notes: the view is rebuilt. */
static void note_all(struct st_touched *t)
{
	st_touched_clear(t);
	t->all = true;
}

void st_touched_all(struct st_store *st)
{
	if (st->touched)
		note_all(st->touched);
}

/*
 * Room for entry n of size `size` in *arr, whose capacity is 8 and then
 * doubles each time n reaches it; false when out of memory.
 */
static bool grow(void **arr, size_t n, size_t size)
{
	void *bigger;

	if (n != 0 && (n < 8 || (n & (n - 1)) != 0))
		return true; /* below the capacity */
	bigger = realloc(*arr, (n ? 2 * n : 8) * size);
	if (!bigger)
		return false;
	*arr = bigger;
	return true;
}

/* Notes job id v (a text value); false when out of memory. */
static bool note_job(struct st_touched *t, sqlite3_value *v)
{
	const unsigned char *id = v ? sqlite3_value_text(v) : NULL;
	char *copy = id ? strdup((const char *)id) : NULL;

	if (!copy || !grow((void **)&t->jobs, t->n_jobs, sizeof(*t->jobs))) {
		free(copy);
		return false;
	}
	t->jobs[t->n_jobs++] = copy;
	return true;
}

/* Notes a circuit's key from the row's first three columns; false when out of memory. */
static bool note_circuit(struct st_touched *t, sqlite3_value *key[3])
{
	if (!key[0] || !key[1] || !key[2] ||
	    !grow((void **)&t->circuits, t->n_circuits, sizeof(*t->circuits)))
		return false;
	t->circuits[t->n_circuits++] = (struct ocs_xc){
		sqlite3_value_int(key[0]), sqlite3_value_int(key[1]), sqlite3_value_int(key[2]), 0};
	return true;
}

/* The row's column col as the changeset has it: its new value for an insert, else the old. */
static sqlite3_value *column(sqlite3_changeset_iter *it, int op, int col)
{
	sqlite3_value *v = NULL;

	if (op == SQLITE_INSERT)
		sqlite3changeset_new(it, col, &v);
	else
		sqlite3changeset_old(it, col, &v); /* primary keys are always there */
	return v;
}

void st_touched_note(struct st_store *st, const void *changeset, size_t len)
{
	struct st_touched *t = st->touched;
	sqlite3_changeset_iter *it = NULL;

	if (!t || t->all)
		return;
	if (sqlite3changeset_start(&it, (int)len, (void *)changeset) != SQLITE_OK) {
		note_all(t);
		return;
	}
	while (!t->all && sqlite3changeset_next(it) == SQLITE_ROW) {
		const char *table;
		int n_col, op, indirect;
		bool skip = false;

		sqlite3changeset_op(it, &table, &n_col, &op, &indirect);
		for (size_t i = 0; i < sizeof(unheld) / sizeof(unheld[0]) && !skip; i++)
			skip = strcmp(table, unheld[i]) == 0;
		if (skip)
			continue;
		if (!strcmp(table, "jobs") || !strcmp(table, "job_figures")) {
			t->all = !note_job(t, column(it, op, 0));
		} else if (!strcmp(table, "circuits") && n_col >= 3) {
			sqlite3_value *key[3] = {column(it, op, 0), column(it, op, 1),
						 column(it, op, 2)};

			t->all = !note_circuit(t, key);
		} else {
			t->all = true;
		}
		if (t->all || t->n_jobs + t->n_circuits > ST_TOUCHED_MAX)
			note_all(t);
	}
	sqlite3changeset_finalize(it);
}

void st_touched_confirm(struct st_store *st, int64_t txn_id)
{
	struct st_touched *t = st->touched;
	sqlite3_stmt *s = NULL;
	int rc = SQLITE_DONE;

	if (!t || t->all)
		return;
	if (sqlite3_prepare_v2(st->db,
			       "SELECT grp, device, in_port FROM intent_xcs WHERE txn_id = ?1", -1,
			       &s, NULL) != SQLITE_OK ||
	    sqlite3_bind_int64(s, 1, txn_id) != SQLITE_OK) {
		sqlite3_finalize(s);
		note_all(t);
		return;
	}
	while (!t->all && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		sqlite3_value *key[3] = {sqlite3_column_value(s, 0), sqlite3_column_value(s, 1),
					 sqlite3_column_value(s, 2)};

		if (!note_circuit(t, key) || t->n_jobs + t->n_circuits > ST_TOUCHED_MAX)
			note_all(t);
	}
	if (!t->all && rc != SQLITE_DONE)
		note_all(t);
	sqlite3_finalize(s);
}
