/*
 * ocs_version: the `--version` text of every ocsd program (ocs_version.h).
 * OCS_VERSION comes from CMakeLists.txt's project(); ocs_version_git() is
 * in the file cmake/GitDescribe.cmake writes at every build
 * (gen/ocs_git_describe.c in the build tree).
 */
#include "ocs_version.h"

const char *ocs_version(void)
{
	return OCS_VERSION;
}

void ocs_version_print(FILE *out, const char *prog, const char *libs)
{
	fprintf(out, "%s %s (git %s)\n", prog, OCS_VERSION, ocs_version_git());
	if (libs && *libs)
		fprintf(out, "libraries: %s\n", libs);
}
