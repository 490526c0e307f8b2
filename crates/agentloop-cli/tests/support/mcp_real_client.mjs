// A real MCP client for `agentloop mcp-server`: the official TypeScript SDK's `Client` over
// stdio. Used by tests/mcp_real_client.rs.
//
// Usage: node mcp_real_client.mjs <dir with node_modules/@modelcontextprotocol/sdk> \
//          <agentloop binary> <workspace> <approve policy>
// Prints one JSON object: the server info, the listed tools, and the results of the calls below
// (as the SDK returns them). Exits non-zero on any protocol failure.
import { createRequire } from "node:module";
import path from "node:path";

const [sdkDir, bin, workspace, policy] = process.argv.slice(2);
const require = createRequire(path.join(sdkDir, "package.json"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");

const transport = new StdioClientTransport({
  command: bin,
  args: ["mcp-server", "--workspace", workspace, "--approve", policy],
  stderr: "inherit",
});
const client = new Client({ name: "agentloop-interop-test", version: "1.0.0" });
await client.connect(transport);

const listed = await client.listTools();
const call = (name, args) => client.callTool({ name, arguments: args });
const out = {
  server: client.getServerVersion(),
  tools: listed.tools.map((t) => ({
    name: t.name,
    inputType: t.inputSchema?.type ?? null,
    annotations: t.annotations ?? null,
  })),
  read_file: await call("read_file", { path: "notes.txt" }),
  list_dir: await call("list_dir", { path: "." }),
  write_file: await call("write_file", { path: "new.txt", content: "should not be written\n" }),
  escape: await call("read_file", { path: "../outside.txt" }),
};
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
