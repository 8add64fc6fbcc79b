# kiln — the one Makefile.
#
#   make            build bin/kiln and bin/kilnd (release, -O2)
#   make test       install missing Debian packages (as root), build the
#                   ASan+UBSan variant, run every unit and end-to-end test
#   make tsan       build the ThreadSanitizer variant (bin/tsan/) and run
#                   every unit test and the end-to-end suites that drive
#                   kilnd's threads ($(TSAN_E2E) below); a TSan report
#                   from any test, kiln or kilnd fails the suite it came
#                   in (tests/run.sh with KILN_TSAN=1; the reports are
#                   shown, and kept in KILN_TSAN_KEEP=DIR when set).
#                   One suite: KILN_TSAN=1 TESTS='e2e/events' tests/run.sh bin/tsan
#   make demo       the main job on the sample game project assets-sample/:
#                   install missing Debian packages (as root), build kiln
#                   (release) and the sample's C tools, build every asset
#                   for pc, print where the outputs are, check both bundles
#                   with the loader, rebuild to show nothing reruns, stop
#                   the daemon (assets-sample/tools/demo.sh)
#   make sample-tools  only the sample's C tools (assets-sample/tools/bin/)
#   make bench      benchmarks in bench/ (figures, not pass/fail)
#   make install    PREFIX=/usr/local DESTDIR= (programs, libkiln with kiln.pc,
#                   bash completion, man pages kiln(1) and kiln.yaml(5))
#
# The first build of anything also builds nng (third_party/nng/build.sh:
# Debian's nng 1.5.2 source with kiln's fix for its listener wedge).
#   make valgrind   unit tests of the release variant under valgrind
#
# Three variants share one set of rules: "release" (obj/release, bin/),
# "asan" (obj/asan, bin/asan/), used by every test, and "tsan" (obj/tsan,
# bin/tsan/: -fsanitize=thread, make tsan). Under TSan a tool is started
# with fork, not a clone sharing memory (daemon/engine/tool_spawn.c).

CC      = gcc
OBJ    ?= obj
BIN    ?= bin
AR      = ar
PREFIX ?= /usr/local
DESTDIR ?=

# libcrypto (OpenSSL): SHA-256, of every blob (store/sha256.c) and the
# remote cache's keys (cache/keys.c). libzstd: bundles with compress: zstd.
# jansson: every JSON kiln writes (common/json.c: --json, the dashboard).
PKGS       = lmdb libxxhash yaml-0.1 libprotobuf-c libcrypto libzstd jansson
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
# nng is Debian 12's 1.5.2 with kiln's fix for its listener wedge, built
# once into $(NNG) by third_party/nng/build.sh and linked statically.
NNG        = $(OBJ)/nng
NNG_LIB    = $(NNG)/lib/libnng.a
LIBS       = $(PKG_LIBS) $(NNG_LIB) -lmbedtls -lmbedx509 -lmbedcrypto -lpthread -lm
TEST_LIBS  = $(shell pkg-config --libs cmocka 2>/dev/null)
# libcurl only for cache/ (the shared HTTP cache): its headers; the library
# itself is loaded when a cache handle opens (cache/curl_lib.h), not linked.
CURL_CFLAGS = $(shell pkg-config --cflags libcurl 2>/dev/null)

WARN    = -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
# proto/*.proto are compiled by protoc-c into $(GEN) at build time.
GEN     = $(OBJ)/gen
INCLUDES    = -Icommon -Istore -Iproto -I$(GEN) -Icache -Idesc -Idaemon/engine -Idaemon -Iclient -I$(NNG)/include
BASE_CFLAGS = -std=c11 -D_GNU_SOURCE -g $(WARN) $(INCLUDES) $(PKG_CFLAGS)

# The tracer is loaded into every build tool: plain -O2, no sanitizer.
SHIM_CFLAGS = -std=c11 -D_GNU_SOURCE -g -O2 $(WARN) -fPIC -shared -fvisibility=hidden

