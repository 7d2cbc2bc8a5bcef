/*
 * ocsctl_dot.h - the pieces of Graphviz DOT text that `ocsctl topology`
 * writes: quoted ids and labels, and the colour of the n-th job. Kept apart
 * from the command so that a unit test checks the quoting (tests/unit/
 * test_ocsctl_dot.c). Pure functions and stdio; no state.
 */
#ifndef OCSCTL_DOT_H
#define OCSCTL_DOT_H

#include <stddef.h>
#include <stdio.h>

/* Writes s as a DOT double-quoted string: '"' and '\' escaped, a newline
 * as DOT's "\n" line break, any other control byte as '?'. NULL is "". */
void dot_quoted(FILE *f, const char *s);
/* The fill or pen colour ("#rrggbb") of the job that sorts n-th (0..);
 * the palette repeats after dot_palette_size() jobs. */
const char *dot_job_colour(size_t n);
size_t dot_palette_size(void);

#endif
