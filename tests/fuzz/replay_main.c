/*
 * replay_main.c - runs a libFuzzer harness (LLVMFuzzerTestOneInput) once
 * over each file named on the command line, or each file of each directory
 * named, without libFuzzer: the seed corpora and the inputs of crashes
 * found earlier (regressions/) become ordinary tests that every build runs,
 * gcc and ASan+UBSan included (tests/fuzz/README.md).
 */
#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Runs the harness on one file; 0, or 1 when it cannot be read. */
static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long n;

	if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
		fprintf(stderr, "replay: cannot read %s\n", path);
		if (f)
			fclose(f);
		return 1;
	}
	buf = malloc((size_t)n + 1); /* +1: a 0-byte file still gets a buffer */
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "replay: cannot read %s\n", path);
		free(buf);
		fclose(f);
		return 1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	int failures = 0, runs = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;
		DIR *d;
		struct dirent *e;

		if (stat(argv[i], &st) != 0) {
			fprintf(stderr, "replay: %s does not exist\n", argv[i]);
			failures++;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			failures += replay_file(argv[i]);
			runs++;
			continue;
		}
		d = opendir(argv[i]);
		while (d && (e = readdir(d)) != NULL) {
			char path[4096];

			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
			failures += replay_file(path);
			runs++;
		}
		if (d)
			closedir(d);
	}
	printf("replay: %d input(s), %d unreadable\n", runs, failures);
	return failures ? 1 : 0;
}
