# Sourced before the README's quick start (test/quickstart.test.ts): stop at the first failure,
# and log each curl's status, method and URL to $CALLS while passing its body on unchanged, so
# the README's blocks run as they are written. A refused request ends the whole script at once
# (`kill $$` reaches it from a subshell too), rather than leave a wait for its send looping.
set -euo pipefail
curl() {
  local out answer body
  out=$(command curl --write-out '\n%{http_code} %{method} %{url_effective}' "$@") || return
  answer=${out##*$'\n'}
  body=${out%$'\n'*}
  printf '%s\n' "$answer" >> "$CALLS"
  printf '%s' "$body"
  if [ "${answer%% *}" -ge 400 ]; then
    printf 'refused: %s %s\n' "$answer" "$body" >&2
    kill $$
  fi
}
