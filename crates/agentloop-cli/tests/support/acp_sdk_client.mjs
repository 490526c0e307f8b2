// An editor built on the official ACP TypeScript SDK: starts the agent command given after the
// workspace, initializes, opens a session in the workspace, sends one prompt that leads to an
// edit (allowing it once when asked), and prints one JSON line: the initialize result, the stop
// reason, every session/update, every permission request and every fs/* request. It offers its
// files (fs.readTextFile, fs.writeTextFile) as an editor that saves at once: reads come from
// the disk, writes go to the disk.
// Usage: node acp_sdk_client.mjs SDK_ENTRY_JS WORKSPACE AGENT_COMMAND...
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const [sdkEntry, workspace, ...agentCommand] = process.argv.slice(2);
const acp = await import(pathToFileURL(sdkEntry).href);

const child = spawn(agentCommand[0], agentCommand.slice(1), {
  stdio: ["pipe", "pipe", "inherit"],
});
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const updates = [];
const permissions = [];
const fsCalls = [];
const app = acp
  .client({ name: "agentloop-sdk-test" })
  .onNotification(acp.methods.client.session.update, (ctx) => {
    updates.push(ctx.params);
  })
  .onRequest(acp.methods.client.session.requestPermission, (ctx) => {
    permissions.push(ctx.params);
    const allow = ctx.params.options.find((o) => o.kind === "allow_once");
    return { outcome: { outcome: "selected", optionId: allow.optionId } };
  })
  .onRequest(acp.methods.client.fs.readTextFile, (ctx) => {
    fsCalls.push({ method: "fs/read_text_file", ...ctx.params });
    return { content: readFileSync(ctx.params.path, "utf8") };
  })
  .onRequest(acp.methods.client.fs.writeTextFile, (ctx) => {
    fsCalls.push({ method: "fs/write_text_file", ...ctx.params });
    writeFileSync(ctx.params.path, ctx.params.content);
    return {};
  });

const result = await app.connectWith(stream, async (ctx) => {
  const init = await ctx.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: true, writeTextFile: true } },
  });
  const session = await ctx.request(acp.methods.agent.session.new, {
    cwd: workspace,
    mcpServers: [],
  });
  const response = await ctx.request(acp.methods.agent.session.prompt, {
    sessionId: session.sessionId,
    prompt: [{ type: "text", text: "Replace milk by bread." }],
  });
  return { init, sessionId: session.sessionId, stopReason: response.stopReason };
});
child.stdin.end();
const code = await new Promise((resolve) => child.on("exit", resolve));
console.log(JSON.stringify({ ...result, agentExit: code, updates, permissions, fsCalls }));
process.exit(0);
