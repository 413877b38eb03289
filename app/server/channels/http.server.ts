import { env } from "../platform/env.server.ts";

// Shared by the third-party clients of channel provisioning: a fetch with a timeout, and the
// two ways a call fails (the credential is refused, or the service does not answer properly).

/** The service refused the credential (a client mistake: 400 naming it). */
export class CredentialRejected extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CredentialRejected";
  }
}

/** The service is down, slow, or answered something unexpected (502). */
export class ServiceUnavailable extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ServiceUnavailable";
  }
}

export async function fetchWithTimeout(
  service: string,
  url: string,
  init: RequestInit = {},
): Promise<Response> {
  try {
    return await fetch(url, {
      ...init,
      signal: AbortSignal.timeout(env().PROVISION_HTTP_TIMEOUT_MS),
    });
  } catch (error) {
    throw new ServiceUnavailable(`${service} did not answer: ${(error as Error).message}`);
  }
}

export async function jsonOf<T>(service: string, response: Response): Promise<T> {
  try {
    return (await response.json()) as T;
  } catch {
    throw new ServiceUnavailable(`${service} answered ${response.status} without JSON`);
  }
}
