#!/bin/bash
# The mariadb image's healthcheck.sh, for the checks the compose file names:
#   --connect             the server takes a connection (as the `healthcheck` user the
#                         entrypoint made, over the server's socket)
#   --innodb_initialized  InnoDB is up (the engine is listed as available)
set -euo pipefail
cnf=/var/lib/mysql/.my-healthcheck.cnf
[[ -r $cnf ]] || { echo "healthcheck: no $cnf yet (first start not finished)" >&2; exit 1; }
q() { mariadb --defaults-extra-file="$cnf" -N -B -e "$1"; }
for check in "$@"; do
  case $check in
    --connect) q 'SELECT 1' >/dev/null ;;
    --innodb_initialized)
      [[ $(q "SELECT 1 FROM information_schema.ENGINES WHERE engine = 'InnoDB' AND support IN ('YES', 'DEFAULT')") == 1 ]] \
        || { echo "healthcheck: InnoDB is not initialised" >&2; exit 1; } ;;
    *) echo "healthcheck: unknown check $check" >&2; exit 2 ;;
  esac
done
