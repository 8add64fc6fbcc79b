#!/usr/bin/env bats
# File-access tracing (docs/build.md, "File-access tracing"): the real
# kilnd preloads libkilntrace.so into every tool; files a tool reads, stats
# or looks for in vain become the step's discovered dependencies, a write
# outside its scratch folder fails the step, and a static binary still
# builds, untraced. The shim alone is checked first, run by hand.

bats_require_minimum_version 1.5.0

load daemon_helpers

shim() {
	printf '%s/libkilntrace.so\n' "$(dirname "$KILND")"
}

# build ARGS...: kiln build --json; RAN is the sorted URLs that ran.
build() {
	run --separate-stderr "$KILN" build --json "$@"
	RAN=$(printf '%s\n' "$output" | grep '"result":"ran"' |
		sed 's/.*"url":"\([^"]*\)".*/\1/' | sort | tr '\n' ' ' | sed 's/ $//')
}

# A step whose shell script reads the files its input names (no depfile),
# one that looks for a file that is not there, one that lists a folder.
write_project() {
	mkdir -p src data
	printf 'data/a.txt\ndata/b.txt\n' >src/list.txt
	printf 'A\n' >data/a.txt
	printf 'B\n' >data/b.txt
	printf 'C\n' >data/c.txt
	printf 'x\n' >src/probe.txt
	mkdir -p parts
	printf '1\n' >parts/one.part
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  default:
tools:
  gather: { run: [sh, -c, 'while read f; do cat "$f"; done < "$0" > "$1"', "${in}", "${out}"] }
  probe:
    shell: true
    run: 'if [ -e extra.txt ]; then cat extra.txt; else echo none; fi > ${out}; echo quiet >/dev/null'
  listing: { run: [sh, -c, 'cat parts/*.part > "$0"', "${out}"] }
assets:
  - url: gathered.txt
    tool: gather
    inputs: [src/list.txt]
  - url: probed.txt
    tool: probe
    inputs: [src/probe.txt]
  - url: listed.txt
    tool: listing
    inputs: [src/probe.txt]
YAML
}

@test "the shim alone records reads, misses, listings, writes and children, with the env put back" {
	[ -f "$(shim)" ] || skip "no $(shim)"
	printf 'hi\n' >here.txt
	mkdir -p sub
	LD_PRELOAD=$(shim) KILN_TRACE_FILE=$P/t.trace sh -c '
		cat here.txt >/dev/null
		test -e gone.txt
		ls sub >/dev/null
		cd sub && echo x > made.txt && mv made.txt moved.txt && rm moved.txt
		env -u LD_PRELOAD -u KILN_TRACE_FILE sh -c "cat ../here.txt" >/dev/null
	'
	cat t.trace
	grep -q "^H [0-9]* [0-9]* /.*sh$" t.trace
	grep -qx "R $P/here.txt" t.trace
	grep -qx "M $P/gone.txt" t.trace
	grep -qx "D $P/sub" t.trace
	grep -qx "W $P/sub/made.txt" t.trace
	grep -qx "W $P/sub/moved.txt" t.trace
	grep -q "^X [0-9]* /.*/cat$" t.trace
	# the child that dropped LD_PRELOAD still said hello and recorded
	[ "$(grep -c "^R $P/sub/../here.txt" t.trace)" -eq 1 ]
	[ "$(grep -c '^H ' t.trace)" -ge 5 ]
}

@test "the shim alone: 4 threads and a forked child, every open recorded once, lines whole" {
	[ -f "$(shim)" ] || skip "no $(shim)"
	command -v gcc >/dev/null || skip "no gcc"
	cat >"$BATS_TEST_TMPDIR/thr.c" <<'C'
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
static void *work(void *arg) {
	char p[64];
	for (int i = 0; i < 3000; i++) {
		snprintf(p, sizeof p, "t%ld-%d.missing", (long)arg, i);
		int fd = open(p, O_RDONLY);
		if (fd >= 0) close(fd);
	}
	return NULL;
}
int main(void) {
	pthread_t t[4];
	for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, work, (void *)i);
	pid_t pid = fork();
	if (pid == 0) { work((void *)9); _exit(0); }
	for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
	waitpid(pid, NULL, 0);
	return 0;
}
C
	gcc -O1 -pthread -o "$BATS_TEST_TMPDIR/thr" "$BATS_TEST_TMPDIR/thr.c"
	LD_PRELOAD=$(shim) KILN_TRACE_FILE=$P/t.trace "$BATS_TEST_TMPDIR/thr"
	[ "$(grep -c "^M $P/t[0-9]-[0-9]*\.missing\$" t.trace)" -eq 15000 ] || { grep -c . t.trace; false; }
	[ "$(grep "^M " t.trace | sort -u | wc -l)" -eq 15000 ]
	[ "$(grep -vc '^[HFMRSDWXxE] ' t.trace)" -eq 0 ]
}

