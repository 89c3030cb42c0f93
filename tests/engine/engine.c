/*
 * tests/engine/engine.c - the report engine's parts on their own
 * (heapctl/report/), without the command in front of them:
 *   - the reader: a heap_v2 profile's stacks, counts, threads and maps; a
 *     bad line is refused as PATH:LINE; a symbolized profile's section;
 *   - symfile: names applied from the section, innermost first, with
 *     file:line; written back, the same section;
 *   - series: the ranking (only-grew first, by growth) and its counts;
 *   - ehframe: the function that holds an address of this very program,
 *     from its unwind tables, is where the function starts;
 *   - elf/: maps lines (a path with spaces, none, a dump's short line,
 *     garbage) parsed field by field; this process's own maps hold this
 *     program; libc's dlopen found in its .dynsym where the loader put
 *     it, and an undefined symbol (at a PLT entry) never; libc's build id
 *     as libdw reads it; this program's program headers the same from its
 *     file and from its memory; a section by name and a missing one;
 *   - the one hash index: ids in order, found again after growing, keys
 *     with the same hash told apart;
 *   - the JSON writer every --json uses: its three layouts, escapes, null;
 *   - interned strings: one pointer per string;
 *   - pinflate: a zlib stream inflated in two parts gives zlib's bytes.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <gelf.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <pthread.h>
#include <unistd.h>
#include <zlib.h>

#include "../lib/check.h"
#include "rp_internal.h"
#include "cli/json.h"
#include "elf/elf.h"

/* text as a file the reader opens by name */
static const char *file_of(const char *text, char *path, size_t len)
{
	int fd = memfd_create("profile", 0);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		abort();
	snprintf(path, len, "/proc/self/fd/%d", fd);
	return path;
}

static const char v2[] = "heap_v2/524288\n"
                         "  t*: 3: 3072 [5: 5120]\n"
                         "  t0: 2: 2048 [3: 3072]\n"
                         "  t1: 1: 1024 [2: 2048]\n"
                         "@ 0x401010 0x401020 0x7f0000001000\n"
                         "  t*: 2: 2048 [3: 3072]\n"
                         "  t0: 2: 2048 [3: 3072]\n"
                         "@ 0x401030 0x401020\n"
                         "  t*: 1: 1024 [2: 2048]\n"
                         "  t1: 1: 1024 [2: 2048] worker\n"
                         "\n"
                         "MAPPED_LIBRARIES:\n"
                         "00400000-00402000 r-xp 00000000 00:00 1 /usr/bin/prog\n"
                         "7f0000000000-7f0000010000 r-xp 00000000 00:00 2 /usr/lib/libx.so\n";

static void test_read(void)
{
	char path[64], err[512];
	rp_raw_t raw;
	CHECK(rp_read(file_of(v2, path, sizeof path), &raw, 0, err, sizeof err) == 0, "read: %s", err);
	CHECK(raw.nstacks == 2 && raw.algorithm == 2 && raw.prof.period == 524288, "stacks %zu alg %d", raw.nstacks,
	    raw.algorithm);
	CHECK(raw.prof.nlocs == 4, "distinct addresses: %zu", raw.prof.nlocs);
	CHECK(raw.prof.nmaps == 2 && !strcmp(raw.prof.maps[1].path, "/usr/lib/libx.so"), "maps");
	CHECK(raw.stacks[0].n == 3 && raw.stacks[0].all.c[RP_INUSE_SPACE] == 2048, "first stack");
	CHECK(raw.stacks[1].nthr == 1 && raw.stacks[1].thr[0].thread == 1, "a thread line with a name");
	/* the same address in two stacks is one location */
	CHECK(raw.stacks[0].loc[1] == raw.stacks[1].loc[1], "0x401020 twice, one location");
	CHECK(!raw.symbolized && raw.text == NULL, "plain, no text kept");

	static const char bad[] = "heap_v2/524288\n  t*: 1: 1 [0: 0]\n@ 0x10 zz\n";
	CHECK(rp_read(file_of(bad, path, sizeof path), &raw, 0, err, sizeof err) != 0, "bad address read");
	char want[128];
	snprintf(want, sizeof want, "%s:3: ", path);
	CHECK(!strncmp(err, want, strlen(want)) && !strchr(err, '\n'), "one line, PATH:LINE: '%s'", err);
}

