import { redirect } from "@remix-run/node";

/** 303 to the sign-in page, coming back to this very URL afterwards. */
export function signInRedirect(request: Request): Response {
  const url = new URL(request.url);
  return redirect(`/signin?redirectTo=${encodeURIComponent(url.pathname + url.search)}`, 303);
}
