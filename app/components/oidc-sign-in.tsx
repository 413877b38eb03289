/** The install-wide OpenID Connect button (docs/decisions/0205); a plain link, so no JS needed. */
export function OidcSignIn({ label }: { label: string }) {
  return (
    <a
      href="/api/auth/oidc"
      className="block rounded-md bg-indigo-600 px-4 py-2 text-center text-sm font-medium text-white hover:bg-indigo-700"
    >
      Sign in with {label}
    </a>
  );
}