static void test_symfile(void)
{
	char path[64], err[512];
	char text[4096];
	snprintf(text, sizeof text,
	    "--- symbol\nbinary=/usr/bin/prog\n"
	    "0x0000000000401010 leaf_fn\n"
	    "0x000000000040101f outer--inner\n"
	    "#lines 0x000000000040101f\tprog.c:10\tprog.h:3\n"
	    "---\n--- heap\n%s",
	    v2);
	rp_raw_t raw;
	CHECK(rp_read(file_of(text, path, sizeof path), &raw, RP_READ_TEXT, err, sizeof err) == 0, "%s", err);
	CHECK(raw.symbolized && raw.nsyms == 2 && !strcmp(raw.binary, "/usr/bin/prog"), "section");
	CHECK(raw.textlen == strlen(v2) && !memcmp(raw.text, v2, raw.textlen), "the profile's text kept");
	rp_symbols_apply(&raw);
	const rp_loc_t *l = NULL;
	for (size_t i = 0; i < raw.prof.nlocs; i++)
		if (raw.prof.locs[i].addr == 0x401020)
			l = &raw.prof.locs[i];
	CHECK(l && l->nframes == 2, "0x401020 (a caller: looked up at 0x40101f) has 2 frames");
	if (l && l->nframes == 2) {
		CHECK(!strcmp(l->frames[0].func, "inner") && !strcmp(l->frames[1].func, "outer"),
		    "innermost first: %s, %s", l->frames[0].func, l->frames[1].func);
		CHECK(l->frames[0].line == 3 && !strcmp(l->frames[0].file, "prog.h"), "inner's line");
		CHECK(l->frames[1].line == 10, "outer's line %d", l->frames[1].line);
	}
	char *out = NULL;
	size_t outlen = 0;
	FILE *f = open_memstream(&out, &outlen);
	CHECK(rp_symbols_write(&raw, f) == 0, "write");
	fclose(f);
	CHECK(strstr(out, "0x000000000040101f outer--inner\n#lines 0x000000000040101f\tprog.c:10\tprog.h:3\n") != NULL,
	    "written back: %.300s", out);
	CHECK(strstr(out, "---\n--- heap\nheap_v2/524288\n") != NULL, "then the profile");
	free(out);
}

static void test_series(void)
{
	const char *site[] = { "cache", "leak", "flat", "never", "warmup" };
	/* 4 dumps */
	double v[] = {
		10, 30, 20, 40, /* cache: grew 2, shrank 1, +30 */
		1, 2, 3, 4,     /* leak: grew 3, never shrank, +3 */
		5, 5, 5, 5,     /* flat */
		0, 0, 0, 0,     /* never: left out */
		1, 3, 3, 3,     /* warmup: grew once, then levelled off, +2 */
	};
	int64_t t[] = { 1, 2, 3, 4 };
	double total[] = { 0, 0, 0, 0 };
	const char *p[] = { "a", "b", "c", "d" };
	rp_series_t s = { .ndumps = 4, .nsites = 5, .path = p, .time_ns = t, .total = total, .site = site, .v = v };
	size_t n;
	rp_trend_t *r = rp_series_rank(&s, &n);
	CHECK(n == 4, "sites ever non-zero: %zu", n);
	CHECK(!strcmp(site[r[0].site], "leak") && r[0].only_grew && r[0].grew == 3, "the leak first");
	CHECK(!strcmp(site[r[1].site], "cache") && !r[1].only_grew && r[1].shrank == 1 && r[1].growth == 30,
	    "then the cache by growth");
	/* grew and never shrank, but not in every interval: no suspect (the
	 * rule watch --leaks and serve --leaks apply) */
	CHECK(!strcmp(site[r[2].site], "warmup") && !r[2].only_grew && r[2].grew == 1 && r[2].shrank == 0,
	    "then the site that levelled off");
	CHECK(!strcmp(site[r[3].site], "flat") && r[3].growth == 0 && r[3].peak == 5, "then flat");
}

static __attribute__((noinline)) int some_function(int x)
{
	int y = x * 3;
	__asm__ volatile("" : "+r"(y));
	return y + 1;
}

typedef struct fdes_s {
	uint64_t fn, found_len;
	size_t n;
} fdes_t;

static void count_fde(uint64_t start, uint64_t len, uint64_t off, void *arg)
{
	fdes_t *f = arg;
	(void)off;
	f->n++;
	if (start == f->fn)
		f->found_len = len;
}

