// undici unlinks a Request's signal from the signal it follows (the server's, aborted when the
// client goes away) once the Request is garbage-collected: a handler that keeps only
// `request.signal` for a long answer never hears that its client left (decision 0220). A long
// answer holds its Request until it ends.

/** `stream`, passed through, holding `request` reachable until it ends, fails or is cancelled. */
export function holdingRequest(
  stream: ReadableStream<Uint8Array>,
  request: Request,
): ReadableStream<Uint8Array> {
  const held: { request?: Request } = { request };
  const reader = stream.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          held.request = undefined;
          controller.close();
        } else controller.enqueue(value);
      } catch (error) {
        held.request = undefined;
        controller.error(error);
      }
    },
    cancel(reason) {
      held.request = undefined;
      return reader.cancel(reason);
    },
  });
}
