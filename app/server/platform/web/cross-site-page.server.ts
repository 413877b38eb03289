// The page a browser gets for a form posted from another site. The web server answers it before
// Remix runs (Remix's own check would throw and answer an empty 500), so it is plain HTML with
// the app's stylesheet and no script.

const escapeHtml = (text: string) =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!,
  );

/** The site the request says it came from, for the message ("another site" when unreadable). */
function sourceSite(origin: string | undefined): string {
  if (!origin || origin === "null") return "another site";
  try {
    return new URL(origin).host || "another site";
  } catch {
    return "another site";
  }
}

export function crossSitePage(origin: string | undefined, stylesheet: string | undefined): string {
  const site = escapeHtml(sourceSite(origin));
  const css = stylesheet ? `<link rel="stylesheet" href="${escapeHtml(stylesheet)}">` : "";
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Request refused — Agent Platform</title>${css}</head>
<body class="bg-slate-50 text-slate-900"><main class="mx-auto w-full max-w-5xl space-y-4 px-4 py-10">
<h1 class="text-2xl font-semibold">Request refused</h1>
<p class="text-slate-600">This form was sent from ${site}, not from this site, so it was not processed: a page elsewhere cannot act on your account here.</p>
<p class="text-slate-600">If you meant to do this, open the form on this site and send it again.</p>
<p><a href="/" class="text-indigo-700 underline">Back to the home page</a></p>
</main></body></html>
`;
}