release_CFLAGS  = -O2
release_LDFLAGS =
release_BIN     = $(BIN)
asan_CFLAGS  = -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
asan_LDFLAGS = -fsanitize=address,undefined
asan_BIN     = $(BIN)/asan
# ThreadSanitizer (make tsan): kiln's own code instrumented; nng stays the
# one uninstrumented build (TSan still sees its pthread locks and condition
# variables, through which every aio hands work between threads).
tsan_CFLAGS  = -O1 -fno-omit-frame-pointer -fsanitize=thread
tsan_LDFLAGS = -fsanitize=thread
tsan_BIN     = $(BIN)/tsan

# What every part shares: the error codes (kiln_error.h, kiln_strerror).
COMMON_SRC = common/error.c common/hex.c common/rmtree.c common/json.c
STORE_SRC = store/hash.c store/names.c store/fileio.c \
            store/blob.c store/records.c store/db.c store/dbcheck.c store/index.c store/deps.c store/batch.c \
            store/scan.c store/fsck.c store/gc.c store/store.c store/sha256.c store/blobsha.c store/blobstat.c \
            store/tree.c store/guard.c
# The wire schema's generated code plus its helpers (libkilnproto.a), and
# the remote cache's messages: proto/reapi.proto (a subset of Bazel's
# REAPI) and proto/kiln_cache.proto (docs/cache.md).
PROTO_SRC = proto/wire.c proto/status.c proto/paths.c proto/json.c
PROTO_GEN = proto/kiln.pb-c.c proto/reapi.pb-c.c proto/kiln_cache.pb-c.c
GEN_HDRS  = $(PROTO_GEN:proto/%.c=$(GEN)/%.h)
# The remote cache's entries, cache/ (libkilncache.a): keys, encoding and
# validation of Bazel-HTTP-cache AC values (docs/cache.md). No I/O.
CACHE_SRC = cache/keys.c cache/check.c cache/index.c cache/result.c cache/sign.c
# The asset-description loader (kiln.yaml and *.kiln.yaml), desc/: used by
# the CLI (kiln check, kiln ls) and the daemon (libkilndesc.a).
DESC_SRC  = desc/glob_compile.c desc/glob_match.c desc/arena.c desc/diag.c desc/yaml_tree.c \
            desc/desc_load.c desc/desc_fields.c desc/template.c desc/srcwalk.c \
            desc/desc_resolve.c desc/resolve_tools.c desc/resolve_inputs.c \
            desc/bundle_fields.c desc/resolve_bundles.c \
            desc/strmap.c desc/plan_graph.c desc/desc.c desc/user_config.c
# The build engine, daemon/engine/ (libkilnengine.a): deciding, scheduling,
# running and publishing steps, file states, materializing build/.
ENGINE_SRC = $(addprefix daemon/engine/, action_key_version.c action_key.c filestate.c watch.c \
             schedule.c builds.c output_index.c record_batch.c step_events.c \
             graph.c lifecycle.c deps_query.c step.c decide.c decide_key.c decide_cache.c \
             action_results.c blob_watch.c run.c tool_spawn.c trace.c discover.c dep_path.c probe_words.c tool_runs.c \
             depfile.c verify.c publish.c publish_outputs.c publish_records.c lost.c \
             scratch.c need.c need_wait.c orphans.c timeline.c audit.c materialize.c folder_out.c search_path.c edits.c selfwrite.c \
              remote.c remote_upload.c remote_need.c agent_jobs.c agent_files.c bundle_build.c kpak_write.c \
             durations.c estimate.c snapshot.c)
# The server, daemon/ (libkilnserver.a, and main.c for kilnd): lifecycle,
# nng, request handlers, events, uploads, builds' owners.
SERVER_SRC = daemon/runtime.c daemon/log.c daemon/server.c daemon/workers.c daemon/peers.c \
             daemon/events.c daemon/evfilter.c daemon/evsnap.c \
             daemon/verified.c daemon/jobs.c \
             daemon/handlers.c daemon/handlers_build.c daemon/handlers_agent.c daemon/agents.c daemon/roles.c \
             daemon/uploads.c daemon/owners.c daemon/changes.c
