# heapctl - build, test, bench.
#
#   make            build/libheapctl.so (optimised, debug info, -Werror)
#   make check      install missing test dependencies (as root), build, run every test:
#                   the debug and sanitizer builds beside the first build's suites,
#                   then every pass's suites in one pool, TEST_JOBS (4) at a time
#                   (tests/run.sh)
#   make test, test-debug, test-san  one pass each
#   make            also build/heapctl, the command
#   make bench      allocator benchmarks against glibc, jemalloc, mimalloc, tcmalloc,
#                   the profiler's costs, and the control plane's round trips
#   make DEBUG=1    debug build in build-debug/: asserts, fill patterns, the
#                   lock order check (make check runs unit, stress, prof on it)
#   make fuzz       libFuzzer on the profile reader and the segment client,
#                   FUZZ_SECONDS (60) each
#   make SAN=1      build-san/: the debug library and an ASan/UBSan heapctl
#                   (make check runs the report, cli, serve, ptrace and trace
#                   suites on it too)
#   make deps       only check/install the dependencies
#   make man-settings  rewrite the settings tables of libheapctl(3) and
#                   heapctl(1) from shm/hc_settings.def (docs.bats checks them)
#   make demo       profile a bundled example service live, then report on it
#   make format-check  every C file follows .clang-format (make check runs it)
#   make format     clang-format FILES (default: every C file)
#   make install    PREFIX (/usr/local) and DESTDIR: the command, every library
#                   it loads, the man pages, the header, an example drop-in
#                   and heapctl-serve.service
#   make uninstall  removes exactly those files

CC      ?= gcc
VERSION := $(shell sed -n 's/^\#define HC_VERSION "\(.*\)"/\1/p' allocator/hc_alloc.h)
CXX     ?= g++
ifeq ($(SAN),1)
# make check's second pass: the library's debug build (asserts, fill
# patterns) and the command under AddressSanitizer and UBSan
BUILD   ?= build-san
OPT     := -O1 -DHC_DEBUG=1 -DHC_DEBUG_BUILD=1
CLI_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
else ifeq ($(DEBUG),1)
BUILD   ?= build-debug
OPT     := -O1 -DHC_DEBUG=1 -DHC_DEBUG_BUILD=1
else
BUILD   ?= build
OPT     := -O2 -DHC_DEBUG_BUILD=0
endif
WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
           -Wno-unused-parameter
CFLAGS  += -std=gnu11 -g $(OPT) $(WARN) -pthread
# The library: hidden visibility (only the malloc and mallctl families are
# exported), static TLS, and no builtin that could turn the allocator's own
# code back into calls to itself.  The assembler keeps every jump (and
# fused compare-and-jump) off a 32-byte boundary: Intel's JCC-erratum
# microcode stops caching the decoded form of jumps that touch one, which cost
# the malloc+free pair 1.3-1.9 ns on the bench machine (tests/bench fastpath).
LIBFLAGS := -fPIC -fvisibility=hidden -ftls-model=initial-exec -fno-plt \
            -fno-omit-frame-pointer -momit-leaf-frame-pointer \
            -fno-builtin-malloc -fno-builtin-calloc -fno-builtin-free \
            -fno-builtin-realloc -fno-stack-protector \
            -Wa,-mbranches-within-32B-boundaries
