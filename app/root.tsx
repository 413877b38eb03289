import type { LinksFunction, MetaFunction } from "@remix-run/node";
import {
  isRouteErrorResponse,
  Link,
  Links,
  Meta,
  NavLink,
  Outlet,
  Scripts,
  ScrollRestoration,
  useRouteError,
} from "@remix-run/react";
import type { ReactNode } from "react";
import styles from "./tailwind.css";

export const links: LinksFunction = () => [{ rel: "stylesheet", href: styles }];

export const meta: MetaFunction = () => [
  { title: "Agent Platform — host your AI agents" },
  {
    name: "description",
    content: "Provision, run, talk to and pay for hosted AI agents on the OpenClaw gateway.",
  },
];

const nav = [
  { to: "/", label: "Home" },
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
        <ScrollRestoration />
        <Scripts />
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
