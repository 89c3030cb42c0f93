/*
 * heapctl/elf/unwind.h - the unwind info for an address from an object's
 * .eh_frame_hdr search table as the process has it in memory
 * (cli_proc_eh_table), for the libunwind accessors of `trace` and
 * `stacks`.  Both look in memory first because the files the maps name are
 * not always where heapctl would open them (a chroot, a container, a file
 * deleted since), and libunwind's ptrace accessors only open files.  A
 * header of its own: the command itself links no libunwind.
 */
#ifndef HC_UNWIND_H
#define HC_UNWIND_H

#include <libunwind.h>

/* libunwind's search of a remote table (exported, not in its headers):
 * what its ptrace accessors call for a table they found in a file */
extern int UNW_OBJ(dwarf_search_unwind_table)(unw_addr_space_t as, unw_word_t ip, unw_dyn_info_t *di,
    unw_proc_info_t *pi, int need_unwind_info, void *arg);

/* The object mapped at [lo, hi) with its table at hdr: 0 and *pi filled,
 * or libunwind's negative error (the address is in no entry of it). */
static inline int cli_unw_search(unw_addr_space_t as, unw_word_t ip, uint64_t lo, uint64_t hi, uint64_t hdr,
    uint64_t table, uint64_t nfde, unw_proc_info_t *pi, int need, void *arg)
{
	unw_dyn_info_t di = {
		.start_ip = lo,
		.end_ip = hi,
		.format = UNW_INFO_FORMAT_REMOTE_TABLE,
		.u.rti = { .segbase = hdr, .table_len = nfde * 8 / sizeof(unw_word_t), .table_data = table },
	};
	return UNW_OBJ(dwarf_search_unwind_table)(as, ip, &di, pi, need, arg);
}

#endif
