import { type FieldMetadata, getInputProps } from "@conform-to/react";
import type { ReactNode } from "react";

// Form pieces shared by the account pages. Every input has a visible label, errors are linked
// with aria-describedby, and everything works without JavaScript.

export function Field({
  label,
  field,
  type = "text",
  autoComplete,
  hint,
}: {
  label: string;
  // biome-ignore lint/suspicious/noExplicitAny: any field of any form
  field: FieldMetadata<any, any, any>;
  type?: "text" | "email" | "password" | "url" | "hidden";
  autoComplete?: string;
  hint?: ReactNode;
}) {
  const props = getInputProps(field, { type });
  return (
    <div className="space-y-1">
      <label htmlFor={field.id} className="block text-sm font-medium text-slate-700">
        {label}
      </label>
      <input
        {...props}
        key={props.key}
        autoComplete={autoComplete}
        className="block w-full rounded-md border border-slate-300 px-3 py-2 text-sm shadow-sm focus:border-indigo-500 focus:outline-none focus:ring-1 focus:ring-indigo-500"
      />
      {hint ? <p className="text-xs text-slate-500">{hint}</p> : null}
      <Errors id={field.errorId} errors={field.errors} />
    </div>
  );
}

export function Errors({ id, errors }: { id?: string; errors?: string[] | undefined }) {
  if (!errors?.length) return null;
  return (
    <ul id={id} className="text-sm text-red-600" role="alert">
      {errors.map((e) => (
        <li key={e}>{e}</li>
      ))}
    </ul>
  );
}

/** Hidden from people (and from assistive technology); bots that fill every field fill it. */
export function Honeypot({ name = "website" }: { name?: string }) {
  return (
    // A class, not a style attribute: the pages' CSP allows no inline styles.
    <div aria-hidden="true" className="absolute top-auto -left-[10000px]">
      <label htmlFor={`hp-${name}`}>Leave this field empty</label>
      <input id={`hp-${name}`} type="text" name={name} tabIndex={-1} autoComplete="off" />
    </div>
  );
}

export function Submit({ children, busy }: { children: ReactNode; busy?: boolean }) {
  return (
    <button
      type="submit"
      disabled={busy}
      className="rounded-md bg-indigo-600 px-4 py-2 text-sm font-medium text-white hover:bg-indigo-700 disabled:opacity-60"
    >
      {children}
    </button>
  );
}

export function Notice({
  children,
  tone = "info",
}: {
  children: ReactNode;
  tone?: "info" | "error";
}) {
  return (
    <p
      role={tone === "error" ? "alert" : "status"}
      className={
        tone === "error"
          ? "rounded-md bg-red-50 px-3 py-2 text-sm text-red-700"
          : "rounded-md bg-emerald-50 px-3 py-2 text-sm text-emerald-800"
      }
    >
      {children}
    </p>
  );
}

export function Card({ title, children }: { title: string; children: ReactNode }) {
  return (
    <section className="space-y-4 rounded-lg border border-slate-200 bg-white p-6 shadow-sm">
      <h2 className="text-lg font-semibold">{title}</h2>
      {children}
    </section>
  );
}
