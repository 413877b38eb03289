import { RemixBrowser } from "@remix-run/react";
import { StrictMode, startTransition } from "react";
import { hydrateRoot } from "react-dom/client";
import { z } from "zod";

// The pages' CSP allows no eval: zod's compiled parsers would probe `new Function` (and each
// probe is reported as a violation), so the browser's zod runs without them. The server keeps
// them (its schemas run on every API call).
z.config({ jitless: true });

startTransition(() => {
  hydrateRoot(
    document,
    <StrictMode>
      <RemixBrowser />
    </StrictMode>,
  );
});
