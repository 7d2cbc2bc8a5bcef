/*
 * ocs_version: what `--version` prints, the same way in every program of
 * ocsd (ocsd, ocsctl, ocsplan, ocs-devsim): the program and ocsd's version,
 * the git describe of the tree it was built from, and the libraries the
 * program links with their versions.
 *
 * Thread-safe (writes to the stream given only).
 */
#ifndef OCS_VERSION_H
#define OCS_VERSION_H

#include <stdio.h>

/* ocsd's version (the project's, from CMakeLists.txt) and the git describe
 * of the build ("not a git checkout" for a tarball). Static strings. */
const char *ocs_version(void);
const char *ocs_version_git(void);

/*
 * Prints "PROG VERSION (git DESCRIBE)" and, when libs is not empty, a
 * "libraries: LIBS" line. libs: "name version, ..." as the program knows
 * them (run time where the library says, else the version built against).
 */
void ocs_version_print(FILE *out, const char *prog, const char *libs);

#endif
