import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

// Fixes applied to installed dependencies (npm's postinstall), each until its upstream ships
// one. A patch whose original text is gone (the dependency changed) fails the install loudly, so
// an upgrade is checked against it rather than silently unpatched. docs/decisions/0236.
//
// postgres.js 3.4.x, porsager/postgres#1154, #1199, #1208: a write deferred with setImmediate
// runs after the connection closed (a transaction's own ROLLBACK after its backend died, a
// released reserved connection whose backend died) and dereferences the null socket: an
// uncaught TypeError that ends the process. Patched: such a write fails the connection's
// queries as CONNECTION_CLOSED and hands the connection back to the pool as closed (the pool
// connects it again: left where it was, it failed every query sent to it, which the soak saw
// for minutes), and a released connection that closed stays closed instead of being handed
// the next query.

interface Patch {
  files: string[];
  original: string;
  patched: string;
}

const MARK = "patched by agent-hosting-platform (docs/decisions/0236)";

const patches: Patch[] = [
  {
    files: ["postgres/src/connection.js", "postgres/cjs/src/connection.js"],
    original: "  function nextWrite(fn) {\n    const x = socket.write(chunk, fn)\n",
    patched:
      "  function nextWrite(fn) {\n" +
      `    // ${MARK}: the connection closed before this write\n` +
      "    if (socket === null) {\n" +
      "      chunk = nextWriteTimer = null\n" +
      "      const closedError = Errors.connection('CONNECTION_CLOSED', options)\n" +
      "      error(closedError)\n" +
      "      onclose(connection, closedError)\n" +
      "      return false\n" +
      "    }\n" +
      "    const x = socket.write(chunk, fn)\n",
  },
  {
    files: ["postgres/src/index.js", "postgres/cjs/src/index.js"],
    original: "    sql.release = () => {\n      c.reserved = null\n      onopen(c)\n    }\n",
    patched:
      "    sql.release = () => {\n" +
      "      c.reserved = null\n" +
      `      // ${MARK}: a closed one stays closed\n` +
      "      c.queue === closed || onopen(c)\n" +
      "    }\n",
  },
];

const modules = path.join(process.cwd(), "node_modules");
let applied = 0;
for (const patch of patches) {
  for (const file of patch.files) {
    const target = path.join(modules, file);
    const text = readFileSync(target, "utf8");
    if (text.includes(patch.patched)) continue;
    if (!text.includes(patch.original)) {
      throw new Error(`patch-dependencies: ${file} changed upstream; check decision 0236's patch`);
    }
    writeFileSync(target, text.replace(patch.original, patch.patched));
    applied++;
  }
}
if (applied > 0) process.stdout.write(`patch-dependencies: ${applied} file(s) patched\n`);