@test "the shim alone: a tool that replaces or closes low fds (exec 3>, closefrom, dup2) keeps its files clean and its records" {
	[ -f "$(shim)" ] || skip "no $(shim)"
	command -v gcc >/dev/null || skip "no gcc"
	printf 'hi\n' >here.txt
	LD_PRELOAD=$(shim) KILN_TRACE_FILE=$P/t.trace bash -c '
		exec 3>out.txt; echo hello >&3; cat here.txt >/dev/null; test -e gone0.txt; true'
	[ "$(cat out.txt)" = hello ] || { cat out.txt; false; }
	grep -qx "M $P/gone0.txt" t.trace
	cat >"$BATS_TEST_TMPDIR/fds.c" <<'C'
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
	struct stat st;
	stat("gone1.txt", &st);
	closefrom(3);               /* the trace fd too */
	int fd = open("mine.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	stat("gone2.txt", &st);     /* must not land in mine.txt */
	/* a fork writes the records so far: the trace file opened again */
	pid_t p = fork();
	if (p == 0) _exit(0);
	waitpid(p, NULL, 0);
	for (int i = 3; i < 1100; i++)   /* every fd the shim might take */
		if (i != fd) dup2(fd, i);
	stat("gone3.txt", &st);
	write(fd, "mine\n", 5);
	return 0;
}
C
	gcc -O1 -o "$BATS_TEST_TMPDIR/fds" "$BATS_TEST_TMPDIR/fds.c"
	LD_PRELOAD=$(shim) KILN_TRACE_FILE=$P/t2.trace "$BATS_TEST_TMPDIR/fds"
	cat t2.trace
	[ "$(cat mine.txt)" = mine ] || { cat mine.txt; false; }
	grep -qx "M $P/gone1.txt" t2.trace
	grep -qx "M $P/gone2.txt" t2.trace
	grep -qx "M $P/gone3.txt" t2.trace
}

@test "the shim alone: under a small fd limit the trace fd sits just below it, out of the low fds" {
	[ -f "$(shim)" ] || skip "no $(shim)"
	# bash (traced) lists its own fds: the one on the trace file
	out=$(ulimit -n 256; LD_PRELOAD=$(shim) KILN_TRACE_FILE=$P/t3.trace bash -c '
		test -e gone4.txt
		for f in /proc/$$/fd/*; do
			[ "$(readlink "$f")" = "$PWD/t3.trace" ] && echo "${f##*/}"
		done; true')
	[ -n "$out" ] && [ "$out" -ge 192 ] && [ "$out" -lt 256 ] || { echo "trace fd: '$out'"; false; }
	grep -qx "M $P/gone4.txt" t3.trace
	# with the usual limit, at 900 or above
	out=$(LD_PRELOAD=$(shim) KILN_TRACE_FILE=$P/t4.trace bash -c '
		for f in /proc/$$/fd/*; do
			[ "$(readlink "$f")" = "$PWD/t4.trace" ] && echo "${f##*/}"
		done; true')
	[ -n "$out" ] && [ "$out" -ge 900 ] || { echo "trace fd: '$out'"; false; }
}

@test "the shim alone: a signal handler that calls _exit, fork or chdir while the shim records does not deadlock" {
	[ -f "$(shim)" ] || skip "no $(shim)"
	command -v gcc >/dev/null || skip "no gcc"
	cat >"$BATS_TEST_TMPDIR/alrm.c" <<'C'
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
static int mode;
static void on_alarm(int sig) {
	(void)sig;
	if (mode == 1) {
		pid_t p = fork();
		if (p == 0) _exit(0);
		if (p > 0) waitpid(p, NULL, 0);
	} else if (mode == 2) {
		chdir(".");
	}
	if (mode != 0 && --mode > 0) return;
	_exit(0);
}
int main(int argc, char **argv) {
	struct itimerval it = {{0, 200}, {0, 200}};
	struct stat st;
	mode = argc > 1 ? atoi(argv[1]) : 0;
	signal(SIGALRM, on_alarm);
	setitimer(ITIMER_REAL, &it, NULL);
	for (;;) stat("some/missing/file/with/a/longish/name.txt", &st);
}
C
	gcc -O1 -o "$BATS_TEST_TMPDIR/alrm" "$BATS_TEST_TMPDIR/alrm.c"
	for i in $(seq 1 20); do
		for m in 0 1 2; do
			run timeout 5 env LD_PRELOAD=$(shim) KILN_TRACE_FILE=$P/t.trace "$BATS_TEST_TMPDIR/alrm" $m
			[ "$status" -eq 0 ] || { echo "run $i mode $m: status $status"; false; }
		done
	done
}

