import path from "node:path";

/** Runs a command on the volume's host (the local one, or a Swarm node's storage agent). */
export type Run = (file: string, args: string[]) => Promise<string>;

// A limited volume's agent subvolumes made nested again (decision 0235). Before decision 0227
// an image update's state copy removed `data/workspace` (a nested subvolume in the agent's
// qgroup `1/<id>`, decision 0224) and put a plain folder in its place: the agent's files fell
// back into the volume's own group, without the gateway's reserve. The repair makes a new
// subvolume beside the volume's folders, puts it in the agent's group while it is empty (btrfs
// adds an empty subvolume to a group at once; one holding data marks the quotas inconsistent
// and btrfs-progs 6.2 schedules a rescan), reflinks the files in (`cp -a --reflink=always`:
// extents shared, not written again; owners, modes and times kept) and swaps the two.
// Only while no gateway writes the volume (worker/instances/container.ts: before a start).
//
// Its work folders are in the volume's own folder, which no container mounts: `.repair-new-*`
// (the copy) and `.repair-old-*` (the plain folder). The plain folder is renamed aside only
// once the copy is whole, so an interrupted repair is finished or undone by the next one.

/** The gateway image's user (gateway/build.sh: USER 1000:1000) owns its state folders. */
export const GATEWAY_UID = 1000;
/** A limited volume's nested subvolumes, relative to its folder, and how ensure makes them. */
const NESTED: Record<string, { owner: string; mode: string }> = {
  "data/workspace": { owner: `${GATEWAY_UID}:${GATEWAY_UID}`, mode: "700" },
  tmp: { owner: "0:0", mode: "1777" },
};
const WORK = ".repair-";

export interface LayoutState {
  /** Nested paths that are no subvolume: a plain folder (an old copy's), or missing. */
  flattened: string[];
  /** An interrupted repair's work folders (names in the volume's folder). */
  leftovers: string[];
}

export interface LayoutTarget {
  /** The storage root (qgroup commands name it). */
  root: string;
  /** The volume's folder (its subvolume). */
  subvolume: string;
  /** The agent's qgroup, 1/<id>. */
  group: string;
  /** The agent group's limit to restore afterwards (undefined: none). */
  agentLimitBytes: number | undefined;
}

/** A failed command's stderr (its message when it has none). */
export const stderrOf = (error: unknown) =>
  (error as { stderr?: string }).stderr ?? (error as Error).message;

/**
 * One `find` over the volume's folder: the subvolume roots (inode 256) two levels down and any
 * work folder; undefined when the folder does not exist (a volume made before the root).
 */
export async function inspectLayout(run: Run, subvolume: string): Promise<LayoutState | undefined> {
  let out: string;
  try {
    out = await run("find", [
      subvolume,
      ...["-mindepth", "1", "-maxdepth", "2", "-xdev"], // into no nested subvolume
      ...["(", "-inum", "256", "-o", "-name", `${WORK}*`, ")", "-print"],
    ]);
  } catch (error) {
    if (/No such file or directory/.test(stderrOf(error))) return undefined;
    throw error;
  }
  const found = out
    .split("\n")
    .filter(Boolean)
    .map((line) => path.relative(subvolume, line));
  return {
    flattened: Object.keys(NESTED).filter((nested) => !found.includes(nested)),
    leftovers: found.filter((name) => !name.includes("/") && name.startsWith(WORK)),
  };
}

export const layoutWhole = (state: LayoutState) =>
  state.flattened.length === 0 && state.leftovers.length === 0;

function foldersOf(subvolume: string, nested: string) {
  const name = path.basename(nested);
  return {
    into: path.join(subvolume, nested),
    fresh: path.join(subvolume, `${WORK}new-${name}`),
    aside: path.join(subvolume, `${WORK}old-${name}`),
  };
}

async function typeOf(run: Run, target: string): Promise<string | undefined> {
  try {
    return (await run("stat", ["-c", "%F", target])).trim();
  } catch {
    return undefined;
  }
}