static void test_ehframe(void)
{
	Dl_info di;
	CHECK(dladdr((void *)some_function, &di) != 0, "dladdr");
	elf_version(EV_CURRENT);
	int fd = open("/proc/self/exe", O_RDONLY);
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	el_ehtab_t t = { 0 };
	size_t size = 0;
	const char *img = elf_rawfile(e, &size);
	el_eh_build(img, size, &t, rp_alloc);
	CHECK(t.n > 3, "FDEs in the table: %zu", t.n);
	uint64_t fn = (uint64_t)(uintptr_t)some_function - (uint64_t)(uintptr_t)di.dli_fbase;
	uint64_t start = 0;
	CHECK(el_eh_function(&t, fn + 3, &start) && start == fn,
	    "the function holding fn+3 starts at fn "
	    "(0x%llx, got 0x%llx)",
	    (unsigned long long)fn, (unsigned long long)start);
	CHECK(!el_eh_function(&t, 8, &start), "nothing in the ELF header");
	/* the same function among the FDEs of .eh_frame, walked whole */
	fdes_t fdes = { .fn = fn };
	el_eh_fdes(t.eh, t.eh_size, t.eh_addr, count_fde, &fdes);
	CHECK(fdes.n >= t.n && fdes.found_len > 3,
	    "every FDE of .eh_frame walked (%zu, the table has %zu), fn's "
	    "among them, longer than 3 bytes (%llu)",
	    fdes.n, t.n, (unsigned long long)fdes.found_len);
	elf_end(e);
	close(fd);
}

static bool count_maps(const el_map_t *m, void *arg)
{
	const char **want = arg;
	if (el_map_exec_file(m) && strstr(m->path, want[0]))
		want[1] = "found";
	return true;
}

static void test_elf(void)
{
	el_map_t m;
	CHECK(el_map_parse("7f0000001000-7f0000003000 r-xp 00002000 08:01 1234   /usr/lib/a b.so (deleted)", &m) &&
	        m.lo == 0x7f0000001000 && m.hi == 0x7f0000003000 && m.offset == 0x2000 && !strcmp(m.perms, "r-xp") &&
	        m.has_ino && m.dev_major == 8 && m.dev_minor == 1 && m.ino == 1234 &&
	        !strcmp(m.path, "/usr/lib/a b.so (deleted)") && el_map_exec_file(&m),
	    "a maps line, field by field");
	CHECK(el_map_parse("1000-2000 rw-p 00000000 00:00 0", &m) && m.path[0] == 0 && m.has_ino &&
	        !el_map_exec_file(&m),
	    "an anonymous mapping: no path");
	CHECK(el_map_parse("1000-2000 r-xp 0", &m) && !m.has_ino && m.path[0] == 0, "a short line: range and offset");
	CHECK(!el_map_parse("2000-1000 r-xp 0 00:00 0 /x", &m) && !el_map_parse("Rss: 4 kB", &m) &&
	        !el_map_parse("", &m),
	    "not maps lines: an empty range, smaps' Rss, nothing");
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	exe[n > 0 ? n : 0] = 0;
	const char *want[2] = { exe, NULL };
	CHECK(el_maps_each(getpid(), count_maps, want) == 0 && want[1], "this program in its own maps");
	CHECK(el_maps_each(0x3fffffff, count_maps, want) == -1 && errno == ENOENT, "no such process: ENOENT");

	Dl_info di;
	void *dlopen_at = dlsym(RTLD_DEFAULT, "dlopen");
	CHECK(dlopen_at && dladdr(dlopen_at, &di) != 0, "dladdr of dlopen");
	el_file_t f;
	CHECK(el_file_map(di.dli_fname, &f), "%s mapped", di.dli_fname);
	static const char *const names[] = { "dlopen", "no_such_function_here" };
	uint64_t value[2], size[2];
	CHECK(el_symbols(f.p, f.size, SHT_DYNSYM, names, 2, value, size) &&
	        value[0] == (uint64_t)(uintptr_t)dlopen_at - (uint64_t)(uintptr_t)di.dli_fbase && size[0] > 0 &&
	        value[1] == 0,
	    "dlopen in %s's .dynsym where the loader put it", di.dli_fname);
	el_section_t sec;
	CHECK(el_section(f.p, f.size, ".dynsym", &sec) && sec.sh.sh_type == SHT_DYNSYM && sec.data,
	    "its .dynsym by name");
	CHECK(!el_section(f.p, f.size, ".no_such_section", &sec) && !el_section(exe, strlen(exe), ".dynsym", &sec),
	    "no section of that name; no ELF image");
	/* libc's build id and this program's, as libdw reads them */
	char hex[129], want_hex[129] = "";
	const void *id;
	int fd = open(di.dli_fname, O_RDONLY);
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	ssize_t idlen = e ? dwelf_elf_gnu_build_id(e, &id) : -1;
	for (ssize_t k = 0; k < idlen; k++)
		snprintf(want_hex + 2 * k, 3, "%02x", ((const unsigned char *)id)[k]);
	CHECK(idlen > 0 && el_build_id(f.p, f.size, hex) && !strcmp(hex, want_hex),
	    "libc's build id %s, "
	    "libdw's %s",
	    hex, want_hex);
	elf_end(e);
	close(fd);
	el_file_unmap(&f);
	CHECK(el_file_map("/proc/self/exe", &f) && el_build_id(f.p, f.size, hex) && strlen(hex) >= 4 &&
	        !el_build_id(f.p, 64, hex),
	    "this program's build id; none in its first 64 bytes");
	el_file_unmap(&f);

	Elf64_Ehdr eh, meh;
	Elf64_Phdr ph[255], mph[255];
	int mem = open("/proc/self/mem", O_RDONLY);
	fd = open("/proc/self/exe", O_RDONLY);
	CHECK(dladdr((void *)some_function, &di) != 0, "dladdr");
	int nf = el_phdrs(fd, 0, &eh, ph, 255), nm = el_phdrs(mem, (uint64_t)(uintptr_t)di.dli_fbase, &meh, mph, 255);
	CHECK(nf > 0 && nf == nm && !memcmp(ph, mph, (size_t)nf * sizeof *ph),
	    "program headers: %d in the file, "
	    "%d in memory, the same",
	    nf, nm);
	CHECK(el_phdrs(fd, 1, &eh, ph, 255) == -1, "no ELF header at offset 1");
	close(fd);
	close(mem);
}