@test "the shim alone: a NULL path (statx, fstatat with AT_EMPTY_PATH) is passed through, not dereferenced" {
	[ -f "$(shim)" ] || skip "no $(shim)"
	command -v gcc >/dev/null || skip "no gcc"
	cat >"$BATS_TEST_TMPDIR/nul.c" <<'C'
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
int main(void) {
	struct statx stx;
	struct stat st;
	int fd = open("here.txt", O_RDONLY);
	/* valid since Linux 6.11 (EFAULT before): either way no crash */
	statx(fd, NULL, AT_EMPTY_PATH, STATX_SIZE, &stx);
	fstatat(fd, NULL, &st, AT_EMPTY_PATH);
	stat(NULL, &st);
	lstat(NULL, &st);
	access(NULL, R_OK);
	open(NULL, O_RDONLY);
	fopen(NULL, "r");
	readlink(NULL, (char[8]){0}, 8);
	puts("survived");
	return 0;
}
C
	gcc -O1 -w -o "$BATS_TEST_TMPDIR/nul" "$BATS_TEST_TMPDIR/nul.c"
	printf 'hi\n' >here.txt
	run env LD_PRELOAD=$(shim) KILN_TRACE_FILE=$P/t.trace "$BATS_TEST_TMPDIR/nul"
	[ "$status" -eq 0 ] && [ "$output" = survived ] || { echo "status $status: $output"; false; }
	grep -qx "R $P/here.txt" t.trace
}

@test "the shim alone: execl with 1500 arguments, execle's environment, execvp's PATH search behave as without it" {
	[ -f "$(shim)" ] || skip "no $(shim)"
	command -v gcc >/dev/null || skip "no gcc"
	args=$(for i in $(seq 1 1500); do printf '"a%d", ' "$i"; done)
	cat >"$BATS_TEST_TMPDIR/ex.c" <<C
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static void try(const char *what, const char *path, char *const *av) {
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) {
		if (path) setenv("PATH", path, 1); else unsetenv("PATH");
		execvp(what, av);
		printf("%s: %s\\n", what, strerror(errno));
		fflush(stdout);
		_exit(0);
	}
	waitpid(p, NULL, 0);
}
int main(void) {
	char *env[] = {"FOO=bar", NULL};
	char *av[] = {"t", "x", NULL};
	fflush(stdout);
	if (fork() == 0) { execl("/bin/sh", "sh", "-c", "echo execl \$#", "x", $args NULL); _exit(1); }
	wait(NULL);
	if (fork() == 0) { execle("/bin/sh", "sh", "-c", "echo execle \$# \$FOO", "x", $args NULL, env); _exit(1); }
	wait(NULL);
	try("t1", "A:B", av);      /* A/t1 not executable: EACCES */
	try("t3", "A:B", av);      /* A/t3 not executable, B/t3 is: runs */
	try("t2", "", av);         /* empty PATH: the working folder */
	try("t4", "B", av);        /* no #!: run by sh */
	try("t5", "A:B", av);      /* nowhere: ENOENT */
	return 0;
}
C
	gcc -O1 -w -o "$BATS_TEST_TMPDIR/ex" "$BATS_TEST_TMPDIR/ex.c"
	mkdir -p A B
	printf '#!/bin/sh\necho ran A/t1\n' >A/t1
	printf '#!/bin/sh\necho ran A/t3\n' >A/t3
	printf '#!/bin/sh\necho ran B/t3\n' >B/t3
	printf '#!/bin/sh\necho ran ./t2\n' >t2
	printf 'echo ran B/t4 "$@"\n' >B/t4
	chmod +x B/t3 t2 B/t4
	"$BATS_TEST_TMPDIR/ex" >plain.txt
	LD_PRELOAD=$(shim) KILN_TRACE_FILE=$P/t.trace "$BATS_TEST_TMPDIR/ex" >traced.txt
	cat traced.txt
	grep -qx "execl 1500" plain.txt
	diff plain.txt traced.txt
}

