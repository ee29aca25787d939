// An MCP server written on the official TypeScript SDK (nobody here wrote the SDK), for the
// gateway tests: `node server.mjs stdio` or `node server.mjs http PORT` (Streamable HTTP on /mcp,
// one session per client).
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

function build() {
  const server = new McpServer({ name: "ts-fixture", version: "1.0.0" });
  server.registerTool("shout", {
    title: "Shout",
    description: "Upper-case the text.",
    inputSchema: { text: z.string().describe("What to shout") },
    annotations: { readOnlyHint: true },
    _meta: { "example.com/origin": "ts" },
  }, async ({ text }) => ({ content: [{ type: "text", text: text.toUpperCase() }] }));
  server.registerTool("steps", {
    description: "Report progress n times, then answer.",
    inputSchema: { n: z.number().int() },
  }, async ({ n }, extra) => {
    const token = extra._meta?.progressToken;
    for (let i = 1; i <= n; i++) {
      if (token !== undefined) {
        await extra.sendNotification({ method: "notifications/progress", params: { progressToken: token, progress: i, total: n } });
      }
    }
    return { content: [{ type: "text", text: `did ${n} steps` }] };
  });
  server.registerTool("confirm", {
    description: "Ask the user to confirm (elicitation), then say what they chose.",
    inputSchema: {},
  }, async () => {
    const answer = await server.server.elicitInput({
      message: "Go ahead?",
      requestedSchema: { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] },
    });
    return { content: [{ type: "text", text: `action=${answer.action} ok=${answer.content?.ok}` }] };
  });
  server.registerResource("motd", "ts://motd", { mimeType: "text/plain", description: "Message of the day" },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: "text/plain", text: "Hello from TypeScript" }] }));
  server.registerPrompt("haiku", { description: "A haiku about a topic", argsSchema: { topic: z.string() } },
    ({ topic }) => ({ messages: [{ role: "user", content: { type: "text", text: `Write a haiku about ${topic}` } }] }));
  return server;
}

const [mode, port] = process.argv.slice(2);
if (mode === "stdio") {
  await build().connect(new StdioServerTransport());
} else if (mode === "http") {
  const sessions = new Map();
  createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : undefined;
    const sid = req.headers["mcp-session-id"];
    let transport = sid ? sessions.get(sid) : undefined;
    if (!transport) {
      if (sid) { res.writeHead(404).end(); return; }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => sessions.set(id, transport),
      });
      transport.onclose = () => { if (transport.sessionId) sessions.delete(transport.sessionId); };
      await build().connect(transport);
    }
    await transport.handleRequest(req, res, body);
  }).listen(Number(port), "127.0.0.1");
} else {
  console.error("usage: node server.mjs stdio | http PORT");
  process.exit(2);
}
