/** An error a service throws on purpose; the route builder answers it with its status. */
export class DomainError extends Error {
  readonly status: number;
  readonly extra: Record<string, unknown> | undefined;

  constructor(status: number, message: string, extra?: Record<string, unknown>) {
    super(message);
    this.name = "DomainError";
    this.status = status;
    this.extra = extra;
  }
}

export const notFound = (what = "Resource") => new DomainError(404, `${what} not found`);
