"""pydantic-ai side of the overhead benchmark: Agent with the OpenAI Chat model and an OpenAI
provider pointed at the mock server (streaming requests). Prints one JSON line."""
import asyncio
import json
import sys

try:
    import httpx2 as httpx  # openai >= 3 ships its own fork
except ImportError:
    import httpx
from openai import AsyncOpenAI, DefaultAsyncHttpxClient
# This file is named like the package: import the package with the script folder off the path.
_here = sys.path.pop(0)
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402

try:
    from pydantic_ai.models.openai import OpenAIChatModel as ChatModel
except ImportError:  # older releases
    from pydantic_ai.models.openai import OpenAIModel as ChatModel
sys.path.insert(0, _here)

from benchcommon import Counter, dispatch, parse_args

counter = Counter()


def add(a: int, b: int) -> str:
    """Add two integers."""
    counter.n += 1
    return str(a + b)


def upper(text: str) -> str:
    """Upper-case a text."""
    counter.n += 1
    return text.upper()


async def ignore_events(_ctx, events):
    # Passing an event handler makes the run stream every model response (the mock only streams).
    async for _ in events:
        pass


async def main():
    args = parse_args()
    http = DefaultAsyncHttpxClient(limits=httpx.Limits(max_connections=None, max_keepalive_connections=None),
                                   timeout=httpx.Timeout(600.0))
    client = AsyncOpenAI(base_url=args.base_url, api_key="dummy", http_client=http, max_retries=0)
    model = ChatModel("mock-model", provider=OpenAIProvider(openai_client=client))
    agent = Agent(model, tools=[add, upper])

    async def run_once(prompt, expect, history):
        res = await agent.run(prompt, message_history=history, event_stream_handler=ignore_events)
        assert res.output == expect, f"final {res.output!r} != {expect!r}"
        return res.all_messages()

    def history_len(h):
        # request(user), response(call), request(tool return), response(text) per turn
        return len(h)

    out = await dispatch(args, counter, run_once, history_len)
    out.update(framework="pydantic-ai", ok=True)
    print(json.dumps(out))
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main())
