#!/bin/bash
# The mariadb image's first-start contract, as far as compose/docker-compose.yml uses it: on an
# empty data directory, make the system tables, set root's password (MARIADB_ROOT_PASSWORD_FILE,
# root@% as the image does), the database and its owner (MARIADB_DATABASE, MARIADB_USER,
# MARIADB_PASSWORD_FILE), the `healthcheck` user healthcheck.sh connects as, then source every
# /docker-entrypoint-initdb.d/*.sh with docker_process_sql at hand; then run the command.
set -euo pipefail
[[ ${1:-} == -* ]] && set -- mariadbd "$@"
DATADIR=/var/lib/mysql SOCKET=/run/mysqld/init.sock
log() { printf '%s entrypoint: %s\n' "$(date +%T)" "$*" >&2; }

if [[ $1 == mariadbd && ! -d $DATADIR/mysql ]]; then
  root_pw=$(cat "${MARIADB_ROOT_PASSWORD_FILE:?the root password file}")
  log "initialising $DATADIR"
  mariadb-install-db --datadir="$DATADIR" --skip-test-db --auth-root-authentication-method=normal >/dev/null
  mariadbd --datadir="$DATADIR" --skip-networking --socket="$SOCKET" &
  pid=$!
  for _ in $(seq 60); do mariadb-admin --socket="$SOCKET" -uroot ping >/dev/null 2>&1 && break; sleep 0.5; done
  health_pw=$(head -c 18 /dev/urandom | base64)
  mariadb --socket="$SOCKET" -uroot <<SQL
ALTER USER 'root'@'localhost' IDENTIFIED BY '$root_pw';
CREATE USER 'root'@'%' IDENTIFIED BY '$root_pw';
GRANT ALL ON *.* TO 'root'@'%' WITH GRANT OPTION;
CREATE USER 'healthcheck'@'localhost' IDENTIFIED BY '$health_pw';
SQL
  (umask 077 && printf '[client]\nuser=healthcheck\npassword=%s\nsocket=/run/mysqld/mysqld.sock\n' "$health_pw" >"$DATADIR/.my-healthcheck.cnf")
  # Root's password in a client file of mode 600, not on any command line (ps would show it).
  rootcnf=/run/mysqld/root.cnf
  (umask 077 && printf '[client]\nuser=root\npassword=%s\nsocket=%s\n' "$root_pw" "$SOCKET" >"$rootcnf")
  docker_process_sql() { mariadb --defaults-extra-file="$rootcnf" --protocol=socket "$@"; }
  if [[ -n ${MARIADB_DATABASE:-} ]]; then
    docker_process_sql <<<"CREATE DATABASE IF NOT EXISTS \`$MARIADB_DATABASE\`;"
  fi
  if [[ -n ${MARIADB_USER:-} ]]; then
    user_pw=$(cat "${MARIADB_PASSWORD_FILE:?the password file of MARIADB_USER}")
    docker_process_sql <<SQL
CREATE USER '$MARIADB_USER'@'%' IDENTIFIED BY '$user_pw';
${MARIADB_DATABASE:+GRANT ALL ON \`$MARIADB_DATABASE\`.* TO '$MARIADB_USER'@'%';}
SQL
  fi
  for f in /docker-entrypoint-initdb.d/*.sh; do
    [[ -e $f ]] || continue
    log "sourcing $f"
    # shellcheck disable=SC1090 # the init files are the deployment's
    . "$f"
  done
  mariadb-admin --defaults-extra-file="$rootcnf" shutdown
  rm -f "$rootcnf"
  wait "$pid" || true
  log "initialised"
fi
exec "$@"