# The web dashboard (docs/ui.md): its HTTP server, JSON API, events over a
# websocket, and its pages compiled in by scripts/embed-files (xxd -i).
UI_FILES   = daemon/ui/index.html daemon/ui/app.js daemon/ui/style.css
SERVER_SRC += daemon/ui.c daemon/ui_api.c daemon/ui_image.c daemon/ui_ws.c $(GEN)/ui_files.c
DAEMON_SRC = daemon/main.c
# the shared cache's settings: KILN_CACHE_* and what the handle is opened
# with (kept apart from the lists above)
SERVER_SRC += daemon/cache_env.c
ENGINE_SRC += daemon/engine/remote_config.c
# ... and its HTTP transport, in the same library: Bazel's HTTP
# remote-cache protocol over libcurl (docs/cache-http.md).
CACHE_HTTP_SRC = cache/cache.c cache/config.c cache/transfer.c cache/curl_lib.c
# libkiln.a: the C client API of client/kiln.h (the CLI is built on it).
LIBKILN_SRC = client/libkiln.c client/blobs.c client/conn.c client/autostart.c client/builds.c \
              client/deps.c client/events.c client/live.c client/audit.c
KILN_SRC  = client/main.c client/cli.c client/cmd_store.c client/cmd_daemon.c client/cmd_ui.c \
            client/cmd_events.c client/cmd_desc.c client/cmd_build.c client/cmd_deps.c client/cmd_need.c client/cmd_trace.c client/cmd_audit.c client/progress.c client/count_check.c \
            client/cmd_agent.c client/agent.c client/agent_job.c client/agent_need.c \
            client/check_programs.c client/cmd_graph.c client/stepgraph.c client/cmd_complete.c daemon/engine/tool_spawn.c
UNIT_TESTS = test_hash test_names test_blob test_db test_crash test_concurrency \
             test_blobstat test_fsck test_gc test_tree test_enospc test_glob test_desc test_proto test_libkiln \
             test_batch test_deps test_toolrun test_materialize test_engine_key test_depfile test_dep_path test_probe_words test_events \
             test_schedule test_http_cache test_sha256 test_reapi test_roles test_kpak test_stepgraph test_json \
             test_strmap test_count_check test_selfwrite
BENCHES = bench_store bench_load bench_proto bench_engine bench_trace bench_agents

VARIANTS = release asan tsan
# bench/<name>/bench_<name>.c: the stem is used twice in a prerequisite,
# which needs a second expansion ($$* there).
.SECONDEXPANSION:

.PHONY: all deps deps-test test check tsan demo bench install valgrind clean fuzz torture
all: deps
	@$(MAKE) --no-print-directory $(BIN)/kiln $(BIN)/kilnd $(BIN)/libkilntrace.so $(BIN)/examples/hot-reload \
	        $(OBJ)/release/libkilncache.a

# Generated once for both variants; every object waits for the headers.
$(GEN)/%.pb-c.c $(GEN)/%.pb-c.h: proto/%.proto
	@mkdir -p $(GEN)
	protoc-c --proto_path=proto --c_out=$(GEN) $<

$(GEN)/ui_files.c: $(UI_FILES) scripts/embed-files
	@mkdir -p $(GEN)
	scripts/embed-files $@ $(UI_FILES)

$(NNG_LIB): third_party/nng/build.sh third_party/nng/peer-closed-during-negotiation.patch \
            third_party/nng/rep0-send-on-closed-pipe.patch third_party/nng/tls-ip-san.patch \
            third_party/nng/ws-hook-refusal.patch
	@third_party/nng/build.sh $(NNG)

deps:
	@scripts/ensure-deps build
deps-test:
	@scripts/ensure-deps test

