// The shell an image update's snapshot and rollback copy the gateway's state with (one-shot
// container, as root with CHOWN/DAC_OVERRIDE/FOWNER). On a limited volume the agent's
// `workspace` is a nested btrfs subvolume in the agent's own qgroup (decision 0224): `rm -rf`
// would take it too (rmdir removes an empty subvolume) and `cp -a` put a plain folder in its
// place, outside that group, so the agent lost its own limit until the volume was remade.
// A folder on another device than its parent (a nested subvolume, st_dev differs) is emptied
// instead of removed, and the copy merges into it (decision 0227).

/** Makes `to` a faithful copy of `from`, keeping the nested subvolumes under `to`. */
export function copyStateScript(from: string, to: string): string {
  return [
    "set -e",
    // POSIX sh has no local variables: the loop's list is expanded before the recursion.
    'empty() { for e in "$1"/* "$1"/.[!.]* "$1"/..?*; do',
    '  if [ -d "$e" ] && [ ! -L "$e" ] && [ "$(stat -c %d "$e")" != "$(stat -c %d "$1")" ]; then empty "$e";',
    '  elif [ -e "$e" ] || [ -L "$e" ]; then rm -rf "$e"; fi',
    "done; }",
    `empty ${to}`,
    `cp -a ${from}/. ${to}/`,
    `chown 1000:1000 ${to}`,
    `chmod 700 ${to}`,
  ].join("\n");
}
