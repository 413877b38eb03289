// The one check for every redirect target taken from a request (sign-in's redirectTo, the
// wallet callback's callbackUrl, the agent ingress's `next`): only an absolute path on the same
// origin, anything else is the caller's default. Browsers are lenient readers of a Location
// (`/\evil.example` and `/\t/evil.example` both mean //evil.example), so instead of guessing how
// one will read a doubtful value, a doubtful value is refused.

const SAME_ORIGIN = "http://same-origin.invalid";
// Whitespace and control characters (browsers strip some of them, which can join `/` and `/`).
const UNSAFE_CHARACTER = /[\s\p{Cc}\p{Cf}\\]/u;

function acceptable(path: string): boolean {
  if (!path.startsWith("/") || path.startsWith("//")) return false;
  if (UNSAFE_CHARACTER.test(path)) return false;
  try {
    // The URL parser is the browser's: the path must stay on this origin as it reads it.
    return new URL(path, SAME_ORIGIN).origin === SAME_ORIGIN;
  } catch {
    return false;
  }
}

/**
 * `to` when it is a same-origin absolute path (a single leading `/`, no backslash, whitespace or
 * control character, no scheme), its path also once percent-decoded (`/%5Cevil.example` is
 * refused: whatever decodes it once more reads `/\evil.example`); `fallback` otherwise. The
 * query and fragment are only checked raw: encoded spaces there are ordinary.
 */
export function safeRedirect(to: unknown, fallback: string): string {
  if (typeof to !== "string" || !acceptable(to)) return fallback;
  const path = to.split(/[?#]/, 1)[0] as string;
  let decoded: string;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    return fallback;
  }
  return acceptable(decoded) ? to : fallback;
}