/* el_symbols on an image made here: a .dynsym with malloc undefined at a
 * PLT address (what a -fno-pic -no-pie program that takes malloc's address
 * has: trace must not probe that stub), free defined and strlen an IFUNC
 * (found, but not with EL_SYM_NO_IFUNC: trace's uprobes would take the
 * resolver); then the same image with malloc defined, to show it is read. */
static void test_symbols_undef(void)
{
	struct {
		Elf64_Ehdr eh;
		Elf64_Sym sym[4];
		char dynstr[24];
		char shstr[32];
		Elf64_Shdr sh[4];
	} img;
	memset(&img, 0, sizeof img);
	memcpy(img.eh.e_ident, ELFMAG, SELFMAG);
	img.eh.e_ident[EI_CLASS] = ELFCLASS64;
	img.eh.e_ident[EI_DATA] = ELFDATA2LSB;
	img.eh.e_shoff = offsetof(__typeof__(img), sh);
	img.eh.e_shentsize = sizeof(Elf64_Shdr);
	img.eh.e_shnum = 4;
	img.eh.e_shstrndx = 3;
	memcpy(img.dynstr, "\0malloc\0free\0strlen", 20);
	memcpy(img.shstr, "\0.dynsym\0.dynstr\0.shstrtab", 27);
	img.sym[1] = (Elf64_Sym){ .st_name = 1,
		.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC),
		.st_shndx = SHN_UNDEF,
		.st_value = 0x401040 };
	img.sym[2] = (Elf64_Sym){ .st_name = 8,
		.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC),
		.st_shndx = 1,
		.st_value = 0x1234,
		.st_size = 16 };
	img.sym[3] = (Elf64_Sym){ .st_name = 13,
		.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_GNU_IFUNC),
		.st_shndx = 1,
		.st_value = 0x2000,
		.st_size = 8 };
	img.sh[1] = (Elf64_Shdr){ .sh_name = 1,
		.sh_type = SHT_DYNSYM,
		.sh_link = 2,
		.sh_entsize = sizeof(Elf64_Sym),
		.sh_offset = offsetof(__typeof__(img), sym),
		.sh_size = sizeof img.sym };
	img.sh[2] = (Elf64_Shdr){ .sh_name = 9,
		.sh_type = SHT_STRTAB,
		.sh_offset = offsetof(__typeof__(img), dynstr),
		.sh_size = sizeof img.dynstr };
	img.sh[3] = (Elf64_Shdr){ .sh_name = 17,
		.sh_type = SHT_STRTAB,
		.sh_offset = offsetof(__typeof__(img), shstr),
		.sh_size = sizeof img.shstr };
	static const char *const names[] = { "malloc", "free", "strlen" };
	uint64_t value[3];
	CHECK(el_symbols(&img, sizeof img, SHT_DYNSYM, names, 3, value, NULL) && value[0] == 0 && value[1] == 0x1234 &&
	        value[2] == 0x2000,
	    "an undefined malloc (at its PLT entry) is not taken: %#" PRIx64 ", free %#" PRIx64
	    ", the IFUNC strlen %#" PRIx64,
	    value[0], value[1], value[2]);
	CHECK(el_symbols(&img, sizeof img, SHT_DYNSYM | EL_SYM_NO_IFUNC, names, 3, value, NULL) && value[1] == 0x1234 &&
	        value[2] == 0,
	    "EL_SYM_NO_IFUNC: free %#" PRIx64 ", not the IFUNC %#" PRIx64, value[1], value[2]);
	img.sym[1].st_shndx = 1;
	CHECK(el_symbols(&img, sizeof img, SHT_DYNSYM, names, 2, value, NULL) && value[0] == 0x401040,
	    "defined, it is: %#" PRIx64, value[0]);
}

