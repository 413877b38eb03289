// The temporary-file sweeper's shell script (issue 50, decision 0224): run inside a gateway
// container by `docker exec` (busybox sh, as the gateway's user) and by its test on a plain
// folder with the host's sh, so both take the same code path.
//
// Arguments: <minutes> <log minutes> <root>... For each root (the gateway's /tmp and its state
// directory's tmp/), it removes what OpenClaw leaves behind, nothing else:
// - `openclaw-*` / `.openclaw-*` folders (OpenClaw's mkdtemp prefixes: update, marketplace,
//   git, plugin captures, npm cache, publication index...), except the live ones it keeps for
//   its whole run (`openclaw-state-locks-<uid>`, `.openclaw-terminal-staging-<uid>`, and the
//   per-user folder `openclaw-<uid>`);
// - folders inside its own temporary folders (`openclaw/`, `openclaw-<uid>/`), and their dated
//   logs (`openclaw-*.log`) older than <log minutes>.
// A folder is stale when nothing in it changed for <minutes> and no process has a file in it
// open or works in it (/proc: cwd and fds); anything else (the agent's own files, the image's
// compile cache) is left. Prints one `removed <path>` line per removal.

export const TMP_SWEEP_SCRIPT = String.raw`
age="$1"; logage="$2"; shift 2
held=$(ls -l /proc/[0-9]*/cwd /proc/[0-9]*/fd/ 2>/dev/null | sed -n 's/.* -> //p')
in_use() {
  printf '%s\n' "$held" | awk -v d="$1" 'index($0, d "/") == 1 || $0 == d { f = 1 } END { exit !f }'
}
changed_within() {
  [ -n "$(find "$1" -mmin "-$2" 2>/dev/null | head -n 1)" ]
}
remove() {
  [ -e "$1" ] && [ ! -L "$1" ] || return 0
  changed_within "$1" "$2" && return 0
  in_use "$1" && return 0
  rm -rf -- "$1" && printf 'removed %s\n' "$1"
}
for root in "$@"; do
  [ -d "$root" ] && [ ! -L "$root" ] || continue
  for e in "$root"/openclaw-* "$root"/.openclaw-*; do
    [ -d "$e" ] || continue
    case "$(basename -- "$e")" in
      openclaw-state-locks-*|.openclaw-terminal-staging-*|openclaw-[0-9]*) continue ;;
    esac
    remove "$e" "$age"
  done
  for own in "$root"/openclaw "$root"/openclaw-[0-9]*; do
    [ -d "$own" ] && [ ! -L "$own" ] || continue
    for e in "$own"/* "$own"/.[!.]*; do
      if [ -d "$e" ]; then remove "$e" "$age"; fi
    done
    for e in "$own"/openclaw-*.log; do
      if [ -f "$e" ]; then remove "$e" "$logage"; fi
    done
  done
done
exit 0
`;
