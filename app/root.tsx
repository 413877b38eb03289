// First: configures zod in the browser before any route module builds a schema.
import "./zod-browser.ts";
import {
  data,
  type LinksFunction,
  type LoaderFunctionArgs,
  type MetaFunction,
} from "@remix-run/node";
import {
  Form,
  isRouteErrorResponse,
  Link,
  Links,
  Meta,
  NavLink,
  Outlet,
  Scripts,
  ScrollRestoration,
  useLocation,
  useRouteError,
  useRouteLoaderData,
} from "@remix-run/react";
import type { ReactNode } from "react";
import { useNonce } from "./components/nonce.ts";
import { pageSession } from "./server/accounts/pages.server.ts";
import { pageSpaces } from "./server/organisations/page-space.server.ts";
import styles from "./tailwind.css";

export const links: LinksFunction = () => [{ rel: "stylesheet", href: styles }];

export const meta: MetaFunction = () => [
  { title: "Agent Platform — host your AI agents" },
  {
    name: "description",
    content: "Provision, run, talk to and pay for hosted AI agents on the OpenClaw gateway.",
  },
];

/** Who is signed in (for the header); a rolled session cookie is passed on. */
export async function loader({ request }: LoaderFunctionArgs) {
  const session = await pageSession(request);
  return data(
    {
      user: session
        ? {
            name: session.user.name,
            email: session.user.email,
            isOperator: session.user.isOperator,
          }
        : null,
      spaces: session ? await pageSpaces(request, session.user) : null,
    },
    session?.setCookie ? { headers: { "Set-Cookie": session.setCookie } } : undefined,
  );
}

/** The space switcher: the person's own space or one of their organisations (decision 0203). */
function SpaceSwitcher() {
  const root = useRouteLoaderData<typeof loader>("root");
  const location = useLocation();
  const spaces = root?.spaces;
  if (!spaces || spaces.organisations.length === 0) return null;
  return (
    <Form method="post" action="/spaces" className="flex items-center gap-2">
      <input type="hidden" name="next" value={location.pathname + location.search} />
      <label htmlFor="space" className="sr-only">
        Acting for
      </label>
      <select
        id="space"
        name="space"
        defaultValue={spaces.current?.id ?? "personal"}
        key={spaces.current?.id ?? "personal"}
        onChange={(e) => e.currentTarget.form?.requestSubmit()}
        className="rounded-md border border-slate-300 bg-white px-2 py-1 text-sm"
      >
        <option value="personal">{root?.user?.name ?? "Personal"} (personal)</option>
        {spaces.organisations.map((o) => (
          <option key={o.id} value={o.id}>
            {o.name} ({o.role})
          </option>
        ))}
      </select>
      <noscript>
        <button type="submit" className="text-slate-600 underline">
          Switch
        </button>
      </noscript>
    </Form>
  );
}

function AccountNav() {
  const root = useRouteLoaderData<typeof loader>("root");
  const linkClass = ({ isActive }: { isActive: boolean }) =>
    isActive ? "font-medium text-indigo-700" : "text-slate-600 hover:text-slate-900";
  if (!root?.user) {
    return (
      <ul className="ml-auto flex items-center gap-4">
        <li>
          <NavLink to="/signin" className={linkClass}>
            Sign in
          </NavLink>
        </li>
        <li>
          <NavLink to="/signup" className={linkClass}>
            Sign up
          </NavLink>
        </li>
      </ul>
    );
  }
  return (
    <ul className="ml-auto flex items-center gap-4">
      <li>
        <SpaceSwitcher />
      </li>
      <li>
        <NavLink to="/agents" className={linkClass}>
          Agents
        </NavLink>
      </li>
      <li>
        <NavLink to="/organizations" className={linkClass}>
          Teams
        </NavLink>
      </li>
      <li>
        <NavLink to="/billing" className={linkClass}>
          Billing
        </NavLink>
      </li>
      <li>
        <NavLink to="/usage" className={linkClass}>
          Usage
        </NavLink>
      </li>
      <li>
        <NavLink to="/keys" className={linkClass}>
          API keys
        </NavLink>
      </li>
      {root.user.isOperator ? (
        <li>
          <NavLink to="/ops" className={linkClass}>
            Ops
          </NavLink>
        </li>
      ) : null}
      <li>
        <NavLink to="/settings" className={linkClass} title={root.user.email}>
          {root.user.name}
        </NavLink>
      </li>
      <li>
        <Form method="post" action="/signout">
          <button type="submit" className="text-slate-600 hover:text-slate-900">
            Sign out
          </button>
        </Form>
      </li>
    </ul>
  );
}

const nav = [
  { to: "/", label: "Home" },
  { to: "/models", label: "Models" },
  { to: "/pricing", label: "Pricing" },
  { to: "/api/openapi.json", label: "API", reload: true },
];

function Shell({ children }: { children: ReactNode }) {
  return (
    <div className="flex min-h-screen flex-col bg-slate-50 text-slate-900">
      <header className="border-b border-slate-200 bg-white">
        <nav
          aria-label="Main"
          className="mx-auto flex max-w-5xl items-center gap-6 px-4 py-3 text-sm"
        >
          <Link to="/" className="font-semibold text-indigo-700">
            Agent Platform
          </Link>
          <ul className="flex gap-4">
            {nav.map((item) => (
              <li key={item.to}>
                <NavLink
                  to={item.to}
                  reloadDocument={item.reload}
                  className={({ isActive }) =>
                    isActive ? "font-medium text-indigo-700" : "text-slate-600 hover:text-slate-900"
                  }
                >
                  {item.label}
                </NavLink>
              </li>
            ))}
          </ul>
          <AccountNav />
        </nav>
      </header>
      <main className="mx-auto w-full max-w-5xl flex-1 px-4 py-10">{children}</main>
      <footer className="border-t border-slate-200 py-4 text-center text-xs text-slate-500">
        Agents run on the OpenClaw gateway, one isolated container per account.
      </footer>
    </div>
  );
}

export function Layout({ children }: { children: ReactNode }) {
  const nonce = useNonce();
  return (
    <html lang="en">
      <head>
        <meta charSet="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <Meta />
        <Links />
      </head>
      <body>
        <Shell>{children}</Shell>
        <ScrollRestoration nonce={nonce} />
        <Scripts nonce={nonce} />
      </body>
    </html>
  );
}

export default function App() {
  return <Outlet />;
}

export function ErrorBoundary() {
  const error = useRouteError();
  const notFound = isRouteErrorResponse(error) && error.status === 404;
  return (
    <section className="space-y-4">
      <h1 className="text-2xl font-semibold">
        {notFound ? "Page not found" : "Something went wrong"}
      </h1>
      <p className="text-slate-600">
        {notFound
          ? "There is nothing at this address."
          : "An unexpected error occurred. It has been logged; please try again."}
      </p>
      <Link to="/" className="text-indigo-700 underline">
        Back to the home page
      </Link>
    </section>
  );
}