/** Finishes (the copy was whole) or undoes (it was not) what an interrupted repair left. */
async function recover(run: Run, target: LayoutTarget, leftovers: string[]): Promise<void> {
  for (const nested of Object.keys(NESTED)) {
    const { into, fresh, aside } = foldersOf(target.subvolume, nested);
    const left = (folder: string) => leftovers.includes(path.basename(folder));
    if (left(aside)) {
      const there = await typeOf(run, into);
      if (there === undefined) await run("mv", ["-T", left(fresh) ? fresh : aside, into]);
      else if (left(fresh)) throw new Error(`${into} came back beside ${aside}: left for a look`);
      if (await typeOf(run, aside)) await run("rm", ["-rf", aside]);
    } else if (left(fresh)) {
      await run("btrfs", ["subvolume", "delete", fresh]); // a copy never finished
    }
  }
}

/**
 * One nested path made a subvolume in the agent's group again, its files and owner kept;
 * returns the plain folder, now aside, for the caller to remove.
 */
async function renest(run: Run, target: LayoutTarget, nested: string): Promise<string | undefined> {
  const { into, fresh, aside } = foldersOf(target.subvolume, nested);
  const type = await typeOf(run, into);
  // The gateway's user owns `data/`: a link there is not followed (this runs as the host's
  // root, and `cp` would copy what it names on the host into the volume).
  if (type !== undefined && type !== "directory") throw new Error(`${into} is a ${type}`);
  const present = type !== undefined; // else the agent removed it
  await run("btrfs", ["subvolume", "create", fresh]);
  try {
    const id = (await run("btrfs", ["inspect-internal", "rootid", fresh])).trim();
    const said = await run("btrfs", ["qgroup", "assign", `0/${id}`, target.group, target.root]);
    // Not expected (it is empty); if btrfs had to, the limits wait for true counts.
    if (/rescan scheduled/.test(said)) await run("btrfs", ["quota", "rescan", "-W", target.root]);
    if (present) {
      await run("cp", ["-a", "--reflink=always", `${into}/.`, `${fresh}/`]);
    } else {
      await run("chown", [NESTED[nested]!.owner, fresh]);
      await run("chmod", [NESTED[nested]!.mode, fresh]);
    }
  } catch (error) {
    await run("btrfs", ["subvolume", "delete", fresh]).catch(() => "");
    throw error;
  }
  if (present) await run("mv", ["-T", into, aside]); // the copy is whole
  try {
    await run("mv", ["-T", fresh, into]);
  } catch (error) {
    if (present) await run("mv", ["-T", aside, into]).catch(() => "");
    throw error;
  }
  return present ? aside : undefined;
}

/**
 * Repairs what `state` found; returns the nested paths made subvolumes again. The agent's
 * limit is lifted meanwhile (the copy counts in its group before the plain folder goes, and a
 * flattened workspace may hold more than the agent's part); the volume's own limit stays. It
 * is lifted only while a path is flattened or a work folder is left, so a repair stopped at
 * any point runs again at the next start and sets it back.
 */
export async function repairLayout(
  run: Run,
  target: LayoutTarget,
  state: LayoutState,
): Promise<string[]> {
  const agentLimit = (bytes: number | undefined) =>
    run("btrfs", [
      "qgroup",
      "limit",
      bytes === undefined ? "none" : String(bytes),
      target.group,
      target.root,
    ]);
  let flattened = state.flattened;
  const asides: string[] = [];
  await agentLimit(undefined);
  try {
    if (state.leftovers.length > 0) {
      await recover(run, target, state.leftovers);
      flattened = (await inspectLayout(run, target.subvolume))?.flattened ?? [];
    }
    for (const nested of flattened) {
      const aside = await renest(run, target, nested);
      if (aside) asides.push(aside);
    }
  } finally {
    await agentLimit(target.agentLimitBytes);
  }
  for (const aside of asides) await run("rm", ["-rf", aside]);
  return flattened;
}
