# shellcheck shell=bash
# Sourced by the scripts that use the native stack's cached tools: the one place that names them.
#   . "$(dirname "$0")/lib.sh"; K6=$(venv_bin k6)
PIPELINE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PIPELINE_CACHE=${PIPELINE_CACHE:-$HOME/.cache/pipeline}

# The servers' versions, read by the native stack (scripts/stack) and by the offline images of
# compose/offline/images, which are built from the same packages. Debian bookworm versions this
# was built and measured with; the same series is accepted when the archive has moved on to a
# newer point release (old ones disappear from the mirror).
MARIADB_PIN=1:10.11.14-0+deb12u2 MARIADB_SERIES='1:10.11.*'
REDIS_PIN=5:7.0.15-1~deb12u7 REDIS_SERIES='5:7.0.*'
PROMETHEUS_PIN=2.42.0+ds-5+deb12u1 PROMETHEUS_SERIES='2.42.0+ds-*'
TANSU_VERSION=0.6.0

# apt_pinned PACKAGE PIN SERIES [apt-get install options]: installs PACKAGE at PIN, else at the
# newest of SERIES (a glob), saying so: Debian's mirror drops a point release once the next one
# is out, and a fresh machine must still install. The one copy of that rule for every script that
# installs a pinned package (scripts/stack, compose/engine, compose/smoke); the caller runs
# `apt-get update` (each keeps its own once-only marker).
apt_pinned() {
  local pkg=$1 pin=$2 series=$3; shift 3
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" "$pkg=$pin" >/dev/null 2>&1 && return
  echo "$pkg $pin is gone from the archive; installing the newest of its series $series" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" "$pkg=$series" >/dev/null
}

# The Python venv of scripts/requirements.txt (nx-27017, k6, confluent-kafka). Its name carries a
# hash of that file, so changed requirements get a new venv and nothing picks a stale one.
venv_dir() { echo "$PIPELINE_CACHE/venv-$(sha256sum "$PIPELINE_ROOT/scripts/requirements.txt" | cut -c1-12)"; }

# venv_bin NAME: the path of a program in that venv; fails when `scripts/stack up` has not built it.
venv_bin() {
  local v; v=$(venv_dir)
  [[ -f $v/.complete && -x $v/bin/$1 ]] || { echo "no $v/bin/$1: run scripts/stack up first" >&2; return 1; }
  echo "$v/bin/$1"
}

# The lab's API key (scripts/stack up makes both files): every ingest a script starts reads the
# hashed keys, every k6 run the token. Paths only: no token travels in the environment.
_lab=${STACK_DIR:-$PIPELINE_ROOT/.stack}
export INGEST_AUTH_KEYS=${INGEST_AUTH_KEYS:-$_lab/api-keys} INGEST_KEY_FILE=${INGEST_KEY_FILE:-$_lab/api.key}
# The lab Redis's password, made here once (mode 600) so that the first scripts/stack up and every
# script after it agree; scripts/stack hands it to redis-server in a config file, never on argv.
# Every process a script starts reaches Redis through REDIS_URL (redacted in evidence).
if [[ ! -s $_lab/redis.pass ]]; then
  (umask 077 && mkdir -p "$_lab" && head -c 18 /dev/urandom | base64 | tr '+/' '-_' >"$_lab/redis.pass")
fi
export REDIS_URL=${REDIS_URL:-redis://:$(cat "$_lab/redis.pass")@127.0.0.1:${REDIS_PORT:-6379}/0}
unset _lab

# cpu_ticks PID: user + system CPU time of a process, all threads, in clock ticks (1/100 s),
# from /proc/PID/stat; fails when the process is gone. The benchmark scripts' per-process CPU.
# The fields are counted after the command name's last ") ": the name may hold spaces.
cpu_ticks() {
  local s f
  s=$(<"/proc/$1/stat") || return 1
  read -r -a f <<<"${s##*) }"
  echo $((f[11] + f[12]))
}