@test "a script reading files named in its input reruns when one changes, not when an unrelated file does" {
	write_project
	build
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(cat build/default/gathered.txt)" = "$(printf 'A\nB')" ]
	build
	[ "$RAN" = "" ]
	printf 'C2\n' >data/c.txt     # nobody read it
	build
	[ "$RAN" = "" ] || { echo "ran: $RAN"; false; }
	printf 'B2\n' >data/b.txt     # read by cat, a child of sh
	build
	[ "$RAN" = "gathered.txt" ] || { echo "ran: $RAN"; false; }
	[ "$(cat build/default/gathered.txt)" = "$(printf 'A\nB2')" ]
	run "$KILN" why gathered.txt
	[[ "$output" == *"discovered dependency data/b.txt (trace) changed"* ]] || { echo "$output"; false; }
	[[ "$output" == *"traced: yes"* ]] || { echo "$output"; false; }
}

@test "a step that looked for a missing file reruns when it appears (warm, and after a restart)" {
	write_project
	build
	[ "$(cat build/default/probed.txt)" = "none" ]
	build
	[ "$RAN" = "" ]
	printf 'extra one\n' >extra.txt
	build
	[ "$RAN" = "probed.txt" ] || { echo "ran: $RAN"; false; }
	[ "$(cat build/default/probed.txt)" = "extra one" ]
	run "$KILN" why probed.txt
	[[ "$output" == *"discovered dependency extra.txt (trace) changed missing ->"* ]] || { echo "$output"; false; }
	# the file gone again: the first run's result (which found it
	# missing) is served from the store, not run again
	rm extra.txt
	build
	[ "$RAN" = "" ] || { echo "ran: $RAN"; false; }
	[ "$(cat build/default/probed.txt)" = "none" ]
	# a new daemon checks the recorded miss from the action cache
	"$KILN" stop
	printf 'extra two\n' >extra.txt
	build
	[ "$RAN" = "probed.txt" ] || { echo "ran: $RAN"; false; }
	[ "$(cat build/default/probed.txt)" = "extra two" ]
}

@test "after a daemon restart a traced dependency's change still reruns the step" {
	write_project
	build
	[ "$status" -eq 0 ]
	"$KILN" stop
	printf 'A3\n' >data/a.txt
	build
	[ "$RAN" = "gathered.txt" ] || { echo "ran: $RAN"; false; }
	"$KILN" stop
	build
	[ "$RAN" = "" ]
}

@test "a folder the tool listed: a file added to it reruns the step" {
	write_project
	build
	[ "$(cat build/default/listed.txt)" = "1" ]
	printf '2\n' >parts/two.part
	build
	[ "$RAN" = "listed.txt" ] || { echo "ran: $RAN"; false; }
	[ "$(cat build/default/listed.txt)" = "$(printf '1\n2')" ]
}

@test "a tool writing outside its scratch folder fails, and nothing enters the index" {
	mkdir -p src
	printf 'x\n' >src/a.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  default:
tools:
  leaky: { run: [sh, -c, 'cp "$0" "$1"; echo leak > leaked.txt', "${in}", "${out}"] }
assets:
  - url: leaky.txt
    tool: leaky
    inputs: [src/a.txt]
YAML
	build
	[ "$status" -ne 0 ]
	[[ "$output$stderr" == *"leaky.txt: the tool wrote outside its scratch folder: leaked.txt"* ]] || { echo "$output $stderr"; false; }
	[ ! -e build/default/leaky.txt ]
	! grep -q '^leaky.txt' build/default/kiln-index.txt 2>/dev/null || false
	run "$KILN" why leaky.txt
	[[ "$output" == *"failed"* ]]
	# `trace: false` opts a tool out: it builds, untraced, and its reads
	# are no dependencies
	sed -i 's/^  leaky: { run: \(.*\) }$/  leaky: { run: \1, trace: false }/' kiln.yaml
	grep -q 'trace: false' kiln.yaml
	build
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(cat build/default/leaky.txt)" = x ]
	run "$KILN" why leaky.txt
	[[ "$output" == *"traced: no"* ]] || { echo "$output"; false; }
}

