# cache_helpers.bash — what the shared cache's end-to-end tests share
# (cache.bats, cache_config.bats): a real Debian nginx with its dav module
# on a free loopback port (plain http, or https with a CA the test makes
# with openssl), and two projects with their own .kiln stores ("two
# machines") with the same kiln.yaml and sources. The tools log each run
# to a file outside both projects, so "the second machine ran nothing" is
# read from that file. Load daemon_helpers first.

# The helpers' teardown stops the daemon of the current folder: keep it
# for each machine.
eval "one_teardown() $(declare -f teardown | tail -n +2)"

NGINX=${KILN_NGINX:-/usr/sbin/nginx}

setup() {
	[ -x "${KILN:-}" ] || { echo "KILN='${KILN:-}' is not an executable" >&2; return 1; }
	[ -x "${KILND:-}" ] || { echo "KILND='${KILND:-}' is not an executable" >&2; return 1; }
	[ -x "$NGINX" ] || { echo "no nginx at $NGINX (Debian: nginx)" >&2; return 1; }
	T=$BATS_TEST_TMPDIR
	mkdir -p "$T/m1" "$T/m2" "$T/tools" "$T/srv/data/kiln" "$T/srv/tmp"
	M1=$(cd "$T/m1" && pwd -P)
	M2=$(cd "$T/m2" && pwd -P)
	RUNS=$T/runs.log
	: >"$RUNS"
	# the daemons read this user's settings file, not the tester's
	export XDG_CONFIG_HOME=$T/config
	mkdir -p "$XDG_CONFIG_HOME/kiln"
	cd "$M1"
}

teardown() {
	local rc=0
	for m in "$M1" "$M2"; do
		[ -d "$m" ] || continue
		cd "$m" && { P=$m; one_teardown || rc=1; }
	done
	nginx_stop
	stall_stop
	return $rc
}

# ---- the server ----------------------------------------------------------

# nginx_start [tls]: nginx on a free port, serving /kiln/ as the cache
# ($URL, files under $ROOT), /auth/ behind HTTP Basic (kiln:$AUTH_PW) and
# /bearer/ behind "Bearer $TOKEN" (files under $T/srv/data/{auth,bearer}).
# tls: https only, with a certificate for 127.0.0.1 signed by a CA made
# here ($T/tls/ca.pem).
nginx_start() {
	free_port 77
	NPORT=$port
	local d=$T/srv scheme=http listen ssl=""
	AUTH_PW=s3cret-pw
	TOKEN=s3cret-token
	printf 'kiln:%s\n' "$(openssl passwd -apr1 "$AUTH_PW")" >"$d/htpasswd"
	listen="listen 127.0.0.1:$NPORT;"
	if [ "${1:-}" = tls ]; then
		make_ca "$T/tls" ca
		make_server_cert "$T/tls" ca
		scheme=https
		listen="listen 127.0.0.1:$NPORT ssl;"
		ssl="ssl_certificate $T/tls/server.pem; ssl_certificate_key $T/tls/server.key;"
	fi
	cat >"$d/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes 1;
$( [ "$(id -u)" = 0 ] && echo 'user root;' )
pid $d/nginx.pid;
error_log $d/error.log warn;
events { worker_connections 64; }
http {
  access_log $d/access.log;
  default_type application/octet-stream;
  client_body_temp_path $d/tmp/body;
  proxy_temp_path $d/tmp/proxy;
  fastcgi_temp_path $d/tmp/fastcgi;
  uwsgi_temp_path $d/tmp/uwsgi;
  scgi_temp_path $d/tmp/scgi;
  server {
    $listen
    $ssl
    root $d/data;
    client_max_body_size 0;
    location /kiln/ {
      dav_methods PUT DELETE;
      create_full_put_path on;
      dav_access user:rw group:r all:r;
      limit_except GET HEAD PUT { deny all; }
    }
    location /auth/ {
      auth_basic kiln;
      auth_basic_user_file $d/htpasswd;
      dav_methods PUT;
      create_full_put_path on;
    }
    location /bearer/ {
      if (\$http_authorization != "Bearer $TOKEN") { return 401; }
      dav_methods PUT;
      create_full_put_path on;
    }
  }
}
EOF
	"$NGINX" -p "$d" -e "$d/error.log" -c "$d/nginx.conf" >"$d/nginx.out" 2>&1 &
	NGINX_PID=$!
	echo "$NGINX_PID" >"$T/nginx.bgpid"
	BASE=$scheme://127.0.0.1:$NPORT
	wait_for nginx_answers || { cat "$d/nginx.out" "$d/error.log"; return 1; }
	ROOT=$d/data/kiln
	URL=$BASE/kiln
}

nginx_answers() {
	curl -sk -o /dev/null "$BASE/"
}

# make_ca DIR NAME: a self-signed CA, DIR/NAME.pem and DIR/NAME.key.
make_ca() {
	mkdir -p "$1"
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=kiln test $2" \
		-keyout "$1/$2.key" -out "$1/$2.pem" 2>/dev/null
}

