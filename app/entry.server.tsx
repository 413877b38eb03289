import { PassThrough } from "node:stream";
import type { EntryContext, HandleErrorFunction } from "@remix-run/node";
import { createReadableStreamFromReadable } from "@remix-run/node";
import { RemixServer } from "@remix-run/react";
import { isbot } from "isbot";
import { renderToPipeableStream } from "react-dom/server";
import { NonceContext } from "./components/nonce.ts";
import { logger } from "./server/platform/logger.server.ts";
import { newCspNonce, pagePolicy } from "./server/platform/web/security-headers.server.ts";
import { MEDIA_SOURCES } from "./server/streaming/mux.server.ts";

const ABORT_DELAY = 5_000;

// Pages play agents' live streams from the streaming provider; everything else is our own.
const contentSecurityPolicy = pagePolicy({ mediaSources: MEDIA_SOURCES });

export const handleError: HandleErrorFunction = (error, { request }) => {
  if (request.signal.aborted) return;
  logger().error({ err: error, path: new URL(request.url).pathname }, "error rendering a page");
};

export default function handleRequest(
  request: Request,
  responseStatusCode: number,
  responseHeaders: Headers,
  remixContext: EntryContext,
) {
  // Bots and no-JS clients get the whole document at once; browsers get it streamed.
  const waitForAll = isbot(request.headers.get("user-agent") ?? "");
  // Inline scripts (Remix's hydration data, scroll restoration, React's streaming) run only
  // with this answer's nonce; the server adds the constant security headers.
  const nonce = newCspNonce();
  responseHeaders.set("Content-Security-Policy", contentSecurityPolicy(nonce));
  return new Promise<Response>((resolve, reject) => {
    let shellRendered = false;
    const { pipe, abort } = renderToPipeableStream(
      <NonceContext.Provider value={nonce}>
        <RemixServer
          context={remixContext}
          url={request.url}
          abortDelay={ABORT_DELAY}
          nonce={nonce}
        />
      </NonceContext.Provider>,
      {
        nonce,
        [waitForAll ? "onAllReady" : "onShellReady"]() {
          shellRendered = true;
          const body = new PassThrough();
          responseHeaders.set("Content-Type", "text/html; charset=utf-8");
          resolve(
            new Response(createReadableStreamFromReadable(body), {
              headers: responseHeaders,
              status: responseStatusCode,
            }),
          );
          pipe(body);
        },
        onShellError(error: unknown) {
          reject(error);
        },
        onError(error: unknown) {
          responseStatusCode = 500;
          if (shellRendered) logger().error({ err: error }, "error streaming a page");
        },
      },
    );
    setTimeout(abort, ABORT_DELAY);
  });
}
