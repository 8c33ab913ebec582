#!/bin/bash
# The opensearch image's way of taking settings: every environment variable named like a setting
# (lower case, with a dot: discovery.type, ...) and not empty is one, written into opensearch.yml
# as a quoted YAML string in place of the file's own line for it. A plugins.<name>.* setting for
# a plugin this assembly does not have is left out with a line in the log (its name only): the
# node would refuse to start on an unknown setting, and the compose file's
# plugins.security.disabled=true asks for what this assembly already is (no security plugin).
# The assembly's launcher takes no arguments: a container command is refused, not dropped.
set -euo pipefail
home=/opt/opensearch conf=/opt/opensearch/config/opensearch.yml
(($# == 0)) || { echo "entrypoint: this image takes its settings from the environment, not arguments ($*)" >&2; exit 2; }
yaml_str() { local s=${1//\\/\\\\}; printf '"%s"' "${s//\"/\\\"}"; }
while IFS= read -r -d '' kv; do
  key=${kv%%=*} value=${kv#*=}
  [[ $key =~ ^[a-z0-9_]+(\.[a-z0-9_]+)+$ && -n $value ]] || continue
  if [[ $key == plugins.* ]]; then
    plugin=${key#plugins.}; plugin=${plugin%%.*}
    if ! compgen -G "$home/plugins/*$plugin*" >/dev/null; then
      echo "entrypoint: setting $key left out: no $plugin plugin in this assembly" >&2
      continue
    fi
  fi
  awk -v k="$key:" 'index($0, k) != 1' "$conf" >"$conf.new"
  printf '%s: %s\n' "$key" "$(yaml_str "$value")" >>"$conf.new"
  mv "$conf.new" "$conf"
done < <(env -0)
exec "$home/run.sh"
