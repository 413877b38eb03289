import { z } from "zod";

// The pages' CSP allows no eval. zod compiles object parsers with `new Function`, and probes
// for it when a schema is built; under the CSP each probe is reported as a violation. So the
// browser's zod runs without compiled parsers. root.tsx imports this first, before any route
// module builds a schema. The server keeps them (its schemas run on every API call).
if (typeof document !== "undefined") z.config({ jitless: true });
