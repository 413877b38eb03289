import { afterEach, describe, expect, it } from "vitest";
import * as opsUsers from "../../app/routes/ops.users._index.tsx";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { cookieOf, newUser, signInUser, uniqueEmail } from "../accounts/helpers.ts";
import { verifyEmailByResetLink } from "../accounts/verify-email.ts";
import { getPage } from "./support.ts";

// An address in OPERATOR_EMAILS makes an operator only once that mailbox is proven: registering
// proves nothing, so anyone could otherwise sign up as the listed operator (issue 47, finding 1;
// docs/decisions/0196).

afterEach(() => {
  delete process.env.OPERATOR_EMAILS;
  resetEnvCache();
});

describe("OPERATOR_EMAILS", () => {
  it("an unverified sign-up with a listed address is refused /ops; after the real verification it is let in", async () => {
    await newUser(); // the install's first account (the operator by the first-account rule)
    const listed = uniqueEmail("listed-operator");
    process.env.OPERATOR_EMAILS = `someone@example.com, ${listed.toUpperCase()}`;
    resetEnvCache();

    const squatter = await newUser({ email: listed });
    expect((await getPage(opsUsers.loader, "/ops/users", squatter.cookie)).status).toBe(403);

    // The mailbox's owner proves it with the reset link; the registrant's session goes with it.
    const password = await verifyEmailByResetLink(listed);
    expect((await getPage(opsUsers.loader, "/ops/users", squatter.cookie)).status).not.toBe(200);
    const signedIn = await signInUser(listed, password);
    expect(signedIn.status).toBe(200);
    expect((await getPage(opsUsers.loader, "/ops/users", cookieOf(signedIn))).status).toBe(200);
  });
});
