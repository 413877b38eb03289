import type { InstanceRow } from "../../app/server/agents/instances.server.ts";
import { instanceImage, ownerLabels, rt, STATE_DIR } from "./engine.ts";

// A backup is taken from a running gateway, so its state database holds that gateway's leases
// (OpenClaw's `state_leases`: the gateway owner lease, startup migrations), each naming the
// process and host that held it. A gateway booted on that state in another container (an
// import, a recovery on another node) cannot tell whether a process on another host is alive,
// so it refuses to start until the lease expires (300 s), restarting in a loop meanwhile. No
// process holds a state that was just unpacked into a fresh volume: its leases are released.

const DATABASE = `${STATE_DIR}/state/openclaw.sqlite`;

// Run with the image's Node (node:sqlite); argv[1] is the database. Prints how many it released.
const RELEASE = `
const { existsSync } = require("node:fs");
const { DatabaseSync } = require("node:sqlite");
const file = process.argv[1];
let released = 0;
if (existsSync(file)) {
  const db = new DatabaseSync(file);
  const table = db.prepare("select 1 from sqlite_master where type = 'table' and name = 'state_leases'").get();
  if (table) released = Number(db.prepare("delete from state_leases").run().changes);
  db.close();
}
console.log(released);
`;

/** Releases every lease in the state on `volume`; returns how many there were. */
export async function releaseStateLeases(
  volume: string,
  row: Pick<InstanceRow, "id"> & Partial<Pick<InstanceRow, "image" | "image_id">>,
): Promise<number> {
  const result = await rt().runOnce({
    image: instanceImage(row),
    volume,
    volumeTarget: STATE_DIR,
    // Node only when there is a database: a state without one needs nothing, in any image.
    entrypoint: ["sh", "-c"],
    cmd: ['if [ -e "$1" ]; then exec node -e "$0" "$1"; fi; echo 0', RELEASE, DATABASE],
    labels: ownerLabels(row.id),
  });
  const released = Number(result.stdout.trim().split("\n").at(-1));
  if (result.exitCode !== 0 || !Number.isInteger(released)) {
    const said = `${result.stderr}${result.stdout}`.trim().slice(-500);
    throw new Error(`could not release the state's leases (exit ${result.exitCode}): ${said}`);
  }
  return released;
}