# $(1) = variant name
define variant_rules
$(OBJ)/$(1)/%.o: %.c | $(GEN_HDRS) $(NNG_LIB)
	@mkdir -p $$(@D)
	$$(CC) $$(BASE_CFLAGS) $$($(1)_CFLAGS) -MMD -MP -c $$< -o $$@

$(OBJ)/$(1)/proto/%.pb-c.o: $(GEN)/%.pb-c.c | $(GEN_HDRS) $(NNG_LIB)
	@mkdir -p $$(@D)
	$$(CC) $$(BASE_CFLAGS) $$($(1)_CFLAGS) -MMD -MP -c $$< -o $$@

$(OBJ)/$(1)/libkilnstore.a: $$(STORE_SRC:%.c=$(OBJ)/$(1)/%.o)
	@mkdir -p $$(@D)
	rm -f $$@ && $$(AR) rcs $$@ $$^

$(OBJ)/$(1)/libkilncommon.a: $$(COMMON_SRC:%.c=$(OBJ)/$(1)/%.o)
	@mkdir -p $$(@D)
	rm -f $$@ && $$(AR) rcs $$@ $$^

$(OBJ)/$(1)/libkilnserver.a: $$(SERVER_SRC:%.c=$(OBJ)/$(1)/%.o)
	@mkdir -p $$(@D)
	rm -f $$@ && $$(AR) rcs $$@ $$^

$(OBJ)/$(1)/libkilnproto.a: $$(PROTO_GEN:%.c=$(OBJ)/$(1)/%.o) $$(PROTO_SRC:%.c=$(OBJ)/$(1)/%.o)
	@mkdir -p $$(@D)
	rm -f $$@ && $$(AR) rcs $$@ $$^

$(OBJ)/$(1)/libkilndesc.a: $$(DESC_SRC:%.c=$(OBJ)/$(1)/%.o)
	@mkdir -p $$(@D)
	rm -f $$@ && $$(AR) rcs $$@ $$^


$(OBJ)/$(1)/libkiln.a: $$(LIBKILN_SRC:%.c=$(OBJ)/$(1)/%.o)
	@mkdir -p $$(@D)
	rm -f $$@ && $$(AR) rcs $$@ $$^

$(OBJ)/$(1)/libkilnengine.a: $$(ENGINE_SRC:%.c=$(OBJ)/$(1)/%.o)
	@mkdir -p $$(@D)
	rm -f $$@ && $$(AR) rcs $$@ $$^

$(OBJ)/$(1)/libkilncache.a: $$(CACHE_SRC:%.c=$(OBJ)/$(1)/%.o) $$(CACHE_HTTP_SRC:%.c=$(OBJ)/$(1)/%.o)
	@mkdir -p $$(@D)
	rm -f $$@ && $$(AR) rcs $$@ $$^

$(OBJ)/$(1)/cache/%.o: BASE_CFLAGS += $(CURL_CFLAGS)

$$($(1)_BIN)/kiln: $$(KILN_SRC:%.c=$(OBJ)/$(1)/%.o) $(OBJ)/$(1)/libkiln.a $(OBJ)/$(1)/libkilncache.a $(OBJ)/$(1)/libkilnproto.a $(OBJ)/$(1)/libkilndesc.a $(OBJ)/$(1)/libkilnstore.a $(OBJ)/$(1)/libkilncommon.a $(NNG_LIB)
	@mkdir -p $$(@D)
	$$(CC) $$($(1)_LDFLAGS) -o $$@ $$^ $$(LIBS)

$$($(1)_BIN)/kilnd: $$(DAEMON_SRC:%.c=$(OBJ)/$(1)/%.o) $(OBJ)/$(1)/libkilnserver.a $(OBJ)/$(1)/libkilnengine.a $(OBJ)/$(1)/libkilncache.a $(OBJ)/$(1)/libkilnproto.a $(OBJ)/$(1)/libkilndesc.a $(OBJ)/$(1)/libkilnstore.a $(OBJ)/$(1)/libkilncommon.a $(NNG_LIB) | $$($(1)_BIN)/libkilntrace.so
	@mkdir -p $$(@D)
	$$(CC) $$($(1)_LDFLAGS) -o $$@ $$^ $$(LIBS)

