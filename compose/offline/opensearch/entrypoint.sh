#!/bin/bash
# The opensearch image's way of taking settings: every environment variable whose name has a
# dot (discovery.type, ...) is a setting, written into opensearch.yml in place of the file's own
# line for it. A plugins.<name>.* setting for a plugin this assembly does not have is left out
# with a line in the log: the node would refuse to start on an unknown setting, and the compose
# file's plugins.security.disabled=true asks for what this assembly already is (no security
# plugin).
set -euo pipefail
home=/opt/opensearch conf=/opt/opensearch/config/opensearch.yml
while IFS='=' read -r -d '' key value; do
  [[ $key == *.* ]] || continue
  if [[ $key == plugins.* ]]; then
    plugin=${key#plugins.}; plugin=${plugin%%.*}
    if ! compgen -G "$home/plugins/*$plugin*" >/dev/null; then
      echo "entrypoint: $key=$value left out: no $plugin plugin in this assembly" >&2
      continue
    fi
  fi
  awk -v k="$key:" 'index($0, k) != 1' "$conf" >"$conf.new"
  printf '%s: %s\n' "$key" "$value" >>"$conf.new"
  mv "$conf.new" "$conf"
done < <(env -0)
exec "$home/run.sh" "$@"