@test "a process killed by a signal (its records lost) makes the run untraced; one ending normally does not" {
	mkdir -p src
	printf 'x\n' >src/a.txt
	printf 'dep\n' >dep.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  default:
tools:
  killed: { run: [sh, -c, 'bash -c "read x < dep.txt; kill -PIPE \$\$"; cp "$0" "$1"; exit 0', "${in}", "${out}"] }
  piped: { run: [sh, -c, 'yes | head -1 >/dev/null; cat dep.txt >/dev/null; cp "$0" "$1"', "${in}", "${out}"] }
  fine: { run: [sh, -c, 'bash -c "read x < dep.txt; exit 3"; (cat dep.txt >/dev/null); cp "$0" "$1"', "${in}", "${out}"] }
assets:
  - { url: killed.txt, tool: killed, inputs: [src/a.txt] }
  - { url: piped.txt, tool: piped, inputs: [src/a.txt] }
  - { url: fine.txt, tool: fine, inputs: [src/a.txt] }
YAML
	build
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	run "$KILN" why killed.txt
	[[ "$output" == *"traced: no"* ]] || { echo "$output"; false; }
	# yes dies of SIGPIPE: what it saw is lost, so the run is untraced too
	run "$KILN" why piped.txt
	[[ "$output" == *"traced: no"* ]] || { echo "$output"; false; }
	run "$KILN" why fine.txt
	[[ "$output" == *"traced: yes"* ]] || { echo "$output"; false; }
	# what the traced processes did record still counts
	printf 'dep2\n' >dep.txt
	build
	[[ " $RAN " == *" fine.txt "* ]] || { echo "ran: $RAN"; false; }
}

@test "a step running 1500 processes is read whole: traced, every child's read a dependency; one killed child among them makes it untraced" {
	mkdir -p src deps
	printf 'x\n' >src/a.txt
	for i in $(seq 1 1500); do printf '%d\n' "$i" >deps/$i.txt; done
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  default:
tools:
  many: { run: [sh, -c, 'i=0; while [ $i -lt 1500 ]; do i=$((i+1)); cat deps/$i.txt; done >/dev/null; cp "$0" "$1"', "${in}", "${out}"] }
  onekilled: { run: [sh, -c, 'i=0; while [ $i -lt 300 ]; do i=$((i+1)); cat deps/$i.txt >/dev/null; done; sh -c "kill -9 \$\$"; cp "$0" "$1"', "${in}", "${out}"] }
assets:
  - { url: many.txt, tool: many, inputs: [src/a.txt] }
  - { url: onekilled.txt, tool: onekilled, inputs: [src/a.txt] }
YAML
	build
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	run "$KILN" why many.txt
	[[ "$output" == *"traced: yes"* ]] || { echo "$output"; false; }
	run "$KILN" why onekilled.txt
	[[ "$output" == *"traced: no"* ]] || { echo "$output"; false; }
	printf 'changed\n' >deps/1499.txt
	build
	[ "$RAN" = "many.txt" ] || { echo "ran: $RAN"; false; }
	printf 'changed\n' >deps/7.txt   # onekilled's traced children still count
	build
	[ "$RAN" = "many.txt onekilled.txt" ] || { echo "ran: $RAN"; false; }
}

@test "glslangValidator -I two folders: an include added earlier on the search path reruns it" {
	command -v glslangValidator >/dev/null || skip "glslangValidator is not installed (Debian: glslang-tools)"
	mkdir -p shaders/lib
	cat >shaders/main.frag <<'GLSL'
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(location = 0) out vec4 color;
void main() { color = tint(); }
GLSL
	printf 'vec4 tint() { return vec4(0.5, 0.0, 0.0, 1.0); }\n' >shaders/lib/common.glsl
	cat >kiln.yaml <<'YAML'
kiln: 1
project: shaders
sources: [shaders]
profiles:
  pc:
tools:
  glsl: { run: [glslangValidator, -V, -Ishaders/override, -Ishaders/lib, -o, "${out}", "${in}"] }
rules:
  - match: "shaders/*.frag"
    url: "shaders/${match.name}.spv"
    tool: glsl
YAML
	build
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$RAN" = "shaders/main.spv" ]
	first=$(xxh128sum build/pc/shaders/main.spv | cut -d' ' -f1)
	build
	[ "$RAN" = "" ]
	# no depfile: only the trace knows glslang looked in override/ first
	mkdir -p shaders/override
	printf 'vec4 tint() { return vec4(0.25, 0.0, 0.0, 1.0); }\n' >shaders/override/common.glsl
	build
	[ "$RAN" = "shaders/main.spv" ] || { echo "ran: $RAN"; "$KILN" why -p pc shaders/main.spv; false; }
	[ "$(xxh128sum build/pc/shaders/main.spv | cut -d' ' -f1)" != "$first" ]
	run "$KILN" why -p pc shaders/main.spv
	[[ "$output" == *"shaders/override/common.glsl (trace) changed missing"* ]] || { echo "$output"; false; }
	[[ "$output" == *"traced: yes"* ]]
}

