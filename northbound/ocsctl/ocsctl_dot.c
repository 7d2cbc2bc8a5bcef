/*
 * ocsctl_dot.c - implementation of ocsctl_dot.h.
 */
#include "ocsctl_dot.h"

/* Twelve dark enough colours for lines on a white page, neighbours apart
 * in hue; none is the grey, green, orange or red of a device's state. */
static const char *const palette[] = {
	"#1f5fb4", "#c2187a", "#138a72", "#7b3fb0", "#b8860b", "#0f9fc0",
	"#8b4513", "#5a6e00", "#d0409a", "#2e3f8f", "#6f8fcf", "#a0522d",
};

void dot_quoted(FILE *f, const char *s)
{
	putc('"', f);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			putc('\\', f);
			putc(c, f);
		} else if (c == '\n') {
			fputs("\\n", f);
		} else if (c < 0x20 || c == 0x7f) {
			putc('?', f);
		} else {
			putc(c, f);
		}
	}
	putc('"', f);
}

const char *dot_job_colour(size_t n)
{
	return palette[n % dot_palette_size()];
}

size_t dot_palette_size(void)
{
	return sizeof(palette) / sizeof(palette[0]);
}