# The file-access tracer kilnd preloads into tools (shim/kilntrace.c):
# never sanitized, whichever variant it sits beside.
$$($(1)_BIN)/libkilntrace.so: shim/kilntrace.c
	@mkdir -p $$(@D)
	$$(CC) $$(SHIM_CFLAGS) -o $$@ $$< -ldl

$(OBJ)/$(1)/daemon/engine/trace.o: BASE_CFLAGS += -DKILN_LIBDIR='"$(PREFIX)/lib/kiln"'

# the CLI's step graph (kiln graph) is in no library: its test links it
$$($(1)_BIN)/tests/test_stepgraph: $(OBJ)/$(1)/tests/unit/test_stepgraph.o $(OBJ)/$(1)/tests/unit/testutil.o $(OBJ)/$(1)/client/stepgraph.o $(OBJ)/$(1)/libkilndesc.a $(OBJ)/$(1)/libkilnstore.a $(OBJ)/$(1)/libkilncommon.a
	@mkdir -p $$(@D)
	$$(CC) $$($(1)_LDFLAGS) -o $$@ $$^ $$(TEST_LIBS) $$(LIBS)

# kiln build's count check (KILN_CHECK_COUNTS) is in no library either
$$($(1)_BIN)/tests/test_count_check: $(OBJ)/$(1)/tests/unit/test_count_check.o $(OBJ)/$(1)/tests/unit/testutil.o $(OBJ)/$(1)/client/count_check.o $(OBJ)/$(1)/libkilnstore.a $(OBJ)/$(1)/libkilncommon.a
	@mkdir -p $$(@D)
	$$(CC) $$($(1)_LDFLAGS) -o $$@ $$^ $$(TEST_LIBS) $$(LIBS)

$$($(1)_BIN)/tests/%: $(OBJ)/$(1)/tests/unit/%.o $(OBJ)/$(1)/tests/unit/testutil.o $(OBJ)/$(1)/libkilnserver.a $(OBJ)/$(1)/libkilnengine.a $(OBJ)/$(1)/libkilncache.a $(OBJ)/$(1)/libkiln.a $(OBJ)/$(1)/libkilnproto.a $(OBJ)/$(1)/libkilndesc.a $(OBJ)/$(1)/libkilnstore.a $(OBJ)/$(1)/libkilncommon.a $(NNG_LIB)
	@mkdir -p $$(@D)
	$$(CC) $$($(1)_LDFLAGS) -o $$@ $$^ $$(TEST_LIBS) $$(LIBS)

# The tests' bundle reader (tests/kpak_check.c): client/kpak.h alone, as a
# game includes it, with zstd.
$$($(1)_BIN)/tools/kpak-check: tests/kpak_check.c client/kpak.h
	@mkdir -p $$(@D)
	$$(CC) $$(BASE_CFLAGS) $$($(1)_CFLAGS) $$($(1)_LDFLAGS) -o $$@ $$< -lzstd -lxxhash

# The hot-reload example (examples/hot-reload/): what an editor links.
$$($(1)_BIN)/examples/hot-reload: $(OBJ)/$(1)/examples/hot-reload/hot_reload.o $(OBJ)/$(1)/libkiln.a $(OBJ)/$(1)/libkilnproto.a $(OBJ)/$(1)/libkilnstore.a $(OBJ)/$(1)/libkilncommon.a $(NNG_LIB)
	@mkdir -p $$(@D)
	$$(CC) $$($(1)_LDFLAGS) -o $$@ $$^ $$(LIBS)

$$($(1)_BIN)/bench/bench_%: $(OBJ)/$(1)/bench/$$$$*/bench_$$$$*.o $(OBJ)/$(1)/bench/common/benchutil.o $(OBJ)/$(1)/libkiln.a $(OBJ)/$(1)/libkilnproto.a $(OBJ)/$(1)/libkilndesc.a $(OBJ)/$(1)/libkilnstore.a $(OBJ)/$(1)/libkilncommon.a $(NNG_LIB)
	@mkdir -p $$(@D)
	$$(CC) $$($(1)_LDFLAGS) -o $$@ $$^ $$(LIBS)

