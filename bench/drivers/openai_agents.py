"""OpenAI Agents SDK side of the overhead benchmark: OpenAIChatCompletionsModel on an
AsyncOpenAI client pointed at the mock server. Prints one JSON line."""
import asyncio
import json
import sys

try:
    import httpx2 as httpx  # openai >= 3 ships its own fork
except ImportError:
    import httpx
from openai import AsyncOpenAI, DefaultAsyncHttpxClient
from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled

from benchcommon import Counter, dispatch, parse_args

counter = Counter()


@function_tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    counter.n += 1
    return str(a + b)


@function_tool
def upper(text: str) -> str:
    """Upper-case a text."""
    counter.n += 1
    return text.upper()


async def main():
    args = parse_args()
    set_tracing_disabled(True)
    # No connection cap, so W3 can really hold K sessions (the default pool stops at 1,000).
    http = DefaultAsyncHttpxClient(limits=httpx.Limits(max_connections=None, max_keepalive_connections=None),
                                   timeout=httpx.Timeout(600.0))
    client = AsyncOpenAI(base_url=args.base_url, api_key="dummy", http_client=http, max_retries=0)
    agent = Agent(name="bench", instructions="", tools=[add, upper],
                  model=OpenAIChatCompletionsModel(model="mock-model", openai_client=client))

    async def run_once(prompt, expect, history):
        inp = (history or []) + [{"role": "user", "content": prompt}]
        # Streamed run: the mock (like every agent UI) answers with SSE.
        res = Runner.run_streamed(agent, inp if history else prompt)
        async for _ in res.stream_events():
            pass
        assert res.final_output == expect, f"final {res.final_output!r} != {expect!r}"
        return res.to_input_list()

    def history_len(h):
        # user, assistant-with-call (one function_call item), tool output, assistant text
        return sum(1 for i in h if i.get("role") in ("user", "assistant") or i.get("type") == "function_call_output"
                   or (i.get("type") == "function_call"))

    out = await dispatch(args, counter, run_once, history_len)
    out.update(framework="openai-agents", ok=True)
    print(json.dumps(out))
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main())
