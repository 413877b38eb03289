import { describe, expect, it } from "vitest";
import { z } from "zod";
import { apiDocument, apiRoute, endpoint } from "../../app/server/api.server.ts";

describe("the OpenAPI document", () => {
  const keys = apiRoute({
    GET: endpoint({
      summary: "Read a key",
      auth: "none",
      params: z.object({ id: z.string() }),
      query: z.object({ verbose: z.enum(["0", "1"]).optional() }),
      handler: () => ({}),
    }),
    POST: endpoint({
      summary: "Create a key",
      auth: "none",
      status: 201,
      params: z.object({ id: z.string() }),
      body: z.object({ name: z.string().max(64) }),
      handler: () => ({}),
    }),
  });
  const doc = apiDocument({
    root: { id: "root", path: "", module: {} },
    key: { id: "key", parentId: "root", path: "api/keys/:id", module: keys },
    splat: { id: "splat", parentId: "root", path: "api/*", module: keys },
  });

  it("is OpenAPI 3.1 with every builder route and its inputs", () => {
    expect(doc.openapi).toBe("3.1.0");
    expect(Object.keys(doc.paths)).toEqual(["/api/keys/{id}"]);
    // biome-ignore lint/suspicious/noExplicitAny: reading a generated JSON document
    const ops = doc.paths["/api/keys/{id}"] as Record<string, any>;
    expect(ops.get.parameters).toEqual([
      { name: "id", in: "path", required: true, schema: { type: "string" } },
      {
        name: "verbose",
        in: "query",
        required: false,
        schema: { type: "string", enum: ["0", "1"] },
      },
    ]);
    expect(ops.post.requestBody.content["application/json"].schema).toMatchObject({
      type: "object",
      properties: { name: { type: "string", maxLength: 64 } },
      required: ["name"],
    });
    expect(ops.post.responses["201"]).toBeDefined();
  });
});