-include $$(shell find $(OBJ)/$(1) -name '*.d' 2>/dev/null)
endef
$(foreach v,$(VARIANTS),$(eval $(call variant_rules,$(v))))

# Keep objects of pattern-built test binaries (make would delete them).
# Not .SECONDARY: with it a missing object is not rebuilt while its
# archive is newer than the sources.
.PRECIOUS: $(OBJ)/%.o $(GEN)/%.pb-c.c $(GEN)/%.pb-c.h

ASAN_TESTS = $(UNIT_TESTS:%=$(BIN)/asan/tests/%)
REL_TESTS  = $(UNIT_TESTS:%=$(BIN)/tests/%)

# Fuzz targets (libFuzzer, clang): fuzz/<name>.c defines
# LLVMFuzzerTestOneInput; fuzz/corpus/<name>/ holds the seed corpus.
# `make test` runs each for FUZZ_QUICK seconds; `make fuzz` for FUZZ_TIME.
FUZZ_TARGETS = desc wire cache kpak
FUZZ_QUICK ?= 15
FUZZ_TIME ?= 600
FUZZ_CFLAGS = -std=c11 -D_GNU_SOURCE -g -O1 $(INCLUDES) $(PKG_CFLAGS) \
              -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_SRC = $(COMMON_SRC) $(STORE_SRC) $(DESC_SRC) $(PROTO_SRC) $(CACHE_SRC) $(PROTO_GEN:proto/%=$(GEN)/%)

$(BIN)/fuzz/%: fuzz/%.c $(FUZZ_SRC) $(NNG_LIB)
	@mkdir -p $(@D)
	clang $(FUZZ_CFLAGS) -o $@ $< $(FUZZ_SRC) $(LIBS)

fuzz: deps-test
	@$(MAKE) --no-print-directory $(FUZZ_TARGETS:%=$(BIN)/fuzz/%)
	@for t in $(FUZZ_TARGETS); do tests/fuzz.sh $(BIN)/fuzz/$$t fuzz/corpus/$$t $(FUZZ_TIME) || exit 1; done

# Every benchmark and fuzz target is compiled too (run only by make bench
# and make fuzz), so a change that breaks one fails here.
test check: deps-test
	@$(MAKE) --no-print-directory $(BIN)/asan/kiln $(BIN)/asan/kilnd $(ASAN_TESTS) $(FUZZ_TARGETS:%=$(BIN)/fuzz/%) \
	        $(BENCHES:%=$(BIN)/asan/bench/%) $(BIN)/asan/examples/hot-reload $(BIN)/asan/tools/kpak-check \
	        sample-tools
	@FUZZ_TARGETS="$(FUZZ_TARGETS)" FUZZ_QUICK=$(FUZZ_QUICK) tests/run.sh $(BIN)/asan

# ThreadSanitizer: the unit tests and the end-to-end suites that drive
# kilnd's threads (nng's aio callbacks, workers, the build engine, the
# dashboard), all built with -fsanitize=thread. Any TSan report, from a
# test or from a kilnd it started, fails the suite it appeared in
# (tests/run.sh, KILN_TSAN=1); tests/tsan.supp may only name third-party
# code, each with its reason.
TSAN_E2E   = build live edits events snapshot agents agents_security cache ui limits client_death gc_race store_stats
TSAN_TESTS = $(UNIT_TESTS:%=$(BIN)/tsan/tests/%)
tsan: deps-test
	@$(MAKE) --no-print-directory $(BIN)/tsan/kiln $(BIN)/tsan/kilnd $(TSAN_TESTS) \
	        $(BIN)/tsan/examples/hot-reload $(BIN)/tsan/tools/kpak-check sample-tools
	@KILN_TSAN=1 TESTS="unit/* $(TSAN_E2E:%=e2e/%)" tests/run.sh $(BIN)/tsan

