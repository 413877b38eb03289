// Remix's single fetch (future.v3_singleFetch in remix.config.js): loader/action data types are
// inferred the single-fetch way (plain objects, `data()` with a status), not as Jsonify<Response>.
import "@remix-run/node";

declare module "@remix-run/node" {
  interface Future {
    v3_singleFetch: true;
  }
}