static uint64_t keys[200000];

static bool same_key(const void *ctx, uint32_t id)
{
	return keys[id] == *(const uint64_t *)ctx;
}

/* the one index: ids in the order added, found again after growing, and
 * keys that share a hash (here: every key's hash is the same mod 16) told
 * apart by the equality test */
static void test_index(void)
{
	rp_index_t ix = { 0 };
	bool added;
	size_t n = 0, bad = 0;
	for (uint64_t k = 0; k < 200000; k++) {
		uint64_t key = k * 7919 + 3;
		uint64_t h = k < 1000 ? 42 : rp_hash_u64(key); /* the first 1000 collide */
		int64_t id = rp_index_find(&ix, h, same_key, &key, &added);
		if (id != (int64_t)n || !added)
			bad++;
		keys[n++] = key;
	}
	CHECK(bad == 0, "%zu keys not given the next id", bad);
	for (uint64_t k = 0; k < 200000; k += 7) {
		uint64_t key = k * 7919 + 3;
		uint64_t h = k < 1000 ? 42 : rp_hash_u64(key);
		int64_t id = rp_index_find(&ix, h, same_key, &key, &added);
		if (id != (int64_t)k || added)
			bad++;
	}
	CHECK(bad == 0, "%zu keys not found again at their id", bad);
	CHECK(ix.n == 200000 && ix.nslot >= 2 * ix.n, "n %zu, slots %zu (at most half full)", ix.n, ix.nslot);
	rp_index_free(&ix);
	CHECK(ix.slot == NULL && ix.n == 0, "freed");
}

/* the JSON writer (heapctl/cli/json.c), which every --json goes through */
static void test_json(void)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	json_t j;
	json_begin(&j, f, JSON_LINE);
	json_obj(&j, NULL);
	json_str(&j, "s", "a\"b\\c\n\x01");
	json_i64(&j, "i", -3);
	json_int(&j, "t", -0.4);
	json_int(&j, "inf", 1.0 / 0.0);
	json_null(&j, "n");
	json_arr(&j, "a");
	json_u64(&j, NULL, 1);
	json_obj(&j, NULL);
	json_bool(&j, "b", true);
	json_end(&j);
	json_end(&j);
	json_end(&j);
	json_begin(&j, f, JSON_PRETTY);
	json_obj(&j, NULL);
	json_str(&j, "k", "v");
	json_arr(&j, "x");
	json_u64(&j, NULL, 2);
	json_end(&j);
	json_end(&j);
	json_begin(&j, f, JSON_PRETTY);
	json_arr(&j, NULL);
	json_end(&j);
	json_begin(&j, f, JSON_COMPACT); /* heapctl trace's events */
	json_obj(&j, NULL);
	json_str(&j, "event", "alloc");
	json_u64(&j, "tid", 7);
	json_arr(&j, "frames");
	json_str(&j, NULL, "0x1");
	json_str(&j, NULL, "0x2");
	json_end(&j);
	json_end(&j);
	fclose(f);
	const char *want = "{\"s\": \"a\\\"b\\\\c\\n\\u0001\", \"i\": -3, \"t\": 0, \"inf\": null, \"n\": null, "
	                   "\"a\": [1, {\"b\": true}]}\n"
	                   "{\n  \"k\": \"v\",\n  \"x\": [2]\n}\n"
	                   "[]\n"
	                   "{\"event\":\"alloc\",\"tid\":7,\"frames\":[\"0x1\",\"0x2\"]}\n";
	CHECK(!strcmp(out, want), "json:\n%s\nwanted:\n%s", out, want);
	free(out);
}

