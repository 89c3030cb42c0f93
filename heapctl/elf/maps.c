/*
 * heapctl/elf/maps.c - the one reader of /proc/PID/maps (elf.h): the line
 * parse that inject, stacks, the report (and a dump's MAPPED_LIBRARIES),
 * symbolize and the process checks of doctor and systemd share.
 *
 * What another process's /proc shows is untrusted text: a line is taken
 * only when its fields parse, and a path is kept as written (it may hold
 * spaces, and " (deleted)").  Lines are read whole (getline): a path of
 * PATH_MAX bytes does not split one into two.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "elf/elf.h"

bool el_map_parse(const char *s, el_map_t *m)
{
	unsigned long long lo, hi, off;
	int devpos = -1, pathpos = -1;
	*m = (el_map_t){ .path = "" };
	if (sscanf(s, "%llx-%llx %7s %llx %n%*s %*s %n", &lo, &hi, m->perms, &off, &devpos, &pathpos) < 4 || hi <= lo)
		return false;
	m->lo = lo, m->hi = hi, m->offset = off;
	if (devpos >= 0)
		m->has_ino = sscanf(s + devpos, "%x:%x %" SCNu64, &m->dev_major, &m->dev_minor, &m->ino) == 3;
	if (pathpos >= 0)
		m->path = s + pathpos;
	return true;
}

int el_maps_each(int pid, el_maps_fn *fn, void *arg)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/maps", pid);
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return -1;
	char *line = NULL;
	size_t cap = 0;
	bool more = true;
	while (more && getline(&line, &cap, f) > 0) {
		line[strcspn(line, "\n")] = 0;
		el_map_t m;
		if (el_map_parse(line, &m))
			more = fn(&m, arg);
	}
	free(line);
	fclose(f);
	return 0;
}