# The torture suite (not part of `make test`): N rounds of kill -9 against
# real builds of the release kiln/kilnd, an ENOSPC run as root, gc loops,
# then each fuzz target for TORTURE_FUZZ seconds (tests/torture/run.sh).
N ?= 10
TORTURE_FUZZ ?= 30
torture: all
	@$(MAKE) --no-print-directory $(FUZZ_TARGETS:%=$(BIN)/fuzz/%)
	@N=$(N) FUZZ_SECS=$(TORTURE_FUZZ) tests/torture/run.sh $(BIN)

valgrind: deps-test
	@$(MAKE) --no-print-directory $(BIN)/kiln $(BIN)/kilnd $(REL_TESTS)
	@KILN_VALGRIND=1 tests/run.sh $(BIN)

bench: all
	@scripts/ensure-deps bench
	@$(MAKE) --no-print-directory $(BENCHES:%=$(BIN)/bench/%) $(BIN)/libkilntrace.so
	@$(MAKE) --no-print-directory $(BIN)/examples/hot-reload
	@for b in $(BENCHES:bench_%=%) live cache; do bench/$$b/run.sh $(BIN) || exit 1; done

# The sample project's C tools (assets-sample/tools/*.c), which its
# kiln.yaml steps run as tools/bin/NAME. Built here, once, for the host
# (not per variant): kiln hashes each tool's program into its steps' keys.
# The loader reads bundles with kiln's own reader, client/kpak.h (zstd on).
SAMPLE_TOOLS  = atlas levelc loader
SAMPLE_BIN    = assets-sample/tools/bin
SAMPLE_CFLAGS = -std=c11 -D_GNU_SOURCE -O2 -g $(WARN) -I/usr/include/stb -Iclient
SAMPLE_LIBS   = -lstb -lyaml -lxxhash -lzstd -lm

.PHONY: sample-tools
sample-tools: $(SAMPLE_TOOLS:%=$(SAMPLE_BIN)/%)

$(SAMPLE_BIN)/%: assets-sample/tools/%.c client/kpak.h assets-sample/tools/slurp.h
	@mkdir -p $(@D)
	$(CC) $(SAMPLE_CFLAGS) -o $@ $< $(SAMPLE_LIBS)

demo:
	@scripts/ensure-deps demo
	@$(MAKE) --no-print-directory $(BIN)/kiln $(BIN)/kilnd sample-tools
	@assets-sample/tools/demo.sh $(BIN)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include/kiln $(DESTDIR)$(PREFIX)/lib \
	        $(DESTDIR)$(PREFIX)/lib/kiln
	install -m 0755 $(BIN)/kiln $(BIN)/kilnd $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 $(BIN)/libkilntrace.so $(DESTDIR)$(PREFIX)/lib/kiln/
	install -m 0644 common/kiln_error.h store/kiln_store.h client/kiln.h client/kpak.h \
	        $(DESTDIR)$(PREFIX)/include/kiln/
	install -m 0644 $(OBJ)/release/libkiln.a $(OBJ)/release/libkilnproto.a \
	        $(OBJ)/release/libkilnstore.a $(OBJ)/release/libkilncommon.a $(DESTDIR)$(PREFIX)/lib/
	install -m 0644 $(NNG_LIB) $(DESTDIR)$(PREFIX)/lib/kiln/
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|0.1.0|' client/kiln.pc.in \
	        >$(DESTDIR)$(PREFIX)/lib/pkgconfig/kiln.pc
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions \
	        $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man5
	install -m 0644 client/kiln.bash-completion \
	        $(DESTDIR)$(PREFIX)/share/bash-completion/completions/kiln
	install -m 0644 docs/man/kiln.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 0644 docs/man/kiln.yaml.5 $(DESTDIR)$(PREFIX)/share/man/man5/

clean:
	rm -rf $(OBJ) $(BIN)