# make_server_cert DIR CA: DIR/server.pem (for 127.0.0.1) signed by CA.
make_server_cert() {
	openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
		-keyout "$1/server.key" -out "$1/server.csr" 2>/dev/null
	printf 'subjectAltName=IP:127.0.0.1\n' >"$1/san.ext"
	openssl x509 -req -in "$1/server.csr" -CA "$1/$2.pem" -CAkey "$1/$2.key" \
		-CAcreateserial -days 2 -extfile "$1/san.ext" -out "$1/server.pem" 2>/dev/null
}

nginx_stop() {
	local pid
	[ -f "$T/nginx.bgpid" ] || return 0
	pid=$(cat "$T/nginx.bgpid")
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
	kill -9 "$pid" 2>/dev/null || true
	rm -f "$T/nginx.bgpid"
}

# stall_start: a server on a free port ($STALL_URL) that accepts every
# connection, reads what comes, and never answers (a wedged proxy, a
# server whose disk hangs).
stall_start() {
	free_port 91
	SPORT=$port
	python3 -c '
import socket, sys, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(64)
held = []
def drain(c):
    try:
        while c.recv(65536):
            pass
    except OSError:
        pass
while True:
    c, _ = s.accept()
    held.append(c)
    threading.Thread(target=drain, args=(c,), daemon=True).start()
' "$SPORT" >"$T/stall.out" 2>&1 &
	echo $! >"$T/stall.bgpid"
	STALL_URL=http://127.0.0.1:$SPORT/kiln
	wait_for stall_listens
}

stall_listens() {
	[ -n "$(ss -Htln "sport = :$SPORT" 2>/dev/null)" ]
}

stall_stop() {
	[ -f "$T/stall.bgpid" ] || return 0
	kill -TERM "$(cat "$T/stall.bgpid")" 2>/dev/null || true
	rm -f "$T/stall.bgpid"
}

# ---- the projects --------------------------------------------------------

# write_machine DIR [MODE]: the project, the same on both machines. upper
# logs each run (its input's name) to $RUNS.
write_machine() {
	local dir=$1 mode=${2:-readwrite}
	cat >"$T/tools/upper.sh" <<EOF
#!/bin/sh
echo "\$1" >>"$RUNS"
tr a-z A-Z <"\$1" >"\$2"
EOF
	chmod +x "$T/tools/upper.sh"
	mkdir -p "$dir/src"
	printf 'alpha\n' >"$dir/src/a.txt"
	printf 'bravo\n' >"$dir/src/b.txt"
	[ -f "$T/big.txt" ] || head -c 300000 /dev/urandom | base64 >"$T/big.txt"
	cp "$T/big.txt" "$dir/src/big.txt"
	cat >"$dir/kiln.yaml" <<EOF
kiln: 1
project: cachetest
sources: [src]
profiles:
  pc:
cache:
  url: $URL
  mode: $mode
  timeout: 20s
tools:
  upper:
    run: [$T/tools/upper.sh, "\${in}", "\${out}"]
    trace: false
rules:
  - match: "src/*.txt"
    url: "up/\${match.name}.txt"
    tool: upper
EOF
}

# build_in DIR ARGS...: kiln build in DIR (its own daemon).
build_in() {
	cd "$1" && shift
	P=$(pwd -P)
	run --separate-stderr "$KILN" build --json "$@"
}

# runs: how many tool runs the log holds.
runs() {
	wc -l <"$RUNS" | tr -d ' '
}

# uploads_done DIR: the machine's daemon has nothing left to upload.
uploads_done() {
	(cd "$1" && [ "$(status_field cache_pending)" = 0 ])
}

# wait_uploads DIR N: every upload of DIR's daemon is over, and N results
# went up (their index entries written).
wait_uploads() {
	wait_for uploads_done "$1" || return 1
	local up
	up=$(cd "$1" && status_field cache_uploaded)
	[ "$up" -ge "$2" ] || { echo "uploaded $up results, expected $2" >&2; (cd "$1" && "$KILN" status) >&2; return 1; }
}

# same_outputs: build/pc of both machines holds the same bytes.
same_outputs() {
	diff -rq "$M1/build/pc/up" "$M2/build/pc/up"
}

# ac_files / cas_files: what the server holds.
ac_files() { find "$ROOT/ac" -type f 2>/dev/null | wc -l | tr -d ' '; }
cas_files() { find "$ROOT/cas" -type f 2>/dev/null | wc -l | tr -d ' '; }

# the first machine builds all three steps and uploads them
first_machine() {
	nginx_start
	write_machine "$M1" "${1:-readwrite}"
	write_machine "$M2" "${1:-readwrite}"
	build_in "$M1"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; return 1; }
	[ "$(runs)" = 3 ] || { echo "first machine ran $(runs) tools, expected 3"; return 1; }
}

# the CAS file of the blob machine 1 built for up/NAME
cas_of() {
	echo "$ROOT/cas/$(sha256sum "$M1/build/pc/up/$1" | cut -d' ' -f1)"
}

