/*
 * heapctl/cli/outfile.h - writing an output file safely: report's --svg,
 * --pprof, --symbolize and chart files and dump's -o, in the control
 * binary (the report engine, heapctl/report/, uses the same functions).
 */
#ifndef HC_OUTFILE_H
#define HC_OUTFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* outfile.c: writing an output file safely, also as root into a
 * world-writable directory.  "-" is standard output.  An existing FIFO or
 * character device (/dev/null) is written in place, opened without
 * blocking (a FIFO nobody reads is an error, not a hang); any other
 * non-regular file is refused, never replaced.  Otherwise the file is
 * written under a temporary name in its directory and renamed over the
 * name when complete, so a failure leaves what was there.  A symlink as
 * the last component is followed only where the kernel's
 * protected_symlinks rule would: not in a sticky world-writable directory
 * (/tmp) when someone other than the caller or the directory's owner
 * owns the link; elsewhere it is followed to what it names. */
typedef struct rp_out_s {
	int fd;           /* to write; the caller closes it            */
	const char *path; /* as given, for messages                    */
	int dirfd;        /* the directory renamed in, or -1           */
	char *base;       /* the name replaced in dirfd                */
	char *tmp;        /* the temporary name in dirfd, NULL: in place */
} rp_out_t;

/* Returns 0, or -1 with "cannot write PATH: why" in err. */
int rp_out_open(rp_out_t *o, const char *path, char *err, size_t errlen);
/* After the caller closed o->fd: error 0 puts the file in place; an errno
 * (with why, if not NULL, as its text) removes the temporary.  Returns 0,
 * or -1 with "cannot write PATH: why" in err. */
int rp_out_finish(rp_out_t *o, int error, const char *why, char *err, size_t errlen);
/* Put the file in place as base (a name in the same directory) only if
 * nothing has that name (RENAME_NOREPLACE, else a hard link): 0 (the
 * temporary is gone; rp_out_finish then only closes), EEXIST (the
 * temporary is kept, for another name), or the errno of the failure.  A
 * file written in place (a FIFO) is in place already: 0. */
int rp_out_place_new(rp_out_t *o, const char *base);
/* Open path as above, hand it to write as a stdio stream, and put it in
 * place when write returns 0 (else errno says why it failed).  Returns 0,
 * or -1 with "cannot write PATH: why" in err. */
int rp_out_stream(const char *path, int (*write)(FILE *f, const void *arg), const void *arg, char *err, size_t errlen);

/* Copy what is left of in to out, retrying short writes and EINTR.
 * Returns 0 or the errno of the read or write that failed. */
int rp_copy_fd(int in, int out);
/* All n bytes of p to fd: 0, or the errno of the failed write. */
int rp_write_all(int fd, const void *p, size_t n);

#endif