LIB_SRC := $(wildcard allocator/*.c agent/*.c) shm/shm.c
LIB_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(LIB_SRC))
# libheapctl-secure.so: the same library with the allocator's misuse checks
# (HC_CHECKS=HC_CHECK_ALL, allocator/internal.h; the default has none)
SECURE_OBJ := $(patsubst %.c,$(BUILD)/obj-secure/%.o,$(wildcard allocator/*.c)) \
            $(filter-out $(BUILD)/obj/allocator/%,$(LIB_OBJ))
# Header dependencies are tracked by the compiler (-MMD), one .d per object.
DEPFLAGS := -MMD -MP

# heapctl/ is laid out by job (ARCHITECTURE.md); which folders make which
# product is said here, once.  The command: the command-line core, the
# control commands, the diagnosis engine, systemd, the one reader of maps,
# ELF and .eh_frame (elf/, no library: doctor and run read maps and program
# headers, and every engine calls it here), and the client half of the
# segment library.  Its files include each other as "cli/cli.h".
HEAPCTL_DIRS := cli cmd diagnose systemd elf
# The report engine: a library heapctl loads for report, stacks and inject
# alone, so the control commands need none of libdw, libelf, zlib, libstdc++,
# libunwind.
REPORT_DIRS  := report symbolize ptrace
# The daemon, with libmicrohttpd; trace, with libbpf.
SERVE_DIRS   := serve
TRACE_DIRS   := trace
srcs_in   = $(filter-out %.bpf.c,$(wildcard $(patsubst %,heapctl/%/*.c,$(1))))
cli_objs  = $(patsubst %.c,$(BUILD)/cli/%.o,$(1))
CLI_SRC    := $(call srcs_in,$(HEAPCTL_DIRS)) shm/shm.c shm/client.c
CLI_OBJ    := $(call cli_objs,$(CLI_SRC))
REPORT_OBJ := $(call cli_objs,$(call srcs_in,$(REPORT_DIRS)))
SERVE_OBJ  := $(call cli_objs,$(call srcs_in,$(SERVE_DIRS)))
TRACE_OBJ  := $(call cli_objs,$(call srcs_in,$(TRACE_DIRS)))
CLI_CFLAGS := $(CFLAGS) $(CLI_SAN) -fPIC -Iheapctl

# tests/ is grouped by subsystem; tests/programs/ holds the programs suites
# run (the preloaded ones are built here; prog.c, churn.c, seccomp_run.c and
# the systemd programs are compiled by the suites that use them, without
# the library), tests/lib/ the headers and shell helpers suites share.
TEST_C   := $(wildcard tests/unit/*.c tests/stress/*.c)
TEST_CC  := $(wildcard tests/unit/*.cc)
TEST_PROGRAMS := $(patsubst %,$(BUILD)/tests/programs/%,target fragment leaky lifetimes recent)
TEST_HDR := tests/lib/check.h tests/lib/testutil.h tests/lib/api.h
# The allocator alone: allocator/ linked with the hooks stubbed out
# (tests/programs/agent_stub.c), and its tests built without -lheapctl to run on it.
ALONE_OBJ   := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard allocator/*.c)) \
               $(BUILD)/obj/tests/programs/agent_stub.o
ALONE_TESTS := $(patsubst tests/%.c,%,$(wildcard tests/unit/api_*.c)) unit/cxx unit/cxx_new \
               stress/stress stress/misc stress/churn stress/fork
TEST_BIN := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_C)) \
            $(patsubst tests/%.cc,$(BUILD)/tests/%,$(TEST_CC)) $(TEST_PROGRAMS) \
            $(BUILD)/libheapctl-alone.so $(patsubst %,$(BUILD)/tests-alone/%,$(ALONE_TESTS))
TEST_LINK := -I$(BUILD)/include -L$(BUILD) -lheapctl -Wl,-rpath,$(abspath $(BUILD)) -ldl
# The report engine's own tests: its objects and the helpers of heapctl's
# it uses (tests/run.sh runs them with the report group).
ENGINE_TEST := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/engine/*.c))
TEST_BIN += $(ENGINE_TEST)

PREFIX  ?= /usr/local
DESTDIR ?=
BINDIR  := $(DESTDIR)$(PREFIX)/bin
LIBDIR  := $(DESTDIR)$(PREFIX)/lib
INCDIR  := $(DESTDIR)$(PREFIX)/include
MANDIR  := $(DESTDIR)$(PREFIX)/share/man
DOCDIR  := $(DESTDIR)$(PREFIX)/share/doc/heapctl
UNITDIR := $(DESTDIR)$(PREFIX)/lib/systemd/system

.PHONY: all check test test-debug test-san test-build test-debug-build test-san-build format format-check bench deps clean demo install uninstall fuzz man-settings
# Every library built is installed (make install, uninstall): the preload,
# its secure build, and the ones heapctl loads from next to itself or from
# ../lib: report (also stacks, inject), serve, trace, and the agent inject
# puts into a process.
HC_LIBS := libheapctl.so libheapctl-secure.so libheapctl-report.so libheapctl-serve.so \
           libheapctl-trace.so libheapctl-agent.so
MAN_PAGES := $(wildcard man/*.[1-8])
# man/heapctl.1 -> MANDIR/man1/heapctl.1
man_dest = $(MANDIR)/man$(subst .,,$(suffix $(1)))/$(notdir $(1))
all: $(addprefix $(BUILD)/,$(HC_LIBS)) $(BUILD)/include/heapctl.h $(BUILD)/heapctl

$(BUILD)/include/heapctl.h: allocator/heapctl.h
	@mkdir -p $(dir $@)
	cp $< $@

# One rule per kind of product.  Objects: the library's (hidden, no
# builtins), its secure build's, the command's and its engines'.
$(BUILD)/obj/%.o: %.c Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LIBFLAGS) $(DEPFLAGS) -c $< -o $@

$(BUILD)/obj-secure/%.o: %.c Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LIBFLAGS) $(DEPFLAGS) -DHC_CHECKS=HC_CHECK_ALL -c $< -o $@

$(BUILD)/cli/%.o: %.c Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CLI_CFLAGS) $(DEPFLAGS) -DHEAPCTL_VERSION='"$(VERSION)"' -c $< -o $@

# A preloadable library (the preload, its secure build, the allocator alone,
# inject's agent): nothing left undefined, bound at load, never unloaded,
# and what the fork handlers write on one page (allocator/fork_data.ld).
LIB_LDFLAGS := -Wl,-T,allocator/fork_data.ld
LINK_PRELOAD = $(CC) -shared -pthread -Wl,-z,nodelete -Wl,-z,now -Wl,--no-undefined $(LIB_LDFLAGS) \
	    -o $@ $(filter %.o,$^) -ldl
# An engine heapctl loads (dlopen) for the commands that need its
# libraries; it calls back into heapctl (cli_err, out_*, rp_out_*), which
# exports its symbols (-rdynamic).
LINK_ENGINE = $(CC) -shared -pthread $(CLI_SAN) -o $@ $(filter %.o,$^)

$(BUILD)/libheapctl.so: $(LIB_OBJ) allocator/fork_data.ld
	$(LINK_PRELOAD)

# heapctl inject's agent: agent/ over the process's own malloc
# (agent/inject/shim.c), with the allocator's formatting and lock checks
AGENT_OBJ := $(filter $(BUILD)/obj/agent/% $(BUILD)/obj/shm/%,$(LIB_OBJ)) \
             $(BUILD)/obj/agent/inject/shim.o $(BUILD)/obj/allocator/os.o $(BUILD)/obj/allocator/lock.o
$(BUILD)/libheapctl-agent.so: $(AGENT_OBJ) allocator/fork_data.ld
	$(LINK_PRELOAD)

$(BUILD)/libheapctl-alone.so: $(ALONE_OBJ) allocator/fork_data.ld
	$(LINK_PRELOAD)

$(BUILD)/libheapctl-secure.so: $(SECURE_OBJ) allocator/fork_data.ld
	$(LINK_PRELOAD)

$(BUILD)/heapctl: $(CLI_OBJ)
	$(CC) -pthread $(CLI_SAN) -rdynamic -o $@ $(CLI_OBJ) -ldl -lm

# report: libdw/libelf symbolize, zlib gzips pprof files and inflates debug
# sections, libstdc++ demangles, libunwind-ptrace reads stacks.
REPORT_LIBS := -ldw -lelf -lz -ldl -lm -lunwind-ptrace -lunwind-generic

$(BUILD)/libheapctl-report.so: $(REPORT_OBJ)
	$(LINK_ENGINE) $(REPORT_LIBS)

$(BUILD)/libheapctl-serve.so: $(SERVE_OBJ)
	$(LINK_ENGINE) -lmicrohttpd

# heapctl trace (heapctl/trace/): libbpf, and libunwind's remote API for
# the stacks it samples.  The BPF program is built with clang and turned
# into a skeleton header by bpftool; it declares the few kernel types it
# uses, so no vmlinux.h (nor BTF on the build machine) is needed.
BPFTOOL   ?= $(shell command -v bpftool || echo /usr/sbin/bpftool)
MULTIARCH := $(shell $(CC) -dumpmachine)

$(BUILD)/bpf/trace.bpf.o: heapctl/trace/trace.bpf.c heapctl/trace/trace.h Makefile
	@mkdir -p $(dir $@)
	clang -g -O2 -target bpf -D__TARGET_ARCH_x86 -I/usr/include/$(MULTIARCH) -Iheapctl/trace \
	    -Wall -Werror -c $< -o $@

$(BUILD)/bpf/trace.skel.h: $(BUILD)/bpf/trace.bpf.o
	$(BPFTOOL) gen skeleton $< name trace_bpf > $@.tmp && mv $@.tmp $@

# trace's objects also see the generated skeleton
$(BUILD)/cli/heapctl/trace/%.o: heapctl/trace/%.c $(BUILD)/bpf/trace.skel.h Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CLI_CFLAGS) $(DEPFLAGS) -I$(BUILD)/bpf -c $< -o $@

$(BUILD)/libheapctl-trace.so: $(TRACE_OBJ)
	$(LINK_ENGINE) -lbpf -lunwind-ptrace -lunwind-generic -lm

# each object's header dependencies, written by -MMD beside it (absent
# before its first build, hence -include)
-include $(patsubst %.o,%.d,$(sort $(LIB_OBJ) $(SECURE_OBJ) $(ALONE_OBJ) $(AGENT_OBJ) \
    $(CLI_OBJ) $(REPORT_OBJ) $(SERVE_OBJ) $(TRACE_OBJ)))

# Test programs: one set of flags.
TEST_CFLAGS := -std=gnu11 -O2 -g -Wall -Wextra -Werror -pthread
TEST_CXXFLAGS := -std=gnu++17 -O2 -g -Wall -Wextra -Werror -pthread

# The report engine's own tests: its objects and the parts of heapctl's
# they use (tests/run.sh runs them with the report group).
ENGINE_TEST_OBJ := $(call cli_objs,heapctl/cli/out.c heapctl/cli/outfile.c heapctl/cli/json.c heapctl/cli/engine.c \
                   heapctl/cli/opts.c heapctl/diagnose/proc.c heapctl/cli/target.c \
                   heapctl/diagnose/seccomp.c $(wildcard heapctl/elf/*.c) shm/shm.c shm/client.c)
$(BUILD)/tests/engine/%: tests/engine/%.c $(REPORT_OBJ) $(ENGINE_TEST_OBJ) tests/lib/check.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O1 -g -Wall -Wextra -Werror -pthread $(CLI_SAN) -Iheapctl -Iheapctl/report \
	    $< $(REPORT_OBJ) $(ENGINE_TEST_OBJ) -o $@ $(REPORT_LIBS) -ldl

# The segment library's own test links its sources, not the preloadable library.
$(BUILD)/tests/unit/shm: tests/unit/shm.c shm/shm.c shm/client.c shm/heapctl_shm.h shm/hc_settings.def tests/lib/check.h
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) tests/unit/shm.c shm/shm.c shm/client.c -o $@

# The misuse test is about libheapctl-secure.so's checks.
$(BUILD)/tests/unit/misuse: tests/unit/misuse.c $(BUILD)/libheapctl-secure.so tests/lib/check.h
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) $< -o $@ -Wl,--no-as-needed \
	    -L$(BUILD) -lheapctl-secure -Wl,-rpath,$(abspath $(BUILD))

# The lock order check, built with HC_DEBUG=1 in every build.
$(BUILD)/tests/unit/lock_order: tests/unit/lock_order.c allocator/lock.c allocator/os.c allocator/hc_lock.h tests/lib/check.h
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -DHC_DEBUG=1 tests/unit/lock_order.c allocator/lock.c allocator/os.c -o $@

# heapctl trace's budget decisions, on given CPU times (no BPF).
$(BUILD)/tests/unit/trace_budget: tests/unit/trace_budget.c heapctl/trace/budget.c heapctl/trace/budget.h tests/lib/check.h
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) tests/unit/trace_budget.c heapctl/trace/budget.c -o $@ -lm

# The mailbox stress test is a client (shm/client.c) of a real target.
$(BUILD)/tests/unit/hc_math: tests/unit/hc_math.c agent/hc_math.h tests/lib/check.h
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) tests/unit/hc_math.c -o $@ -lm

$(BUILD)/tests/stress/mailbox: tests/stress/mailbox.c shm/shm.c shm/client.c shm/heapctl_shm.h tests/lib/check.h $(BUILD)/tests/programs/target
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) tests/stress/mailbox.c shm/shm.c shm/client.c -o $@

$(BUILD)/tests/%: tests/%.c $(BUILD)/libheapctl.so $(BUILD)/include/heapctl.h $(TEST_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) $< -o $@ $(TEST_LINK)

$(BUILD)/tests/%: tests/%.cc $(BUILD)/libheapctl.so $(BUILD)/include/heapctl.h $(TEST_HDR)
	@mkdir -p $(dir $@)
	$(CXX) $(TEST_CXXFLAGS) $< -o $@ $(TEST_LINK)

$(BUILD)/tests-alone/%: tests/%.c $(TEST_HDR) $(BUILD)/include/heapctl.h
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -I$(BUILD)/include $< -o $@ -ldl

$(BUILD)/tests-alone/%: tests/%.cc $(TEST_HDR)
	@mkdir -p $(dir $@)
	$(CXX) $(TEST_CXXFLAGS) $< -o $@ -ldl

deps:
	@tests/deps.sh

# Suites run at once (tests/run.sh -j): most wait on processes and sleeps
# far more than they compute, so four share this 2-core machine.
TEST_JOBS ?= 4
# The suites each pass runs: the debug pass those that drive the library
# hardest, the sanitizer pass those that feed the command the most untrusted
# input (profiles, segments, options).
DEBUG_GROUPS := unit,stress,prof
SAN_GROUPS   := report,cli,serve,ptrace,trace

test: all $(TEST_BIN)
	@tests/run.sh -j $(TEST_JOBS) $(BUILD)

# The sanitizer pass: the debug library and an ASan/UBSan heapctl.
test-san: test-san-build
	@tests/run.sh -j $(TEST_JOBS) build-san:$(SAN_GROUPS)
test-san-build:
	@$(MAKE) --no-print-directory SAN=1 all \
	    $(patsubst $(BUILD)/%,build-san/%,$(TEST_PROGRAMS)) build-san/tests/engine/engine

# The debug pass: the library with HC_ASSERT's invariants and the lock
# order check (allocator/hc_lock.h).
test-debug: test-debug-build
	@tests/run.sh -j $(TEST_JOBS) build-debug:$(DEBUG_GROUPS)
test-debug-build:
	@$(MAKE) --no-print-directory DEBUG=1 all $(patsubst $(BUILD)/%,build-debug/%,$(TEST_BIN))
test-build: all $(TEST_BIN)

# All three passes.  The first build (what its scripts and bats suites need:
# CHECK_FIRST), then the rest of it and the other two side by side while
# those suites run (no heapctl process runs in a compiler: tests/run.sh -b),
# then every other suite of the three passes in one pool, so that the long
# suites of one pass overlap the others' and the machine never waits on a
# pass's last suite.  The suites that see every heapctl process of the
# machine share the pool in namespaces of their own (tests/lib/isolate.sh).
CHECK_FIRST := $(TEST_PROGRAMS) $(BUILD)/tests/stress/mailbox
check: deps
	@$(MAKE) --no-print-directory -j$(or $(CHECK_BUILD_JOBS),2) all $(CHECK_FIRST)
	@tests/run.sh -j $(TEST_JOBS) \
	    -b '$(MAKE) --no-print-directory -j$(or $(CHECK_BUILD_JOBS),2) test-build test-debug-build test-san-build' \
	    $(BUILD) build-debug:$(DEBUG_GROUPS) build-san:$(SAN_GROUPS)

# The C style in .clang-format, which every C file of the tree follows:
# format-check fails naming each file clang-format would change (make check
# runs it, through tests/cli/docs.bats); format rewrites FILES (default: all
# of them).  The output is clang-format 14's (Debian 12's, tests/deps.sh
# installs it); another version formats a few constructs differently, so
# format-check says SKIP without one or with another.
FORMATTED := $(sort $(wildcard allocator/*.[ch] allocator/*.cc agent/*.[ch] agent/*/*.[ch] \
             shm/*.[ch] heapctl/*/*.[ch] tests/*/*.c tests/*/*.h tests/*/*.cc))
FILES ?= $(FORMATTED)
CLANG_FORMAT_BIN ?= clang-format
CLANG_FORMAT := $(CLANG_FORMAT_BIN) --style=file:$(CURDIR)/.clang-format
format:
	$(CLANG_FORMAT) -i $(FILES)
format-check:
	@v=$$($(CLANG_FORMAT_BIN) --version 2>/dev/null) || { echo "format-check: SKIP: $(CLANG_FORMAT_BIN) is not installed"; exit 0; }; \
	case "$$v" in *" version 14."*) ;; *) echo "format-check: SKIP: $$v is not clang-format 14"; exit 0 ;; esac; \
	out=$$($(CLANG_FORMAT) --dry-run --Werror $(FORMATTED) 2>&1); rc=$$?; \
	bad=$$(printf '%s\n' "$$out" | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' | sort -u); \
	for f in $$bad; do echo "format-check: $$f does not follow .clang-format (make format FILES=$$f)"; done; \
	if [ $$rc -eq 0 ]; then echo "format-check: the $(words $(FORMATTED)) C files follow .clang-format"; \
	elif [ -z "$$bad" ]; then printf '%s\n' "$$out" >&2; fi; \
	exit $$rc

bench: all
	@tests/bench/run.sh $(BUILD)
	@tests/bench/prof.sh $(BUILD)
	@tests/bench/ctl.sh $(BUILD)
	@tests/bench/report.sh $(BUILD)
	@tests/bench/serve.sh $(BUILD)
	@tests/bench/stacks.sh $(BUILD)
	@tests/bench/trace.sh $(BUILD)
	@tests/bench/inject.sh $(BUILD)

# Fuzzing (clang's libFuzzer, with ASan and UBSan): the profile reader and
# the segment as the command sees it, FUZZ_SECONDS each (default 60), from
# the seeds in tests/fuzz/seeds/; crashes are written to build-fuzz/.
FUZZ_SECONDS ?= 60
FUZZ_CFLAGS := -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined \
               -fno-sanitize-recover=undefined -fno-omit-frame-pointer
build-fuzz/profile: tests/fuzz/profile.c heapctl/report/read.c heapctl/report/index.c heapctl/elf/maps.c heapctl/report/rp_internal.h heapctl/report/report.h heapctl/elf/elf.h
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -Iheapctl tests/fuzz/profile.c heapctl/report/read.c heapctl/report/index.c heapctl/elf/maps.c -o $@ -lm

build-fuzz/segment: tests/fuzz/segment.c heapctl/cli/target.c heapctl/diagnose/proc.c heapctl/elf/maps.c heapctl/elf/elf.c heapctl/cli/out.c shm/shm.c shm/client.c shm/heapctl_shm.h heapctl/cli/cli.h heapctl/elf/elf.h
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -Iheapctl tests/fuzz/segment.c heapctl/cli/target.c heapctl/diagnose/proc.c heapctl/elf/maps.c heapctl/elf/elf.c heapctl/cli/out.c shm/shm.c shm/client.c -o $@

fuzz: deps build-fuzz/profile build-fuzz/segment
	@for t in profile segment; do \
	    mkdir -p build-fuzz/corpus-$$t && cp -n tests/fuzz/seeds/$$t/* build-fuzz/corpus-$$t/ 2>/dev/null; \
	    echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
	    ASAN_OPTIONS=detect_leaks=0 build-fuzz/$$t -max_total_time=$(FUZZ_SECONDS) \
	        -artifact_prefix=build-fuzz/$$t- -print_final_stats=1 build-fuzz/corpus-$$t \
	        2>build-fuzz/$$t.log || { tail -40 build-fuzz/$$t.log; exit 1; }; \
	    grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb)' build-fuzz/$$t.log; \
	done

# The pages' settings tables come from the list through heapctl help
# conf.roff / set.roff, spliced between the BEGIN and END settings lines.
SPLICE = awk -v f="$$gen" '/^\.\\" BEGIN settings/ { print; while ((getline l < f) > 0) print l; skip = 1; next } \
	/^\.\\" END settings/ { skip = 0 } !skip'
man-settings: $(BUILD)/heapctl
	@set -e; for p in conf:man/libheapctl.3 set:man/heapctl.1; do \
		gen=$(BUILD)/$${p%%:*}.roff; page=$${p#*:}; \
		$(BUILD)/heapctl help $${p%%:*}.roff >$$gen; \
		$(SPLICE) $$page >$$page.new && mv $$page.new $$page; \
	done

# The README's first command: a bundled service, profiled live, reported.
demo: deps
	@$(MAKE) --no-print-directory all
	@tests/demo/demo.sh $(BUILD)

# heapctl finds its libraries next to itself (build/) or in ../lib
# (installed): cli_find_installed, heapctl/diagnose/proc.c.  tests/cli/installed.bats
# runs every command from a tree installed with DESTDIR.
install: all
	install -d $(BINDIR) $(LIBDIR) $(INCDIR) $(DOCDIR)/examples $(UNITDIR) \
	    $(sort $(foreach m,$(MAN_PAGES),$(dir $(call man_dest,$(m)))))
	install -m 0755 $(BUILD)/heapctl $(BINDIR)/heapctl
	install -m 0755 $(addprefix $(BUILD)/,$(HC_LIBS)) $(LIBDIR)/
	install -m 0644 allocator/heapctl.h $(INCDIR)/heapctl.h
	$(foreach m,$(MAN_PAGES),install -m 0644 $(m) $(call man_dest,$(m)) &&) true
	sed 's|@LIBDIR@|$(PREFIX)/lib|' man/50-heapctl.conf.example \
	    > $(DOCDIR)/examples/50-heapctl.conf
	chmod 0644 $(DOCDIR)/examples/50-heapctl.conf
	sed 's|@BINDIR@|$(PREFIX)/bin|' man/heapctl-serve.service > $(UNITDIR)/heapctl-serve.service
	chmod 0644 $(UNITDIR)/heapctl-serve.service

# Exactly what install wrote, and heapctl's own documentation directory.
uninstall:
	rm -f $(BINDIR)/heapctl $(addprefix $(LIBDIR)/,$(HC_LIBS)) $(INCDIR)/heapctl.h \
	    $(foreach m,$(MAN_PAGES),$(call man_dest,$(m))) \
	    $(DOCDIR)/examples/50-heapctl.conf $(UNITDIR)/heapctl-serve.service
	-rmdir $(DOCDIR)/examples $(DOCDIR) 2>/dev/null

clean:
	rm -rf build build-debug build-san build-fuzz
