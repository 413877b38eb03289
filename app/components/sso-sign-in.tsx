/**
 * "Sign in with SSO" (decision 0210): a work email (its verified domain, decision 0212) or the
 * organisation's SSO name, sent to /api/auth/sso,
 * which starts its connection. A plain GET form, so it works without JavaScript.
 */
export function SsoSignIn() {
  return (
    <form method="get" action="/api/auth/sso" className="space-y-2" aria-label="Sign in with SSO">
      <label htmlFor="sso-org" className="block text-sm font-medium text-slate-700">
        Your work email or your organisation's SSO name
      </label>
      <div className="flex gap-2">
        <input
          id="sso-org"
          name="org"
          required
          maxLength={254}
          autoComplete="email"
          placeholder="you@company.com or acme"
          className="min-w-0 flex-1 rounded-md border border-slate-300 px-3 py-2 text-sm"
        />
        <button
          type="submit"
          className="rounded-md border border-slate-300 bg-white px-4 py-2 text-sm font-medium hover:bg-slate-50"
        >
          Sign in with SSO
        </button>
      </div>
    </form>
  );
}