/* ---- pinflate.c: one zlib stream, inflated in two parts ---------------- */

typedef struct {
	rp_split_t *sp;
	int part;
} split_arg_t;

static void *split_part(void *arg)
{
	split_arg_t *a = arg;
	rp_split_run(a->sp, a->part);
	return NULL;
}

/* order: 0 part 0 then 1, 1 part 1 then 0, 2 both at once */
static int split_inflate(const unsigned char *z, size_t zlen, unsigned char *out, size_t size, int order)
{
	memset(out, 0xee, size);
	rp_split_t *sp = rp_split_new(z, zlen, out, size);
	if (sp == NULL)
		return -2;
	if (order == 2) {
		pthread_t t;
		split_arg_t a = { sp, 1 };
		if (pthread_create(&t, NULL, split_part, &a) != 0)
			abort();
		rp_split_run(sp, 0);
		pthread_join(t, NULL);
	} else {
		rp_split_run(sp, order);
		rp_split_run(sp, !order);
	}
	return rp_split_end(sp);
}

static size_t deflated(const unsigned char *in, size_t len, unsigned char *z, size_t zcap, int level, int strategy)
{
	z_stream zs = { 0 };
	if (deflateInit2(&zs, level, Z_DEFLATED, 15, 8, strategy == -1 ? Z_DEFAULT_STRATEGY : strategy) != Z_OK)
		abort();
	zs.next_out = z;
	zs.avail_out = (uInt)zcap;
	/* strategy -1: 64 KiB with dynamic codes, 64 KiB with fixed codes, ... */
	size_t chunk = strategy == -1 ? 65536 : len;
	for (size_t at = 0; at < len; at += chunk) {
		if (strategy == -1 && deflateParams(&zs, level, at / chunk % 2 ? Z_FIXED : Z_DEFAULT_STRATEGY) != Z_OK)
			abort();
		zs.next_in = (Bytef *)(uintptr_t)(in + at);
		zs.avail_in = (uInt)(len - at < chunk ? len - at : chunk);
		int rc = deflate(&zs, at + chunk >= len ? Z_FINISH : Z_NO_FLUSH);
		if (rc != (at + chunk >= len ? Z_STREAM_END : Z_OK) || zs.avail_in)
			abort();
	}
	size_t n = zs.total_out;
	deflateEnd(&zs);
	return n;
}

/*
 * Streams as debug sections are made (this program's own bytes, DWARF
 * and code, several times over with changes, at levels 1, 6 and 9), and
 * streams of fixed codes only (and by turns with dynamic ones: part 1
 * decodes both), Huffman only, runs only and stored blocks
 * (random bytes), each inflated in both orders and on two threads: always
 * the very bytes.  The cut is used (1) where the stream has dynamic blocks
 * after 60% of it and part 1 runs first; zlib alone (0) otherwise.  Most
 * streams soon copy only from after the cut, and part 1 hands over to
 * zlib (2); one that copies from 20 KiB back all along (as DWARF does,
 * libc's) has part 1 decode to the end, its bytes from before the cut
 * filled in at the end (1).  A
 * wrong Adler-32 in the stream turns the cut down, and zlib still gives the
 * bytes; a wrong size fails.
 */
