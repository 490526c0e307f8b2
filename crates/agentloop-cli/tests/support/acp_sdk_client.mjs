// An editor built on the official ACP TypeScript SDK: starts the agent command given after the
// workspace, initializes, opens a session in the workspace, sends one prompt that leads to an
// edit and a shell command (allowing each once when asked), and prints one JSON line: the
// initialize result, the stop reason, every session/update, every permission request, every
// fs/* request and every terminal/* request. It offers its files (fs.readTextFile,
// fs.writeTextFile) as an editor that saves at once: reads come from the disk, writes go to the
// disk; and its terminals, which run the program they are asked to run.
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
const terminalCalls = [];
const terminals = new Map();
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
  })
  .onRequest(acp.methods.client.terminal.create, (ctx) => {
    terminalCalls.push({ method: "terminal/create", ...ctx.params });
    const proc = spawn(ctx.params.command, ctx.params.args ?? [], {
      cwd: ctx.params.cwd,
      stdio: ["ignore", "pipe", "pipe"],
    });
    const terminal = { output: "", exit: null };
    proc.stdout.on("data", (d) => (terminal.output += d));
    proc.stderr.on("data", (d) => (terminal.output += d));
    terminal.exited = new Promise((resolve) =>
      proc.on("close", (code, signal) => {
        terminal.exit = { exitCode: code, signal };
        resolve(terminal.exit);
      }),
    );
    terminal.proc = proc;
    const terminalId = `term-${terminals.size + 1}`;
    terminals.set(terminalId, terminal);
    return { terminalId };
  })
  .onRequest(acp.methods.client.terminal.waitForExit, async (ctx) => {
    terminalCalls.push({ method: "terminal/wait_for_exit", ...ctx.params });
    return await terminals.get(ctx.params.terminalId).exited;
  })
  .onRequest(acp.methods.client.terminal.output, (ctx) => {
    terminalCalls.push({ method: "terminal/output", ...ctx.params });
    const terminal = terminals.get(ctx.params.terminalId);
    return { output: terminal.output, truncated: false, exitStatus: terminal.exit };
  })
  .onRequest(acp.methods.client.terminal.kill, (ctx) => {
    terminalCalls.push({ method: "terminal/kill", ...ctx.params });
    terminals.get(ctx.params.terminalId).proc.kill();
    return {};
  })
  .onRequest(acp.methods.client.terminal.release, (ctx) => {
    terminalCalls.push({ method: "terminal/release", ...ctx.params });
    return {};
  });

const result = await app.connectWith(stream, async (ctx) => {
  const init = await ctx.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: true },
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
console.log(JSON.stringify({ ...result, agentExit: code, updates, permissions, fsCalls, terminalCalls }));
process.exit(0);
