// pi-agent-core side of the overhead benchmark: the Agent class with pi-ai's
// openai-completions model pointed at the mock server. Prints one JSON line.
import { Agent } from "@mariozechner/pi-agent-core";
import { Type } from "@mariozechner/pi-ai";
import { parseArgs, cpuUs, nowUs, assert, w3, W1_FINAL, w2Final, W3_FINAL } from "./common.mjs";

const a = parseArgs();
let toolCalls = 0;
const text = (t) => ({ content: [{ type: "text", text: t }], details: {} });
const tools = [
  { name: "add", label: "add", description: "Add two integers.",
    parameters: Type.Object({ a: Type.Integer(), b: Type.Integer() }),
    execute: async (_id, p) => { toolCalls++; return text(String(p.a + p.b)); } },
  { name: "upper", label: "upper", description: "Upper-case a text.",
    parameters: Type.Object({ text: Type.String() }),
    execute: async (_id, p) => { toolCalls++; return text(p.text.toUpperCase()); } },
];
const model = {
  id: "mock-model", name: "mock", api: "openai-completions", provider: "mock",
  baseUrl: a.baseUrl, reasoning: false, input: ["text"],
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, contextWindow: 128000, maxTokens: 4096,
};
const newAgent = () => new Agent({
  initialState: { systemPrompt: "", model, tools, messages: [] },
  getApiKey: () => "dummy",
});
function finalText(agent) {
  const msgs = agent.state.messages;
  const last = msgs[msgs.length - 1];
  assert(last && last.role === "assistant", `last message is ${last && last.role}: ${agent.state.errorMessage ?? ""} ${last && last.errorMessage}`);
  return last.content.filter((c) => c.type === "text").map((c) => c.text).join("");
}
async function runOnce(agent, prompt, expect, fresh) {
  if (fresh) agent.state.messages = [];
  await agent.prompt(prompt);
  const got = finalText(agent);
  assert(got === expect, `final text ${JSON.stringify(got)} != ${JSON.stringify(expect)}`);
}

let out;
if (a.workload === "w1") {
  const agent = newAgent();
  await runOnce(agent, "warm-up", W1_FINAL, true);
  toolCalls = 0;
  const cpu = [], wall = [];
  const c0 = cpuUs(), t0 = nowUs();
  for (let i = 0; i < a.runs; i++) {
    const c = cpuUs(), t = nowUs();
    await runOnce(agent, `Run ${i}: add 2 and 3, upper-case hi.`, W1_FINAL, true);
    cpu.push(cpuUs() - c); wall.push(nowUs() - t);
  }
  const ctot = cpuUs() - c0, ttot = nowUs() - t0;
  assert(toolCalls === 2 * a.runs, "tool invocations");
  out = { workload: "w1", runs: a.runs, tool_calls: toolCalls, cpu_us: cpu, wall_us: wall, cpu_total_us: ctot, wall_total_us: ttot };
} else if (a.workload === "w2") {
  const agent = newAgent();
  await runOnce(agent, "warm-up", w2Final(0), true);
  toolCalls = 0;
  const cpu = [], wall = [];
  for (let s = 0; s < a.runs; s++) {
    const sc = [], sw = [];
    agent.state.messages = [];
    for (let i = 0; i < 25; i++) {
      const c = cpuUs(), t = nowUs();
      await runOnce(agent, `Turn ${i}: add ${i} and 1.`, w2Final(i), false);
      sc.push(cpuUs() - c); sw.push(nowUs() - t);
    }
    assert(agent.state.messages.length === 100, "history length");
    cpu.push(sc); wall.push(sw);
  }
  assert(toolCalls === 25 * a.runs, "tool invocations");
  out = { workload: "w2", runs: a.runs, tool_calls: toolCalls, turn_cpu_us: cpu, turn_wall_us: wall };
} else if (a.workload === "w3") {
  await runOnce(newAgent(), "warm-up", W3_FINAL, true);
  toolCalls = 0;
  out = await w3(a.concurrency, () => toolCalls, async (i) => {
    await runOnce(newAgent(), `Session ${i}`, W3_FINAL, true);
  });
} else throw new Error(`unknown workload ${a.workload}`);
console.log(JSON.stringify({ ...out, framework: "pi-agent-core", ok: true }));
process.exit(0);
