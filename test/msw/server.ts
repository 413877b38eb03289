import { http, passthrough } from "msw";
import { setupServer } from "msw/node";
import { handlers } from "./handlers/index.ts";

// Third-party HTTP is answered by msw handlers, one file per service under ./handlers.
// Anything unhandled fails the test; loopback traffic (our own servers, the test database's
// neighbours) passes through.
export const mswServer = setupServer(
  http.all(/^https?:\/\/(127\.\d+\.\d+\.\d+|localhost|\[::1\])(:\d+)?\//, () => passthrough()),
  ...handlers,
);