static void test_pinflate(void)
{
	int fd = open("/proc/self/exe", O_RDONLY);
	off_t flen = lseek(fd, 0, SEEK_END);
	CHECK(fd >= 0 && flen > 65536, "this program's bytes");
	if (fd < 0 || flen <= 65536)
		return;
	size_t size = 3u << 20, zcap = size + size / 100 + 1024;
	unsigned char *dwarf = malloc(size), *rnd = malloc(size), *few = malloc(size), *again = malloc(size),
	              *z = malloc(zcap), *out = malloc(size);
	unsigned char *self = mmap(NULL, (size_t)flen, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	uint64_t x = 88172645463325252ull;
	for (size_t i = 0; i < size; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		rnd[i] = (unsigned char)x;
		few[i] = (unsigned char)('a' + (x >> 60));
		again[i] = (unsigned char)((i & 15) == 0 ? x >> 56 : self[i % 20480]);
		/* the program again and again, every 4 KiB a little changed */
		dwarf[i] = (unsigned char)(self[i % (size_t)flen] + (i / (size_t)flen) * ((i & 4095) == 7));
	}
	munmap(self, (size_t)flen);
	struct {
		const char *what;
		const unsigned char *data;
		int level, strategy, cut; /* part 1 first: rp_split_end's answer */
	} cases[] = {
		{ "level 1", dwarf, 1, Z_DEFAULT_STRATEGY, 2 },
		{ "level 6", dwarf, 6, Z_DEFAULT_STRATEGY, 2 },
		{ "level 9", dwarf, 9, Z_DEFAULT_STRATEGY, 2 },
		{ "Huffman only", dwarf, 6, Z_HUFFMAN_ONLY, 2 },
		{ "runs only", dwarf, 6, Z_RLE, 2 },
		{ "20 KiB over and over", again, 6, Z_DEFAULT_STRATEGY, 1 },
		{ "fixed codes", dwarf, 6, Z_FIXED, 0 },
		{ "dynamic and fixed codes by turns", again, 6, -1, 1 },
		{ "stored (random bytes)", rnd, 6, Z_DEFAULT_STRATEGY, 0 },
		{ "sixteen letters", few, 6, Z_DEFAULT_STRATEGY, 2 },
	};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		size_t zlen = deflated(cases[c].data, size, z, zcap, cases[c].level, cases[c].strategy);
		static const char *const orders[] = { "part 0 first", "part 1 first", "on two threads" };
		for (int order = 0; order < 3; order++) {
			int rc = split_inflate(z, zlen, out, size, order);
			CHECK(rc >= 0 && !memcmp(out, cases[c].data, size), "%s, %s: %d, %s", cases[c].what,
			    orders[order], rc, rc >= 0 ? "other bytes" : "failed");
			if (order == 0)
				CHECK(rc == 0, "%s, part 0 first: zlib alone, got %d", cases[c].what, rc);
			/* from the program's own bytes, whether part 1 needs the bytes
			 * before the cut (2) or not (1) depends on the build: both are
			 * from both parts; "sixteen letters" pins the hand-over */
			bool either = cases[c].data == dwarf && cases[c].cut == 2 && rc == 1;
			if (order == 1)
				CHECK(rc == cases[c].cut || either, "%s, part 1 first: %d wanted, got %d",
				    cases[c].what, cases[c].cut, rc);
		}
		if (c != 1)
			continue;
		z[zlen - 1] ^= 1; /* the Adler-32 */
		int rc = split_inflate(z, zlen, out, size, 1);
		CHECK(rc == 0 && !memcmp(out, cases[c].data, size), "a wrong Adler-32: zlib alone from the cut, got %d",
		    rc);
		z[zlen - 1] ^= 1;
		CHECK(split_inflate(z, zlen, out, size - 1, 1) == -1, "one byte less than it holds: failed");
		CHECK(split_inflate(z, zlen - 9, out, size, 2) == -1, "cut short: failed");
		CHECK(rp_split_new(z + 1, zlen - 1, out, size) == NULL, "not a zlib header: refused");
	}
	free(dwarf);
	free(rnd);
	free(few);
	free(again);
	free(z);
	free(out);
}

static void test_intern(void)
{
	char a[] = "same", b[] = "same";
	CHECK(rp_intern(a) == rp_intern(b) && rp_intern(a) != (const char *)a, "one pointer per string");
	CHECK(rp_intern_n("samesame", 4) == rp_intern("same"), "by length too");
}

int main(void)
{
	test_read();
	test_symfile();
	test_series();
	test_ehframe();
	test_elf();
	test_symbols_undef();
	test_index();
	test_json();
	test_intern();
	test_pinflate();
	rp_reset();
	return hc_check_finish("engine");
}