@test "a static binary builds from its declared inputs and is reported untraced; a shell running it too" {
	[ -f /usr/lib/x86_64-linux-gnu/libc.a ] || [ -f /usr/lib/libc.a ] || skip "no static libc (Debian: libc6-dev)"
	mkdir -p src tools
	cat >"$BATS_TEST_TMPDIR/scp.c" <<'C'
#include <stdio.h>
int main(int argc, char **argv) {
	FILE *in = fopen(argv[1], "rb"), *out = fopen(argv[2], "wb");
	int c;
	if (argc < 3 || !in || !out) return 1;
	while ((c = getc(in)) != EOF) putc(c, out);
	return fclose(out) != 0;
}
C
	gcc -static -O1 -o "$BATS_TEST_TMPDIR/scp" "$BATS_TEST_TMPDIR/scp.c"
	printf 'static\n' >src/a.txt
	cat >kiln.yaml <<YAML
kiln: 1
project: t
sources: [src]
profiles:
  default:
tools:
  scp: { run: ["$BATS_TEST_TMPDIR/scp", "\${in}", "\${out}"] }
  shscp: { run: [sh, -c, '"\$0" "\$1" "\$2"; true', "$BATS_TEST_TMPDIR/scp", "\${in}", "\${out}"] }
  cp: { run: [cp, "\${in}", "\${out}"] }
assets:
  - { url: s.txt, tool: scp, inputs: [src/a.txt] }
  - { url: sh.txt, tool: shscp, inputs: [src/a.txt] }
  - { url: d.txt, tool: cp, inputs: [src/a.txt] }
YAML
	build
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(cat build/default/s.txt)" = "static" ]
	[ "$(cat build/default/sh.txt)" = "static" ]
	run "$KILN" why s.txt
	[[ "$output" == *"traced: no"* ]] || { echo "$output"; false; }
	run "$KILN" why sh.txt
	[[ "$output" == *"traced: no"* ]] || { echo "$output"; false; }
	run "$KILN" why d.txt
	[[ "$output" == *"traced: yes"* ]] || { echo "$output"; false; }
	# kiln ls says it too, from the store's records
	run "$KILN" ls
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$(printf '%s\n' "$output" | grep -c '^  traced   no ')" = 2 ] || { echo "$output"; false; }
	[ "$(printf '%s\n' "$output" | grep -c '^  traced   yes ')" = 1 ] || { echo "$output"; false; }
	run "$KILN" ls --json
	[[ "$output" == *'"url":"d.txt"'*'"traced":true'* ]] || { echo "$output"; false; }
	[[ "$output" == *'"url":"s.txt"'*'"traced":false'* ]] || { echo "$output"; false; }
	printf 'changed\n' >src/a.txt
	build
	[ "$RAN" = "d.txt s.txt sh.txt" ] || { echo "ran: $RAN"; false; }
	[ "$(cat build/default/s.txt)" = "changed" ]
}

@test "an ASan-built tool (kiln --help) runs traced" {
	mkdir -p src
	printf 'x\n' >src/a.txt
	cat >kiln.yaml <<YAML
kiln: 1
project: t
sources: [src]
profiles:
  default:
tools:
  help: { run: [sh, -c, '"\$0" --help > "\$1"', "$KILN", "\${out}"] }
assets:
  - { url: help.txt, tool: help, inputs: [src/a.txt] }
YAML
	build
	[ "$status" -eq 0 ] || { echo "$output $stderr"; "$KILN" log help.txt; false; }
	grep -q "usage" build/default/help.txt
	run "$KILN" why help.txt
	[[ "$output" == *"traced: yes"* ]] || { echo "$output"; false; }
}
