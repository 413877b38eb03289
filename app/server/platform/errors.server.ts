/** An error a service throws on purpose; the route builder answers it with its status. */
export class DomainError extends Error {
  readonly status: number;
  readonly extra: Record<string, unknown> | undefined;
  /** Headers of the answer (a 503's Retry-After). */
  readonly headers: Record<string, string> | undefined;

  constructor(
    status: number,
    message: string,
    extra?: Record<string, unknown>,
    headers?: Record<string, string>,
  ) {
    super(message);
    this.name = "DomainError";
    this.status = status;
    this.extra = extra;
    this.headers = headers;
  }
}

/**
 * The status a DomainError is answered with, by the API route builder and the page-action
 * helper alike: its own, unless that is not an error status (then it is a bug: 500).
 */
export const domainErrorStatus = (error: DomainError): number =>
  Number.isInteger(error.status) && error.status >= 400 && error.status <= 599 ? error.status : 500;

export const notFound = (what = "Resource") => new DomainError(404, `${what} not found`);
