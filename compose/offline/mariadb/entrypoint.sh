#!/bin/bash
# The mariadb image's first-start contract, as far as compose/docker-compose.yml uses it: on an
# empty data directory, make the system tables, set root's password (MARIADB_ROOT_PASSWORD_FILE,
# root@% as the image does; no other root and no anonymous account), the database and its owner
# (MARIADB_DATABASE, MARIADB_USER, MARIADB_PASSWORD_FILE), the `healthcheck` user healthcheck.sh
# connects as, then source every /docker-entrypoint-initdb.d/*.sh with docker_process_sql at
# hand; then run the command. A first start that did not finish is not taken for a finished one:
# the marker file is written last, and a data directory without it stops the container.
set -euo pipefail
[[ ${1:-} == -* ]] && set -- mariadbd "$@"
DATADIR=/var/lib/mysql SOCKET=/run/mysqld/init.sock DONE=/var/lib/mysql/.first-start-done
log() { printf '%s entrypoint: %s\n' "$(date +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
# A password as an SQL string literal's content, and as an option file's quoted value: an
# operator's own password may hold quotes or backslashes (scripts/compose-secrets keeps them).
sql_str() { local s=${1//\\/\\\\}; printf '%s' "${s//\'/\\\'}"; }
cnf_str() { local s=${1//\\/\\\\}; printf '"%s"' "${s//\"/\\\"}"; }

if [[ $1 == mariadbd && ! -f $DONE ]]; then
  [[ -d $DATADIR/mysql ]] && die "$DATADIR holds an unfinished first start (no $DONE): remove the volume and start again"
  root_pw=$(sql_str "$(cat "${MARIADB_ROOT_PASSWORD_FILE:?the root password file}")")
  log "initialising $DATADIR"
  mariadb-install-db --datadir="$DATADIR" --skip-test-db \
    --auth-root-authentication-method=normal >/dev/null
  mariadbd --datadir="$DATADIR" --skip-networking --socket="$SOCKET" &
  pid=$!
  # Root's password goes in a client file of mode 600, never on a command line; removed however
  # this ends (/run is not a tmpfs here: it would outlive a failed start in the container).
  rootcnf=/run/mysqld/root.cnf
  trap 'rm -f "$rootcnf"' EXIT
  for i in $(seq 120); do
    mariadb-admin --socket="$SOCKET" -uroot ping >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || die "the server of the first start exited"
    ((i < 120)) || die "the server of the first start did not answer in 60 s"
    sleep 0.5
  done
  health_pw=$(head -c 18 /dev/urandom | base64)
  # install-db also makes root@127.0.0.1, root@::1 and root@<hostname> without a password, and
  # may make anonymous accounts: dropped, as the image does, so that root is root@localhost and
  # root@% with the password and nobody logs in without one.
  mariadb --socket="$SOCKET" -uroot <<SQL
ALTER USER 'root'@'localhost' IDENTIFIED BY '$root_pw';
DROP USER IF EXISTS 'root'@'127.0.0.1', 'root'@'::1';
DROP USER IF EXISTS ''@'localhost';
EXECUTE IMMEDIATE CONCAT('DROP USER IF EXISTS ''root''@''', @@hostname, ''', ''''@''', @@hostname, '''');
CREATE USER 'root'@'%' IDENTIFIED BY '$root_pw';
GRANT ALL ON *.* TO 'root'@'%' WITH GRANT OPTION;
CREATE USER 'healthcheck'@'localhost' IDENTIFIED BY '$health_pw';
SQL
  (umask 077 && printf '[client]\nuser=healthcheck\npassword=%s\nsocket=/run/mysqld/mysqld.sock\n' "$(cnf_str "$health_pw")" >"$DATADIR/.my-healthcheck.cnf")
  (umask 077 && printf '[client]\nuser=root\npassword=%s\nsocket=%s\n' "$(cnf_str "$(cat "$MARIADB_ROOT_PASSWORD_FILE")")" "$SOCKET" >"$rootcnf")
  docker_process_sql() { mariadb --defaults-extra-file="$rootcnf" --protocol=socket ${MARIADB_DATABASE:+--database="$MARIADB_DATABASE"} "$@"; }
  if [[ -n ${MARIADB_DATABASE:-} ]]; then
    mariadb --defaults-extra-file="$rootcnf" --protocol=socket <<<"CREATE DATABASE IF NOT EXISTS \`$MARIADB_DATABASE\`;"
  fi
  if [[ -n ${MARIADB_USER:-} ]]; then
    user_pw=$(sql_str "$(cat "${MARIADB_PASSWORD_FILE:?the password file of MARIADB_USER}")")
    docker_process_sql <<SQL
CREATE USER '$MARIADB_USER'@'%' IDENTIFIED BY '$user_pw';
${MARIADB_DATABASE:+GRANT ALL ON \`$MARIADB_DATABASE\`.* TO '$MARIADB_USER'@'%';}
SQL
  fi
  for f in /docker-entrypoint-initdb.d/*; do
    [[ -e $f ]] || continue
    case $f in
      *.sh) log "sourcing $f"
        # shellcheck disable=SC1090 # the init files are the deployment's
        . "$f" ;;
      *.sql) log "running $f"; docker_process_sql <"$f" ;;
      *) log "ignoring $f (neither .sh nor .sql)" ;;
    esac
  done
  mariadb-admin --defaults-extra-file="$rootcnf" shutdown
  wait "$pid" || true
  # `exec` below runs no EXIT trap: removed here on success.
  rm -f "$rootcnf"; trap - EXIT
  touch "$DONE"
  log "initialised"
fi
exec "$@"
